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
    from tests.engine.tiny_models import tiny_hf_model

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
    from tests.engine.tiny_models import tiny_hf_model

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


def test_ask_bad_input_is_one_line_error(tmp_path):
    missing = CliRunner().invoke(_app(), ["ask", str(tmp_path / "nope.txt"), "-q", "why?"])
    assert missing.exit_code == 1 and "nope.txt: no such file" in missing.output and missing.output.count("\n") == 1
    doc = tmp_path / "d.txt"
    doc.write_text("Some text.")
    side = CliRunner().invoke(_app(), ["ask", str(doc), "-q", "why?", "--fallback", "retrieval:head"])
    assert side.exit_code == 2 and "only truncate takes a side" in side.output
    bogus = CliRunner().invoke(_app(), ["ask", str(doc), "-q", "why?", "--fallback", "bogus"])
    assert bogus.exit_code == 1 and "unknown fallback strategy 'bogus'" in bogus.output
    empty_q = CliRunner().invoke(_app(), ["ask", str(doc), "-q", "  "])
    assert empty_q.exit_code == 2


def _contract_head(tmp_path, chars: int):
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "fixtures/contracts/en-commonpaper-dpa-1.0-to-1.1/v2.txt"
    doc = tmp_path / "dpa.txt"
    doc.write_text(src.read_text(encoding="utf-8")[:chars], encoding="utf-8")
    return doc


@pytest.mark.model
def test_ask_reports_the_fallback_when_the_document_does_not_fit(tmp_path):
    doc = _contract_head(tmp_path, 6000)  # ~1.3K tokens into a 512-token context
    res = CliRunner().invoke(_app(), ["ask", str(doc), "-q", "Who is the Processor?", "--max-model-len", "512",
                                      "--fallback", "truncate:middle", "-n", "6", "--device", "cpu", "--json"])
    assert res.exit_code == 0, res.output
    a = json.loads(res.output.strip().splitlines()[-1])["answers"][0]
    fb = a["fallback_report"]
    assert a["fallback"].startswith("did not fit (context): truncate:middle")
    assert fb["fallback_triggered"] and fb["strategy"] == "truncate" and fb["truncate_side"] == "middle"
    assert fb["tokens_dropped"] > 0 and fb["reason"] == "context" and 0 < fb["key_entity_retention"] < 1
    assert max(fb["prompt_tokens_sent"]) <= 512 - 6 and a["finish_reason"] in ("length", "stop", "eos")


@pytest.mark.model
def test_ask_reuses_the_document_from_the_disk_cache_in_a_later_run(tmp_path):
    doc, cache = _contract_head(tmp_path, 7000), tmp_path / "kv"
    args = ["ask", str(doc), "--cache-dir", str(cache), "-n", "4", "--device", "cpu", "--max-model-len", "4096", "--json"]
    from pipelines.llm import forget_engines

    forget_engines()
    first = CliRunner().invoke(_app(), [*args, "-q", "Who is the Processor?"])
    assert first.exit_code == 0, first.output
    out1 = json.loads(first.output.strip().splitlines()[-1])
    assert out1["answers"][0].get("fallback_report") is None and out1["step"]["reuse"]["prefix_hit_tokens"] == 0
    forget_engines()  # a new engine over the same disk store, as a later process has
    second = CliRunner().invoke(_app(), [*args, "-q", "What must the Provider do after a breach?"])
    assert second.exit_code == 0, second.output  # evidence first: an answer or "not stated", never empty
    out2 = json.loads(second.output.strip().splitlines()[-1])
    a2 = out2["answers"][0]
    assert a2["status"] in ("answered", "not_stated") and a2["text"]
    # every full 1,024-token chunk of the document comes from disk (the prefix strategy)
    doc_chunks = 1024 * ((a2["prompt_tokens"] - 20) // 1024)
    assert a2["cached_prompt_tokens"] >= doc_chunks > 0 and out2["counters"]["prefix_hits"] > 0
    forget_engines()
