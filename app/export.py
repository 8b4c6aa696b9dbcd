"""JSON export: deterministic text from a result model, atomic writes, loading back, JSON Schema.

Determinism: a result is dumped by pydantic in field order with two-space indentation and
non-ASCII kept as is; results carry no timestamps or machine paths, so the same input gives
byte-identical output. Atomicity: text is written to a temporary file in the target folder
(`.<name>.<8 hex>.tmp`), flushed and fsynced, then renamed over the target — a reader sees the old
file or the new one, never half of one. The temporary file is created with mode 0666 less the
umask, as any other tool's output is (0644 under the usual umask 022), not 0600: exports are for
sharing with reviewers. `remove_stale_temps` clears what a killed writer left behind.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from pathlib import Path

from pydantic import BaseModel

from pipelines.registry import get_pipeline

_TEMP_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")  # ours: .<name>.<8 hex>.tmp (older: mkstemp's 8 chars)


def to_json(result: BaseModel) -> str:
    """The export text of a result (ends with a newline)."""
    return result.model_dump_json(indent=2) + "\n"


def _create_temp(folder: Path, name: str) -> tuple[int, Path]:
    """A new temporary file beside the target, created exclusively with mode 0666 (the kernel takes
    the umask off, as for any file a tool creates)."""
    for _ in range(100):
        tmp = folder / f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{folder}: no free temporary name for {name}")


def output_problem(path: str | Path) -> str | None:
    """Why a file cannot be written at `path`, in a few words, or None: checked before minutes of
    analysis so that a mistyped output path fails at once (a folder, a folder under a file, a folder
    we may not write)."""
    path = Path(path)
    if path.is_dir():
        return f"{path} is a folder; name a file"
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is a file, not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot write in {parent} (permission denied)"
    return None


def write_atomic(path: str | Path, text: str, fsync: bool = True) -> Path:
    """Write `text` to `path` via a temporary file and a rename. `fsync=False` skips the flush to
    disk (still atomic for readers and against a killed process, not against a power cut): for
    files rewritten often, such as a running batch's summary."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path.parent, path.name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def remove_stale_temps(folder: str | Path) -> list[Path]:
    """Delete the temporary files `write_atomic` leaves when its process is killed mid-write, under
    `folder` (recursively). Only call it while no other writer uses the folder (the batch holds its
    lock). Returns what was removed."""
    removed = []
    folder = Path(folder)
    if not folder.is_dir():
        return removed
    for path in folder.rglob("*.tmp"):
        if _TEMP_NAME.match(path.name) and path.is_file() and not path.is_symlink():
            try:
                path.unlink()
                removed.append(path)
            except OSError:
                pass
    return removed


def load_result(pipeline: str, text: str) -> BaseModel:
    """Parse an export back into the pipeline's result model (validates it)."""
    return get_pipeline(pipeline).result_model.model_validate_json(text)


def json_schema(pipeline: str) -> str:
    """The JSON Schema of a pipeline's export, as text."""
    model = get_pipeline(pipeline).result_model
    return json.dumps(model.model_json_schema(), indent=2, ensure_ascii=False, sort_keys=True) + "\n"
