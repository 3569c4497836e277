"""Start the BabyAI-Text episode server: ``python BALROG/deploy_env.py deploy.port=8080``.

Arguments are dotted ``key=value`` pairs under ``deploy.``: every field of
``ServerSettings`` (host, port, episode_ttl_s, max_episodes, max_episodes_per_owner,
max_body_bytes, read_timeout_s, first_byte_timeout_s, request_timeout_s, max_connections,
max_requests_per_connection, max_connection_age_s, verbose); ``--help`` lists them with their
defaults. The server serves only you: it writes its token to ``babyai-server-<port>.token``
(mode 0600) in your runtime directory, where the runs you start find it (it says where on
stderr; the token itself is never printed). ``SPEEDRUNNER_BABYAI_TOKEN`` sets the token instead. Works from a plain repo checkout: if ``speedrunner``
is not importable, the checkout's ``src`` directory is put on ``sys.path`` first.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

try:
    import speedrunner  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from speedrunner.benchmarks.babyai.server import ServerSettings, serve  # noqa: E402
from speedrunner.core.names import unknown  # noqa: E402

USAGE = "usage: python BALROG/deploy_env.py [deploy.port=8080] [deploy.host=127.0.0.1] ..."


def parse(argv: list[str]) -> ServerSettings:
    """``deploy.<field>=<value>`` pairs -> ServerSettings; ValueError says what is wrong."""
    fields = {f.name: f for f in dataclasses.fields(ServerSettings)}
    values: dict[str, object] = {}
    for arg in argv:
        key, sep, raw = arg.partition("=")
        if not sep or not key:
            raise ValueError(f"expected key=value, got {arg!r}")
        name = key.removeprefix("deploy.")
        if name not in fields or not key.startswith("deploy."):
            valid = [f"deploy.{n}" for n in fields]
            message = unknown("key", f"deploy.{name}", valid)  # suggest as if prefixed
            raise ValueError(message.replace(f"'deploy.{name}'", repr(key), 1))
        kind = type(getattr(ServerSettings(), name))
        try:
            if kind is bool:
                if raw.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(raw)
                values[name] = raw.lower() in ("true", "1")
            else:
                values[name] = kind(raw)
        except ValueError as e:
            raise ValueError(f"{key} must be a {kind.__name__}, got {raw!r}") from e
    return ServerSettings(**values)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in args):
        print(USAGE)
        for f in dataclasses.fields(ServerSettings):
            print(f"  deploy.{f.name} (default {f.default!r})")
        return 0
    try:
        settings = parse(args)
    except ValueError as e:
        print(f"deploy_env.py: error: {e}\n{USAGE}", file=sys.stderr)
        return 2
    serve(settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
