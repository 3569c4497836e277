"""Who may use a BabyAI-Text server: whoever holds the secret it made at start (as Jupyter does).

A server writes its token to ``<runtime dir>/babyai-server-<host>-<port>.token`` (mode 0600, in a
directory only its user can enter), so the runs that user starts on this machine find it by port
(the host keeps servers on the same port of two nodes apart when the home is shared); another
machine (or another runtime directory) gives it in ``SPEEDRUNNER_BABYAI_TOKEN``. The token only ever
travels in the ``Authorization`` header; nothing prints or logs it.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hmac
import os
import secrets
import socket
import stat
from pathlib import Path
from urllib.parse import urlsplit

TOKEN_ENV = "SPEEDRUNNER_BABYAI_TOKEN"
"""The token itself: a server started with it set uses it, and every client sends it."""
RUNTIME_DIR_ENV = "SPEEDRUNNER_RUNTIME_DIR"
"""Where token files live (default ``$XDG_DATA_HOME/speedrunner/runtime``, i.e.
``~/.local/share/speedrunner/runtime``): one place for every session of the user."""
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
SCHEME = "Bearer "


class TokenFileError(OSError):
    """The runtime directory is not private to this user: a token written there could leak."""


def runtime_dir() -> Path:
    given = os.environ.get(RUNTIME_DIR_ENV)
    if given:
        return Path(given)
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "speedrunner" / "runtime"


def token_path(port: int) -> Path:
    return runtime_dir() / f"babyai-server-{socket.gethostname()}-{port}.token"


def new_token() -> str:
    """``SPEEDRUNNER_BABYAI_TOKEN`` if set (the user shares one token on purpose),
    else a fresh one."""
    return os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(32)


def header(token: str | None) -> dict[str, str]:
    return {"Authorization": SCHEME + token} if token else {}


def matches(authorization: str | None, token: str) -> bool:
    """Constant-time check of an ``Authorization: Bearer <token>`` header value."""
    given = (authorization or "").removeprefix(SCHEME).strip()
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode())


def _private_dir() -> Path:
    """The runtime directory, made 0700 if missing; refused if another user could enter it."""
    path = runtime_dir()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise TokenFileError(
            f"{path} must be a directory of yours that only you can enter (mode 0700) "
            f"to hold the BabyAI server's token: chmod 700 {path}, or set "
            f"{RUNTIME_DIR_ENV} to one that is"
        )
    return path


class TokenFile:
    """The token file of one running server: written at start, removed at stop.

    The server keeps a shared lock on it while it runs, so a later server can tell a file left
    by a killed one (nobody holds its lock) and remove it.
    """

    def __init__(self, port: int, token: str) -> None:
        self.path, self._token = token_path(port), token
        directory = _private_dir()
        _prune_stale(directory)
        tmp = directory / f".{self.path.name}.{secrets.token_hex(4)}.tmp"
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        try:
            os.write(fd, (token + "\n").encode())
            os.fsync(fd)
            fcntl.flock(fd, fcntl.LOCK_SH)
            os.replace(tmp, self.path)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        self._fd: int | None = fd

    def remove(self) -> None:
        """Delete the file if it is still ours (a newer server on the port may have replaced it)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                self.path.unlink()
        os.close(fd)


def _prune_stale(directory: Path) -> None:
    """Remove this host's token files whose server is gone
    (killed before it could remove its own)."""
    for path in directory.glob(f"babyai-server-{glob.escape(socket.gethostname())}-*.token"):
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if os.stat(path).st_ino == os.fstat(fd).st_ino:
                    path.unlink()
            finally:
                os.close(fd)


def read_token_file(port: int) -> str | None:
    """The token a server of this user wrote for ``port``; None if there is none (or not ours)."""
    try:
        fd = os.open(token_path(port), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, encoding="utf-8") as f:
        if os.fstat(fd).st_uid != os.getuid():
            return None
        return f.read(1024).strip() or None


def find_token(url: str) -> str | None:
    """The token to send to the server at ``url``: ``SPEEDRUNNER_BABYAI_TOKEN``, else (local
    URLs) the token file of the server on that port."""
    given = os.environ.get(TOKEN_ENV)
    if given:
        return given
    parts = urlsplit(url)
    if parts.hostname not in LOCAL_HOSTS:
        return None
    return read_token_file(parts.port or 80)


def where(url: str) -> str:
    """How a client gets the token of the server at ``url``: for messages."""
    port = urlsplit(url).port or 80
    return (
        f"runs find the token of a server you started on this machine in {token_path(port)}; "
        f"otherwise set {TOKEN_ENV} to the token in the server's token file"
    )
