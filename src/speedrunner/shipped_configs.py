"""The starter configs that ship as package data (``speedrunner configs list|copy``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from speedrunner.core.atomic import atomic_write_bytes
from speedrunner.core.names import suggest
from speedrunner.errors import UnknownNameError, WouldOverwriteError


def configs_root() -> Path:
    return Path(str(resources.files("speedrunner") / "configs"))


def list_configs() -> list[str]:
    """Names like ``scienceworld/speedrunner-gpt-t4`` (relative path without .yaml). Only
    ``<benchmark>/<name>.yaml`` are configs; deeper folders hold data they name (a recorded
    script next to its demo config); ``sweeps/`` holds sweep files, not run configs."""
    root = configs_root()
    return sorted(
        str(p.relative_to(root).with_suffix(""))
        for p in root.glob("*/*.yaml")
        if p.parent.name != "sweeps"
    )


def shipped_config_path(name: str) -> Path:
    name = name.removesuffix(".yaml").removeprefix("configs/")
    names = list_configs()
    if name not in names:
        by_stem = [n for n in names if n.split("/")[-1] == name]
        if len(by_stem) == 1:
            name = by_stem[0]
        else:
            raise UnknownNameError(
                f"no shipped config {name!r}{suggest(name, names)}; see `speedrunner configs list`"
            )
    return configs_root() / f"{name}.yaml"


def copy_config(name: str, dest: str | Path, *, overwrite: bool = False) -> tuple[Path, str]:
    """Copy a shipped config; returns (path, what happened). Rerun-safe.

    An identical existing copy is left alone; an edited one is kept unless ``overwrite``.
    """
    src = shipped_config_path(name)
    wants_dir = str(dest).endswith(("/", "\\"))
    dest = Path(dest)
    if dest.is_dir() or wants_dir:
        dest = dest / src.name
    data = src.read_bytes()
    if dest.exists():
        if dest.read_bytes() == data:
            return dest, "unchanged (already identical)"
        if not overwrite:
            raise WouldOverwriteError(
                f"{dest} exists and differs from the shipped {name} (edited?); "
                "keeping it. Pass --overwrite to replace it"
            )
        atomic_write_bytes(dest, data)
        return dest, "overwritten"
    atomic_write_bytes(dest, data)
    return dest, "copied"
