"""Optional experiment tracking: a copy of what the run's own files hold, sent to W&B.

The run directory stays the record. The tracker only *follows* it: after every checkpoint it
takes the metrics and evaluation rows that checkpoint made durable and it has not logged yet,
names them in its state (``tracking.json``, written atomically) as the *pending* batch with
the W&B step each row gets, logs them at those steps, then moves its cursor past them.
``--resume`` reopens the same W&B run (its id is in ``tracking.json``), asks W&B which step
it holds last (online: the resumed run's step; offline: the highest step in the run's earlier
offline files), sends the pending rows above it and goes on from the cursor. So every row is
logged exactly once, with the numbers ``metrics.jsonl`` has, wherever a kill lands — also
between a log call and the cursor write.

What is logged: the resolved config (``config.resolved.json``, which never holds a key), one
row per training episode (``train/*``), one per evaluation point (``eval/*``), running cost
and token totals (``totals/*``), knowledge size per generation (``knowledge/*``), the
speedrun record and the final evaluation (run summary), and the report's plots as images.
Never a prompt, an API key, the console or the git remote (which can carry a token).

Tracking must not cost a run: a W&B failure mid-run is a warning, and the run goes on.
"""

from __future__ import annotations

import json
import netrc
import os
import secrets
import string
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlparse

from speedrunner.core.atomic import atomic_write_json, read_jsonl
from speedrunner.core.records import EvalRow, MetricsRow, RunSummary, dump_row, validate_rows
from speedrunner.errors import ConfigError, MissingAPIKeyError

if TYPE_CHECKING:
    from speedrunner.core.config.schema import RunConfig, WandbSection
    from speedrunner.core.runtime.checkpoint import Checkpoint

TRACKING_FILE = "tracking.json"
WANDB_DIR = "wandb"
"""W&B's own files (offline runs, logs) live here, inside the run directory."""


class RunTracker(Protocol):
    def after_checkpoint(self, checkpoint: Checkpoint) -> None: ...
    def finish(self, summary: RunSummary | None, *, exit_code: int) -> None: ...


class NoTracker:
    """No ``logging`` section: nothing leaves the run directory."""

    def after_checkpoint(self, checkpoint: Checkpoint) -> None:
        pass

    def finish(self, summary: RunSummary | None, *, exit_code: int) -> None:
        pass


def check_tracking(config: RunConfig) -> None:
    """Refuse before anything runs when the configured tracker cannot work (exit 2)."""
    wandb_cfg = config.logging.wandb if config.logging is not None else None
    if wandb_cfg is None:
        return
    try:
        import wandb  # noqa: F401
    except ImportError as e:
        raise ConfigError(
            "logging.wandb is set but the wandb package is not installed: "
            'pip install -e ".[wandb]" (or remove the logging section)'
        ) from e
    if _mode(wandb_cfg) == "online" and not _logged_in():
        raise MissingAPIKeyError(
            "logging.wandb logs online but no W&B login was found (WANDB_API_KEY or "
            "~/.netrc): run `wandb login`, or set logging.wandb.mode: offline "
            "(WANDB_MODE=offline) and `wandb sync` later"
        )


def open_tracker(config: RunConfig, run_dir: Path, *, run_id: str, scripted: bool) -> RunTracker:
    wandb_cfg = config.logging.wandb if config.logging is not None else None
    if wandb_cfg is None:
        return NoTracker()
    try:
        return WandbTracker(config, wandb_cfg, run_dir, run_id=run_id, scripted=scripted)
    except Exception as e:  # noqa: BLE001 - e.g. W&B unreachable: the run's own files still record it all
        print(
            f"warning: W&B logging could not start ({type(e).__name__}: {e}); the run goes on "
            "without it, and a later --resume logs what it missed",
            file=sys.stderr,
        )
        return NoTracker()


def _mode(cfg: WandbSection) -> str:
    return "offline" if os.environ.get("WANDB_MODE") in ("offline", "dryrun") else cfg.mode


