"""`engine.bench.run_bench` (behind `longdoc bench`): a repeated round hits the prefix cache even
when the prompt fits in one prefill chunk (the CLI's default 1,024-token prompt and chunk), and
the JSON carries what the command's help promises: fallback_triggered, KV fragmentation, peak
memory."""

from __future__ import annotations

import json

from engine import LLM, CacheConfig, SchedulerConfig
from engine.bench import format_text, run_bench
from tests.engine.tiny_models import tiny_hf_model


def test_repeat_round_hits_the_prefix_cache_and_json_has_the_promised_fields(tmp_path):
    folder = tmp_path / "tiny"
    tiny_hf_model("llama", seed=5).save_pretrained(folder)
    llm = LLM(model=folder, device="cpu", dtype="float32", cache=CacheConfig(block_size=16),
              scheduler=SchedulerConfig(max_num_seqs=1, max_prefill_chunk=64))
    res = run_bench(llm, prompt_length=64, max_new_tokens=3, batch=1, repeat=2)  # the prompt is one chunk
    res = json.loads(json.dumps(res))  # what --output-format json prints
    r1, r2 = res["rounds"]
    assert r1["cached_prompt_tokens"] == 0
    assert r2["cached_prompt_tokens"] == 48  # every full block before the prompt's last token's block
    assert r2["prefix_hit_rate"] == 48 / 64
    assert res["prefix_cache"]["hit_rate"] > 0
    assert res["fallback_triggered"] is False
    assert 0 <= res["kv_fragmentation"] < 1
    assert res["peak_memory"]["peak_rss_bytes"] > 0
    text = format_text(res)
    assert "(75%)" in text and "fallback triggered: no" in text
