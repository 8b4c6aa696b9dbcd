"""`longdoc generate`: JSON output with the default model, and a one-line error for a bad model path."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner


def _app():
    from app.cli import app

    return app


def test_generate_bad_model_is_one_line_error(tmp_path):
    res = CliRunner().invoke(_app(), ["generate", "hi", "--model", str(tmp_path / "missing.gguf"), "--device", "cpu"])
    assert res.exit_code == 1
    assert "model not found" in res.output and res.output.count("\n") == 1


@pytest.mark.model
def test_generate_json_with_the_default_model():
    res = CliRunner().invoke(_app(), ["generate", "The capital of France is", "--max-tokens", "4", "--json",
                                      "--device", "cpu", "--max-model-len", "256"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[-1])
    assert out["completion_tokens"] == 4 and out["finish_reason"] == "length"
    assert out["device"] == "cpu" and out["dtype"] == "float32" and out["text"].strip()


def test_bench_json_reports_latency_counters_and_memory(tmp_path):
    """`longdoc bench` on a tiny model: two rounds over the same prompt, the second served from the
    prefix cache (every full chunk but the last), counters and the memory profile filled in."""
    from engine_tiny import tiny_hf_model

    folder = tmp_path / "tiny"
    tiny_hf_model("llama", seed=5).save_pretrained(folder)
    res = CliRunner().invoke(_app(), [
        "bench", "--model", str(folder), "--device", "cpu", "--prompt-length", "40", "--max-new-tokens", "3",
        "--chunk", "16", "--repeat", "2", "--memory-profile", "--output-format", "json",
        "--warm-budget", str(2**20), "--hot-window", "8",
    ])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    r1, r2 = out["rounds"]
    assert r1["output_tokens"] == r2["output_tokens"] == 3
    assert r1["cached_prompt_tokens"] == 0 and r2["cached_prompt_tokens"] == 32  # chunks 0-15, 16-31
    assert r1["ttft_p50_s"] > 0 and r1["itl_p50_s"] > 0 and r1["tokens_per_s"] > 0
    c = out["counters"]
    assert c["prefix_hits"] == 32 // 16 and c["prefix_queries"] == 2 * 40 // 16  # blocks of 16 tokens
    m = out["memory"]
    assert m["weights_bytes"] > 0 and m["kv_pool_warm_bytes"] > 0
    assert m["kv_bytes_per_token_warm"] > 0  # all but the hot window and the sinks went to INT8
    assert m["kv_ratio_vs_all_bf16_with_bf16_hot"] < 0.9


def test_bench_bad_format_is_usage_error():
    res = CliRunner().invoke(_app(), ["bench", "--output-format", "xml"])
    assert res.exit_code == 2 and "--output-format" in res.output


def test_bench_demote_watermark_option(tmp_path):
    """--demote-watermark reaches the cache: with the hot pool nearly empty nothing is demoted;
    out of range is a one-line error."""
    from engine_tiny import tiny_hf_model

    folder = tmp_path / "tiny"
    tiny_hf_model("llama", seed=5).save_pretrained(folder)
    args = ["bench", "--model", str(folder), "--device", "cpu", "--prompt-length", "40", "--max-new-tokens", "2",
            "--chunk", "16", "--repeat", "1", "--memory-profile", "--output-format", "json",
            "--warm-budget", str(2**20), "--hot-window", "8"]
    res = CliRunner().invoke(_app(), [*args, "--demote-watermark", "0.9"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["memory"]["kv_bytes_per_token_warm"] == 0  # full precision: memory lasts
    bad = CliRunner().invoke(_app(), [*args, "--demote-watermark", "1.5"])
    assert bad.exit_code == 1 and "demote_watermark" in bad.output
