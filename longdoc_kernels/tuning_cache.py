"""Launch choices of the decode tuner kept on disk, so that a new process on the same machine
neither re-times its shapes nor risks choosing differently.

The tuner (`longdoc_kernels.paged_attention._tune_decode`) times a few launch shapes per call shape and
keeps the fastest. In a new process that costs the first decode steps of every shape again, and
where two candidates time within noise of each other a new process may pick the other. The
candidates compute the same function but round differently, so that pick could change greedy
tokens between two runs of one request. This file makes the choice once per machine and software.

A choice is stored under a fingerprint: the GPU name and compute capability, the torch and Triton
versions, and a hash of `longdoc_kernels/paged_attention.py`. A driver upgrade, a new card or any change
to the kernels starts a fresh set. The file is JSON, written atomically (a temporary file, then a
rename). A file that cannot be read or parsed is ignored with one warning, never trusted in part.

Location: `$LONGDOC_TUNING_CACHE` (a file path; empty or "0" turns the disk cache off), else
`decode_tuning.json` in the engine's cache folder, `$LONGDOC_CACHE` or `~/.cache/longdoc`
(`engine/paths.py`; read here from the environment, since kernels do not import the engine).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)
VERSION = 1


def cache_path() -> Path | None:
    env = os.environ.get("LONGDOC_TUNING_CACHE")
    if env is not None:
        return None if env.strip() in ("", "0") else Path(env).expanduser()
    root = os.environ.get("LONGDOC_CACHE")
    return (Path(root).expanduser() if root else Path.home() / ".cache" / "longdoc") / "decode_tuning.json"


def fingerprint(device_name: str, capability: tuple[int, int], torch_version: str, triton_version: str) -> str:
    src = Path(__file__).with_name("paged_attention.py").read_bytes()
    code = hashlib.sha256(src).hexdigest()[:16]
    return f"{device_name}|sm{capability[0]}{capability[1]}|torch {torch_version}|triton {triton_version}|kernels {code}"


def key_str(key: tuple) -> str:
    """A call-shape key as text (dtypes by name)."""
    return repr(tuple(str(k) if not isinstance(k, (int, bool, str, type(None))) else k for k in key))


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        log.warning("decode tuning cache %s unreadable (%s); ignoring it", path, e)
        return {}
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("sets"), dict):
        log.warning("decode tuning cache %s has an unknown layout; ignoring it", path)
        return {}
    return data["sets"]


CHOICE_LEN = 6  # (num_splits, block_n, INT8 mode, warm block_n, num_warps, num_stages)


def load(fp: str, path: Path | None = None) -> dict[str, tuple[int, ...]]:
    """The choices stored under fingerprint `fp`: key text -> (num_splits, block_n, mode,
    block_n_warm, num_warps, num_stages)."""
    path = path if path is not None else cache_path()
    if path is None:
        return {}
    entries = _read(path).get(fp, {})
    out = {}
    if not isinstance(entries, dict):
        return out
    for k, v in entries.items():
        if isinstance(v, list) and len(v) == CHOICE_LEN and all(isinstance(x, int) and x > 0 for x in v):
            out[k] = tuple(v)
    return out


def store(fp: str, key: str, choice: tuple[int, ...], path: Path | None = None) -> bool:
    """Add one choice under `fp` (read, merge, atomic replace); False if it could not be written."""
    path = path if path is not None else cache_path()
    if path is None:
        return False
    sets = _read(path)
    entries = sets.get(fp)
    entries = entries if isinstance(entries, dict) else {}
    entries[key] = [int(x) for x in choice]
    sets[fp] = entries
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".decode_tuning.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"version": VERSION, "sets": sets}, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        log.warning("decode tuning cache %s not written (%s)", path, e)
        return False
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return True
