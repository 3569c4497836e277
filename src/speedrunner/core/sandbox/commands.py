"""How each isolation tier wraps the child's command line.

- ``bwrap``: a bubblewrap container whose root is an empty tmpfs. Only the system
  directories an interpreter needs (``/usr``, the ``/lib*`` links, a few ``/etc`` files),
  the interpreter's own prefix and site-packages, the ``speedrunner`` source root, the package
  of a preloaded plug-in module (``import_roots``) and the paths the caller asks for are
  mounted, all read-only; ``/tmp`` and the scratch
  directory are small private tmpfs mounts; new pid, network (loopback only), ipc and uts
  namespaces; SIGKILL when the parent dies. A root parent runs bwrap without a user
  namespace (so the child can become the real uid 65534, for which ``RLIMIT_NPROC``
  counts — under a user namespace a root parent's sandbox user *is* root to the kernel,
  can read every root-owned file that is mounted, and has no process limit), keeping only
  CAP_SETUID/CAP_SETGID for the child's bootstrap to drop to 65534 before it runs
  untrusted code. A non-root parent uses a user namespace with uid 65534.
- ``unshare``: util-linux ``unshare`` with new network (no interface up), pid, ipc, uts and
  mount namespaces; inside, ``enter.py`` builds the same read-only view as bwrap's (sized
  tmpfs ``/tmp``, ``/dev/shm`` and scratch, a fresh ``/proc``) and ``pivot_root``s into it.
- ``rlimits``: the command as it is (through ``enter.py`` for the seccomp filter); only
  limits and the uid drop protect the machine (a root parent gives each sandbox a uid of
  its own, so sandboxes cannot signal each other).

Every tier runs under the seccomp filter of ``seccomp.py`` (no new user namespaces), and
``cgroups.join_prefix`` puts the whole command in the sandbox's cgroup first.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import secrets
import shutil
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from speedrunner.core.sandbox import seccomp

TIERS = ("bwrap", "unshare", "rlimits")
"""Isolation tiers, strongest first."""

NOBODY = 65534
"""The uid/gid untrusted code runs as when the parent is root."""

_SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/alternatives",
)
_TMP_BYTES = 16 * 1024 * 1024


OWN_UIDS = range(2_100_000_000, 2_140_000_000)
"""Where a root parent's rlimits-tier sandboxes take a uid of their own (no pid namespace
separates them, so only a uid of its own keeps ``kill(-1)`` from reaching another sandbox,
and lets the parent find a double-forked daemon by its uid)."""


def drop_to_uid(tier: str = "bwrap") -> int | None:
    """The uid the child becomes before untrusted code runs (``None``: it already runs
    unprivileged).

    A root parent: 65534 under bwrap and unshare (their pid namespaces keep sandboxes apart),
    a fresh uid no process has under rlimits.
    """
    if os.geteuid() != 0:
        return None
    if tier != "rlimits":
        return NOBODY
    rng = secrets.SystemRandom()
    while True:
        uid = rng.randrange(OWN_UIDS.start, OWN_UIDS.stop)
        if not _uid_in_use(uid):
            return uid


def _uid_in_use(uid: int) -> bool:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    return True
            except OSError:
                continue
    return False


def tool(name: str) -> str | None:
    """Absolute path of a wrapper binary, looked up in the system directories (not ``$PATH``)."""
    return shutil.which(name, path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")


def package_root() -> Path:
    """The directory that holds the ``speedrunner`` package the parent runs (src/ or
    site-packages)."""
    import speedrunner

    return Path(speedrunner.__file__).resolve().parent.parent


@dataclass(frozen=True)
class ImportRoot:
    """Where the parent imports a top-level package from: ``entry`` goes on the child's
    ``sys.path``; only ``visible`` (the package directory, or the module file) is mounted."""

    entry: Path
    visible: Path


def import_roots(modules: Iterable[str]) -> list[ImportRoot]:
    """Where the parent imports ``modules`` from, for those the child would not find by itself.

    A plug-in installed editable (a ``.pth`` path entry or an editable finder, neither of which
    runs in a child started with ``-S``) or a source tree on ``PYTHONPATH`` (ignored under ``-I``)
    is found where the parent loads the module itself from (not where its top-level name
    resolves: a same-named directory in the cwd shadows it there), and only its top-level package
    is made visible. The standard library, ``speedrunner`` and site-packages need nothing.
    """
    known = {Path(p).resolve() for p in site_packages()} | {package_root()}
    roots: dict[Path, ImportRoot] = {}
    for module in dict.fromkeys(modules):
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top == __name__.split(".")[0]:  # package_root() has it
            continue
        root = _import_root(module)
        if root is not None and root.entry not in known:
            roots.setdefault(root.visible, root)
    return list(roots.values())


def _import_root(module: str) -> ImportRoot | None:
    """The top-level package (or module) ``module`` is loaded from; ``None`` when it is not a
    file laid out as its dotted name (built in, frozen, or mapped elsewhere by a finder)."""
    loaded = sys.modules.get(module)
    try:
        spec = loaded.__spec__ if loaded is not None else importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return None
    parts = module.split(".")
    place = Path(spec.origin).resolve()
    if spec.submodule_search_locations is not None:  # a package: its __init__.py
        place = place.parent
    elif place.stem != parts[-1]:
        return None
    for name in reversed(parts[1:]):
        if place.name != name and place.stem != name:
            return None
        place = place.parent
    if place.name != parts[0] and place.stem != parts[0]:
        return None
    return ImportRoot(place.parent, place)


def site_packages() -> list[str]:
    """The parent's site-packages directories, which a child started with ``-S`` (no ``site``
    module, so no ``.pth`` hooks) puts on its ``sys.path`` itself."""
    import site

    return [p for p in site.getsitepackages() if Path(p).is_dir()]


@functools.cache
def interpreter_paths() -> list[Path]:
    """What the interpreter needs to start and import installed packages, nothing else (fixed for
    the process's life; cached because every sandbox start asks)."""
    paths = {
        Path(sys.prefix),
        Path(sys.base_prefix),
        Path(sys.exec_prefix),
        Path(sys.base_exec_prefix),
        Path(sys.executable).parent,
    }
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        value = sysconfig.get_paths().get(key)
        if value:
            paths.add(Path(value))
    return sorted({p.resolve() for p in paths if p.exists()})


def wrap(
    tier: str,
    argv: Sequence[str],
    *,
    scratch: Path,
    read_only: Iterable[Path] = (),
    scratch_bytes: int = 64 * 1024 * 1024,
    seccomp_fd: int | None = None,
    root: Path | None = None,
) -> list[str]:
    """``argv`` run under ``tier``; ``read_only`` paths are mounted at the same place (bwrap,
    unshare).

    ``seccomp_fd`` (bwrap) holds the filter of ``seccomp.py``; the other tiers install it in
    ``enter.py``. ``root`` (unshare) is an empty directory to build the private root on.
    """
    if tier == "rlimits":
        return [*enter_prefix({"seccomp": seccomp.supported()}), *argv]
    if tier == "unshare":
        unshare = tool("unshare")
        if unshare is None:
            raise FileNotFoundError("unshare (util-linux) is not installed")
        if root is None:
            raise ValueError("the unshare tier needs an empty directory to build its root on")
        user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        setpriv = tool(
            "setpriv"
        )  # unshare itself must die with the run, then --kill-child does the rest
        outer = [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []
        spec = unshare_root_spec(
            scratch=scratch, read_only=read_only, scratch_bytes=scratch_bytes, root=root
        )
        return [
            *outer,
            unshare,
            *user,
            "--mount",
            "--propagation",
            "private",
            "--net",
            "--pid",
            "--ipc",
            "--uts",
            "--fork",
            "--kill-child",
            "--",
            *enter_prefix(spec),
            *argv,
        ]
    if tier == "bwrap":
        return [
            *bwrap_prefix(
                scratch=scratch,
                read_only=read_only,
                scratch_bytes=scratch_bytes,
                seccomp_fd=seccomp_fd,
            ),
            "--",
            *argv,
        ]
    raise ValueError(f"unknown sandbox tier {tier!r} (tiers: {', '.join(TIERS)})")


ENTER_BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from speedrunner.core.sandbox.enter import main; main(sys.argv[2], sys.argv[3:])"
)


def enter_prefix(spec: dict[str, object]) -> list[str]:
    """``enter.py`` with ``spec``: it sets the sandbox up, then execs the argv that follows."""
    return [
        sys.executable,
        "-I",
        "-B",
        "-S",
        "-c",
        ENTER_BOOTSTRAP,
        str(package_root()),
        json.dumps(spec),
    ]


def visible_paths(read_only: Iterable[Path]) -> tuple[list[str], list[tuple[str, str]]]:
    """What a sandbox's private root shows, read-only: (paths to bind, (target, link) symlinks)."""
    binds, links = ["/usr"], []
    for link in _SYSTEM_LINKS:
        if os.path.islink(link):
            links.append((os.readlink(link), link))
        elif os.path.isdir(link):
            binds.append(link)
    binds += [p for p in _ETC_FILES if os.path.exists(p)]
    binds += [
        str(p)
        for p in _outermost(
            [*interpreter_paths(), package_root(), *(Path(p).resolve() for p in read_only)]
        )
    ]
    return binds, links


def unshare_root_spec(
    *, scratch: Path, read_only: Iterable[Path], scratch_bytes: int, root: Path
) -> dict[str, object]:
    """What ``enter.py`` builds under unshare: the same view as bwrap's (see the module
    docstring)."""
    binds, links = visible_paths(read_only)
    scratch = scratch.resolve()
    return {
        "root": str(root),
        "binds": binds,
        "symlinks": links,
        "seccomp": seccomp.supported(),
        "tmpfs": [
            ("/tmp", _TMP_BYTES, "1777"),
            ("/dev/shm", _TMP_BYTES, "1777"),
            (str(scratch), scratch_bytes, "1777"),
        ],
        "chdir": str(scratch),
    }


def bwrap_prefix(
    *, scratch: Path, read_only: Iterable[Path], scratch_bytes: int, seccomp_fd: int | None = None
) -> list[str]:
    bwrap = tool("bwrap")
    if bwrap is None:
        raise FileNotFoundError(
            "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
        )
    args = [
        bwrap,
        "--die-with-parent",
        "--new-session",
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "sandbox",
    ]
    if os.geteuid() == 0:
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args += ["--unshare-user", "--disable-userns", "--uid", str(NOBODY), "--gid", str(NOBODY)]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    args += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--perms",
        "1777",
        "--size",
        str(_TMP_BYTES),
        "--tmpfs",
        "/dev/shm",
        "--perms",
        "1777",
        "--size",
        str(_TMP_BYTES),
        "--tmpfs",
        "/tmp",
    ]
    args += ["--ro-bind", "/usr", "/usr"]
    for link in _SYSTEM_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    for path in _ETC_FILES:
        args += ["--ro-bind-try", path, path]
    made: set[Path] = {Path("/"), Path("/usr"), Path("/tmp"), Path("/dev"), Path("/proc")}
    for path in _outermost(
        [*interpreter_paths(), package_root(), *(Path(p).resolve() for p in read_only)]
    ):
        args += _parents(path, made) + ["--ro-bind", str(path), str(path)]
    scratch = scratch.resolve()
    args += _parents(scratch, made)
    args += [
        "--perms",
        "1777",
        "--size",
        str(scratch_bytes),
        "--tmpfs",
        str(scratch),
        "--chdir",
        str(scratch),
    ]
    return args


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """Distinct paths, dropping any inside another one or inside ``/usr`` (already mounted)."""
    kept: list[Path] = []
    for path in sorted(set(paths), key=lambda p: len(p.parts)):
        if path == Path("/"):
            raise ValueError("refusing to mount / into the sandbox")
        if path.is_relative_to("/usr") or any(path.is_relative_to(k) for k in kept):
            continue
        kept.append(path)
    return kept


def _parents(path: Path, made: set[Path]) -> list[str]:
    """World-traversable directories for every missing ancestor of a mount point.

    bwrap would create them 0700 otherwise, which uid 65534 cannot enter.
    """
    args: list[str] = []
    for parent in reversed(path.parents):
        if parent in made or parent.is_relative_to("/usr"):
            continue
        made.add(parent)
        args += ["--perms", "0755", "--dir", str(parent)]
    made.add(path)
    return args
