"""Codebook generations on disk: ``codebook/gen_<g>.py`` and ``codebook/gen_<g>.json``.

Both files are written atomically, the ``.py`` first: a generation exists only when both
do, so a kill between the two leaves a ``.py`` that is not a generation and is replaced
when the sleep phase re-runs. An existing generation is never rewritten: writing it again
with the same bytes is a no-op (a re-run sleep), with other bytes an error. The ``.json``
records the ``.py``'s sha256, so a file changed by hand is caught on load.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from pydantic import ValidationError

from speedrunner.core.atomic import atomic_write_bytes
from speedrunner.core.codebook.model import GenerationMeta
from speedrunner.errors import CheckpointError, WouldOverwriteError

CODEBOOK_DIR = "codebook"
_GEN_FILE = re.compile(r"^gen_(\d+)\.py$")


def codebook_dir(run_dir: Path) -> Path:
    return Path(run_dir) / CODEBOOK_DIR


def source_path(run_dir: Path, generation: int) -> Path:
    return codebook_dir(run_dir) / f"gen_{generation}.py"


def meta_path(run_dir: Path, generation: int) -> Path:
    return codebook_dir(run_dir) / f"gen_{generation}.json"


def sha256(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def meta_bytes(meta: GenerationMeta) -> bytes:
    """The exact bytes of ``gen_<g>.json`` (deterministic: a re-run writes the same)."""
    return (json.dumps(meta.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n").encode(
        "utf-8"
    )


def generation_exists(run_dir: Path, generation: int) -> bool:
    return source_path(run_dir, generation).is_file() and meta_path(run_dir, generation).is_file()


def generations(run_dir: Path) -> list[int]:
    """Every complete generation on disk, ascending."""
    folder = codebook_dir(run_dir)
    if not folder.is_dir():
        return []
    found = (_GEN_FILE.match(p.name) for p in folder.iterdir())
    return sorted(g for g in (int(m.group(1)) for m in found if m) if generation_exists(run_dir, g))


def read_generation(run_dir: Path, generation: int) -> tuple[str, GenerationMeta]:
    """The source (byte-exact) and metadata of a stored generation."""
    py, js = source_path(run_dir, generation), meta_path(run_dir, generation)
    if not py.is_file():
        raise CheckpointError(f"codebook generation {generation} is missing: {py}")
    if not js.is_file():
        raise CheckpointError(
            f"codebook generation {generation} is incomplete: {py} has no {js.name} "
            "(a write was interrupted), so it is not a generation"
        )
    source = py.read_bytes().decode("utf-8")  # not read_text: that would turn "\r\n" into "\n"
    try:
        meta = GenerationMeta.model_validate_json(js.read_bytes())
    except ValidationError as e:
        raise CheckpointError(f"codebook metadata {js} is corrupt: {e}") from e
    if meta.generation != generation:
        raise CheckpointError(f"{js} describes generation {meta.generation}, not {generation}")
    if meta.source_sha256 != sha256(source):
        raise CheckpointError(
            f"{py} does not match its metadata {js.name} (sha256 differs): "
            "it was changed after it was written"
        )
    return source, meta


def write_generation(run_dir: Path, source: str, meta: GenerationMeta) -> None:
    """Store a generation atomically (``.py`` then ``.json``); never change an existing one.

    Callers go through ``Candidate.commit`` (validated code) or generation 0.
    """
    g = meta.generation
    if meta.source_sha256 != sha256(source):
        raise ValueError(
            f"metadata of codebook generation {g} does not describe this source (sha256 differs)"
        )
    py_data, js_data = source.encode("utf-8"), meta_bytes(meta)
    py, js = source_path(run_dir, g), meta_path(run_dir, g)
    if generation_exists(run_dir, g):
        if py.read_bytes() == py_data and js.read_bytes() == js_data:
            return  # the same generation again (a sleep phase re-run after a kill)
        raise WouldOverwriteError(
            f"codebook generation {g} already exists in {codebook_dir(run_dir)} with "
            f"other contents; generations are never rewritten: write generation "
            f"{max(generations(run_dir)) + 1} from the current one instead"
        )
    if meta.parent is not None and not generation_exists(run_dir, meta.parent):
        raise CheckpointError(
            f"codebook generation {g} is based on generation {meta.parent}, "
            f"which is not stored in {codebook_dir(run_dir)}"
        )
    atomic_write_bytes(py, py_data)
    atomic_write_bytes(js, js_data)