def _logged_in() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = (
        urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
        or "api.wandb.ai"
    )
    try:
        return netrc.netrc(os.environ.get("NETRC") or None).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


class WandbTracker:
    """One W&B run per SpeedRunner run, resumed under the same id."""

    def __init__(
        self, config: RunConfig, cfg: WandbSection, run_dir: Path, *, run_id: str, scripted: bool
    ) -> None:
        import wandb

        from speedrunner.core.rundir import experiment_name

        self.run_dir = run_dir
        self._warned = False
        self.state = _read_state(run_dir)
        self.state.setdefault(
            "id", "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))
        )
        for key in ("metrics_rows", "eval_rows", "generations"):
            self.state.setdefault(key, 0)
        self._save_state()  # the id first: a kill before the first row must resume the same run
        from speedrunner.core.wandb_log import last_offline_step

        # Read before this process's own offline file exists: what earlier processes left.
        held = last_offline_step(run_dir, self.state["id"]) if _mode(cfg) == "offline" else -1
        experiment = f"{config.benchmark.name}/{experiment_name(config)}"
        resolved = json.loads((run_dir / "config.resolved.json").read_text("utf-8"))
        (run_dir / WANDB_DIR).mkdir(exist_ok=True)
        tags = list(
            dict.fromkeys(
                [
                    *cfg.tags,
                    config.method.name,
                    config.benchmark.name,
                    *(["scripted"] if scripted else []),
                ]
            )
        )
        self.run = wandb.init(
            project=cfg.project,
            entity=cfg.entity,
            group=cfg.group or experiment,
            name=f"{experiment}/seed{config.run.seed}/{run_id}",
            id=self.state["id"],
            resume="allow",
            config=resolved,
            tags=tags,
            dir=str(run_dir),
            mode=_mode(cfg),
            notes="SCRIPTED MODEL: these numbers come from no LLM" if scripted else None,
            settings=wandb.Settings(
                console="off", save_code=False, disable_git=True, x_disable_meta=True, silent=True
            ),
        )
        where = (
            f"offline, upload with: wandb sync {self.run.dir.removesuffix('/files')}"
            if _mode(cfg) == "offline"
            else self.run.url or "online"
        )
        print(f"W&B: run {self.state['id']} ({where})", flush=True)
        for section, step in (
            ("train", "train/rollout"),
            ("eval", "eval/rollout"),
            ("totals", "totals/rollout"),
            ("knowledge", "knowledge/generation"),
        ):
            self.run.define_metric(step)
            self.run.define_metric(f"{section}/*", step_metric=step)
        held = max(held, int(self.run.step) - 1)  # online: the step the resumed run holds last
        pending = self.state.get("pending")
        if pending is not None:  # a kill fell inside a batch: send only what W&B lacks
            self._send(pending, held=held)
        # A run tracked before steps were explicit has no "step": continue after what W&B holds.
        self.state["step"] = max(int(self.state.get("step", 0)), held + 1)

    # ---------------------------------------------------------------- the loop's calls
    def after_checkpoint(self, checkpoint: Checkpoint) -> None:
        try:
            self._log_new_rows(checkpoint)
        except Exception as e:  # noqa: BLE001 - tracking never ends a run
            self._warn(e)

    def finish(self, summary: RunSummary | None, *, exit_code: int) -> None:
        try:
            if summary is not None and exit_code == 0:
                self._log_final(summary)
            self.run.finish(exit_code=exit_code)
        except Exception as e:  # noqa: BLE001
            self._warn(e)

    # ---------------------------------------------------------------- what is logged
    def _log_new_rows(self, checkpoint: Checkpoint) -> None:
        records: list[dict[str, Any]] = []
        metrics = read_jsonl(self.run_dir / "metrics.jsonl")[: checkpoint.metrics_rows]
        for row in validate_rows(
            MetricsRow, metrics[self.state["metrics_rows"] :], "metrics.jsonl"
        ):
            records.append({f"train/{k}": v for k, v in _flat(dump_row(row)).items()})
        evals = read_jsonl(self.run_dir / "eval.jsonl")[: checkpoint.eval_rows]
        for e in validate_rows(EvalRow, evals[self.state["eval_rows"] :], "eval.jsonl"):
            records.append(
                {f"eval/{k}": v for k, v in _flat(dump_row(e)).items()}
            )  # per_episode: a list
        if len(metrics) > self.state["metrics_rows"]:
            t = checkpoint.totals
            records.append(
                {
                    "totals/rollout": t.episodes,
                    "totals/cost_usd": t.cost_usd,
                    "totals/llm_calls": t.llm_calls,
                    "totals/output_tokens": t.output_tokens,
                }
            )
        generations = self._knowledge(checkpoint.knowledge_version)
        for g in generations[self.state["generations"] :]:
            records.append({f"knowledge/{k}": v for k, v in g.items()})
        cursor = {
            "metrics_rows": len(metrics),
            "eval_rows": len(evals),
            "generations": max(self.state["generations"], len(generations)),
        }
        if records or any(self.state[k] != v for k, v in cursor.items()):
            self._send({"first_step": self.state["step"], "records": records, "cursor": cursor})

    def _send(self, batch: dict[str, Any], *, held: int = -1) -> None:
        """Log a batch exactly once: named (pending, with its steps) before any row is sent, its
        rows logged at their own steps, skipping those W&B already holds (``held``: the last
        step it has), then the cursor moved past it."""
        self.state["pending"] = batch
        self._save_state()
        first = int(batch["first_step"])
        for i, record in enumerate(batch["records"]):
            if first + i > held:
                self.run.log(
                    record, step=first + i, commit=True
                )  # written now, not held for more keys
        self.state.update(batch["cursor"])
        self.state["step"] = first + len(batch["records"])
        del self.state["pending"]
        self._save_state()

    def _knowledge(self, upto: int) -> list[dict[str, Any]]:
        from speedrunner.core.reporting.knowledge import generations

        rows = []
        for g in generations(self.run_dir):
            if g.generation > upto:
                break
            rows.append(
                {
                    k: v
                    for k, v in vars(g).items()
                    if k != "text" and v is not None and not isinstance(v, (dict, list))
                }
            )
        return rows

    def _log_final(self, summary: RunSummary) -> None:
        import wandb

        parts = {
            "final_eval": summary.final_eval,
            "training": summary.training,
            "spending": summary.spending,
        }
        for key, value in _flat(
            {name: {} if part is None else dump_row(part) for name, part in parts.items()}
        ).items():
            self.run.summary[key] = value
        speedrun = self.run_dir / "speedrun.json"
        if speedrun.exists():
            for key, value in _flat(json.loads(speedrun.read_text("utf-8"))).items():
                self.run.summary[f"speedrun/{key}"] = value
        from speedrunner.core.reporting import build_report

        report = build_report([self.run_dir], self.run_dir / "report")
        images = {
            f"report/{p.stem}": wandb.Image(str(p)) for p in sorted(report.out.glob("plots/*.png"))
        }
        if images:
            self.run.log(images, step=self.state["step"], commit=True)
            self.state["step"] += 1
            self._save_state()

    # ---------------------------------------------------------------- state
    def _save_state(self) -> None:
        data = _read_state_file(self.run_dir)
        data["wandb"] = self.state
        atomic_write_json(self.run_dir / TRACKING_FILE, data)

    def _warn(self, e: Exception) -> None:
        if not self._warned:
            print(
                f"warning: W&B logging failed ({type(e).__name__}: {e}); the run goes on and its "
                "own files are complete",
                file=sys.stderr,
            )
            self._warned = True


def _read_state_file(run_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((run_dir / TRACKING_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _read_state(run_dir: Path) -> dict[str, Any]:
    state = _read_state_file(run_dir).get("wandb")
    return dict(state) if isinstance(state, dict) else {}


def _flat(row: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"tokens": {"output": 3}}`` -> ``{"tokens.output": 3}``; lists are left out."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat(value, f"{name}."))
        elif not isinstance(value, list):
            out[name] = value
    return out
