"""Every error SpeedRunner raises on purpose, named for the user's mistake.

Our own bugs surface as ordinary Python exceptions; everything here is something a
user can fix, and the message says how.
"""

from __future__ import annotations

EXIT_CODES = """\
Exit codes (the same for every speedrunner command):
  0  done
  2  a problem you can fix, found before anything ran or was written (bad config or flags,
     unknown name, missing API key, an endpoint down, a run directory that is read-only,
     full or busy); the message says what and how to fix it
  1  a failure while working, after the input was accepted (a model or env failed for
     good, the disk filled up, a sweep run did not finish, or a bug in SpeedRunner, shown
     as a traceback); nothing stored is lost, and a run continues with --resume
  3  stopped by a spending cap (run.max_cost_usd, or a sweep's max_cost_usd) before a call
     that could have crossed it; status budget_reached, nothing stored is lost; continue
     with --resume and a higher cap (docs/spending.md)
  130/143  stopped by Ctrl-C / SIGTERM; a run continues with --resume
  141  a training run whose output reader went away (`| head`): stopped as by Ctrl-C
"""
"""One meaning per exit code, printed by ``speedrunner --help`` and every train ``--help``."""


class SpeedRunnerError(Exception):
    """Root of all SpeedRunner errors; raised only through a subclass."""


class ConfigError(SpeedRunnerError):
    """Raised when a run configuration cannot be loaded or validated.

    ``problems`` holds one line per problem so the CLI can print them all at once.
    """

    def __init__(self, problems: list[str] | str, *, source: str | None = None) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.source = source
        head = f"invalid configuration ({source})" if source else "invalid configuration"
        super().__init__(head + ":\n" + "\n".join(f"  - {p}" for p in self.problems))


class MissingFileError(ConfigError):
    """Raised when a file named by the user (config, script, run directory) does not exist."""


class WouldOverwriteError(SpeedRunnerError):
    """Raised when an operation would overwrite a file or run the user may have edited."""


class UnknownNameError(SpeedRunnerError, KeyError):
    """Raised when a registry lookup (benchmark, method, task, provider) names nothing known."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class ImpossibleCombinationError(ConfigError):
    """Raised when config values are each valid but cannot go together (e.g. voyager on BabyAI)."""


class EnvError(SpeedRunnerError):
    """Raised when a benchmark environment cannot be created or driven (bad task, dead server)."""


class InvalidActionError(EnvError):
    """Raised by an env when asked to execute something that is not one of its actions."""


class ServerUnavailableError(EnvError):
    """Raised when a configured environment server does not answer and cannot be started."""


class LLMError(SpeedRunnerError):
    """Raised when a model call fails for good (after retries, or on a non-retryable status)."""


class ContextLengthError(LLMError):
    """Raised when a request does not fit the model's context window (HTTP 400 saying so).

    The actor ends the episode on it (stop reason ``context_length``) instead of the run.
    """


class MissingAPIKeyError(LLMError):
    """Raised when a provider needs an API key that is not in the environment."""


class CheckpointError(SpeedRunnerError):
    """Raised when a run directory cannot be resumed: corrupt, foreign or missing checkpoint."""


class RunFormatError(CheckpointError):
    """Raised when a run directory was written in another run-directory format version than
    this SpeedRunner reads (``core.rundir.RUN_FORMAT``): it is refused, never upgraded."""


class SandboxError(SpeedRunnerError):
    """Raised when untrusted code cannot be run in isolation (bad code, limits exceeded)."""


class SandboxUnavailableError(SandboxError):
    """Raised when the requested sandbox tier does not work on this machine
    (the message says why)."""


class PreflightError(SpeedRunnerError):
    """Raised before a run starts when an endpoint it needs (model API,
    env server) is down or wrong."""


class RunDirError(SpeedRunnerError):
    """Raised when a run directory cannot be created or written (read-only, full, in use)."""


class ReportInputError(SpeedRunnerError):
    """Raised when ``speedrunner report`` is given a path that holds no run directory it can
    read."""


class InvalidCodebookError(SpeedRunnerError):
    """Raised when code that did not pass codebook validation is about to become a generation."""


class LeaderboardError(SpeedRunnerError):
    """Raised when LEADERBOARD.md cannot be read (a hand edit broke it) or a result cannot be added
    or removed (duplicate, scripted, still running, not found)."""
