"""JSON export: deterministic text from a result model, atomic writes, loading back, JSON Schema.

Determinism: a result is dumped by pydantic in field order with two-space indentation and
non-ASCII kept as is; results carry no timestamps or machine paths, so the same input gives
byte-identical output. Atomicity: text is written to a temporary file in the target folder,
flushed and fsynced, then renamed over the target — a reader sees the old file or the new one,
never half of one.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from pydantic import BaseModel

from pipelines.registry import get_pipeline


def to_json(result: BaseModel) -> str:
    """The export text of a result (ends with a newline)."""
    # a result's `llm` report is left out when no LLM step was asked for (--llm off), so that
    # output is byte-identical to the rules-only export
    exclude = {"llm"} if "llm" in type(result).model_fields and getattr(result, "llm", None) is None else None
    return result.model_dump_json(indent=2, exclude=exclude) + "\n"


def write_atomic(path: str | Path, text: str) -> Path:
    """Write `text` to `path` via a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def load_result(pipeline: str, text: str) -> BaseModel:
    """Parse an export back into the pipeline's result model (validates it)."""
    return get_pipeline(pipeline).result_model.model_validate_json(text)


def json_schema(pipeline: str) -> str:
    """The JSON Schema of a pipeline's export, as text."""
    model = get_pipeline(pipeline).result_model
    return json.dumps(model.model_json_schema(), indent=2, ensure_ascii=False, sort_keys=True) + "\n"
