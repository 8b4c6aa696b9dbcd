"""Benchmark: the engine against transformers' own Gemma3ForCausalLM on the CPU, same process, same
weights (the packaged Gemma 3 270M, dequantised once and shared), same dtype and thread count.

    python tests/benchmarks/bench_engine.py [--dtype float32 bfloat16] [--prefill 2048] [--decode 64]
                                            [--reps 3] [--threads N] [--json out.json]

Prefill: time to the first token of a `--prefill`-token prompt (engine: chunked prefill over the
paged cache, last-position logits only; transformers: one forward with logits_to_keep=1 and its
DynamicCache). Decode: tokens/s of greedy decoding, measured as (time for 1 + N tokens - time for 1
token) / N after a 16-token prompt, so that prefill is excluded on both sides. Medians of `--reps`
runs, engine and transformers interleaved, after one warm-up each.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def hf_model_sharing_weights(llm):
    """transformers' Gemma3ForCausalLM built from the engine's parsed config, holding its tensors."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    c = llm.config
    cfg = Gemma3TextConfig(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
        num_hidden_layers=c.num_layers, num_attention_heads=c.num_heads, num_key_value_heads=c.num_kv_heads,
        head_dim=c.head_dim, rms_norm_eps=c.rms_norm_eps, max_position_embeddings=c.max_position_embeddings,
        sliding_window=[w for w in c.layer_windows if w][0],
        layer_types=["sliding_attention" if w else "full_attention" for w in c.layer_windows],
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": c.layer_ropes[c.global_layers[0]].theta},
            "sliding_attention": {"rope_type": "default", "rope_theta": c.layer_ropes[c.sliding_layers[0]].theta},
        },
        query_pre_attn_scalar=round(c.attn_scale**-2), tie_word_embeddings=True,
        bos_token_id=c.bos_token_id, eos_token_id=c.eos_token_ids[0], pad_token_id=c.pad_token_id,
    )
    with torch.device("meta"):
        model = Gemma3ForCausalLM(cfg)
    state = dict(llm.model.state_dict())
    state["lm_head.weight"] = state["model.embed_tokens.weight"]
    model.load_state_dict(state, assign=True, strict=True)
    emb = model.model.embed_tokens
    emb.embed_scale = torch.tensor(emb.scalar_embed_scale)
    rot = model.model.rotary_emb
    for layer_type in rot.layer_types:
        inv, _ = rot.compute_default_rope_parameters(cfg, "cpu", layer_type=layer_type)
        setattr(rot, f"{layer_type}_inv_freq", inv)
        setattr(rot, f"{layer_type}_original_inv_freq", inv.clone())
    model.tie_weights()
    return model.eval()


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def bench_dtype(dtype: str, n_prefill: int, n_decode: int, reps: int) -> dict:
    from engine import LLM, CacheConfig, SamplingParams

    llm = LLM(device="cpu", dtype=dtype, cache=CacheConfig(memory_budget=512 * 2**20, max_model_len=8192))
    hf = hf_model_sharing_weights(llm)
    text = (ROOT / "engine" / "__init__.py").read_text() + (ROOT / "engine" / "llm.py").read_text()
    long_ids = (llm.encode(text) * 4)[:n_prefill]
    short_ids = long_ids[:16]
    assert len(long_ids) == n_prefill
    one = SamplingParams(max_tokens=1)
    many = SamplingParams(max_tokens=1 + n_decode, ignore_eos=True)

    def eng_prefill() -> float:
        return timed(lambda: llm.generate([long_ids], one))

    def hf_prefill() -> float:
        with torch.inference_mode():
            return timed(lambda: hf(torch.tensor([long_ids]), logits_to_keep=1))

    def eng_decode() -> float:
        t1 = timed(lambda: llm.generate([short_ids], one))
        tn = timed(lambda: llm.generate([short_ids], many))
        return n_decode / (tn - t1)

    def hf_gen(n: int) -> float:
        with torch.inference_mode():
            return timed(lambda: hf.generate(torch.tensor([short_ids]), max_new_tokens=n, min_new_tokens=n,
                                             do_sample=False))

    def hf_decode() -> float:
        t1 = hf_gen(1)
        tn = hf_gen(1 + n_decode)
        return n_decode / (tn - t1)

    # same greedy tokens: the comparison is between equal computations
    with torch.inference_mode():
        ref = hf.generate(torch.tensor([short_ids]), max_new_tokens=16, do_sample=False)[0, 16:].tolist()
    same = llm.generate([short_ids], SamplingParams(max_tokens=16))[0].token_ids == ref

    eng_prefill(), hf_prefill()  # warm-up
    rows = {"engine_prefill_s": [], "hf_prefill_s": [], "engine_decode_tps": [], "hf_decode_tps": []}
    for _ in range(reps):
        rows["engine_prefill_s"].append(eng_prefill())
        rows["hf_prefill_s"].append(hf_prefill())
        rows["engine_decode_tps"].append(eng_decode())
        rows["hf_decode_tps"].append(hf_decode())
    out = {k: round(statistics.median(v), 3) for k, v in rows.items()}
    out["runs"] = {k: [round(x, 3) for x in v] for k, v in rows.items()}
    out["greedy_16_tokens_identical"] = same
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--prefill", type=int, default=2048)
    ap.add_argument("--decode", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    import transformers

    results = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "threads": torch.get_num_threads(), "machine": platform.processor() or platform.machine(),
        "prefill_tokens": args.prefill, "decode_tokens": args.decode, "dtypes": {},
    }
    for dt in args.dtype:
        results["dtypes"][dt] = bench_dtype(dt, args.prefill, args.decode, args.reps)
        print(dt, json.dumps(results["dtypes"][dt]), flush=True)
    print("\n| dtype | prefill 2K: engine | transformers | decode tok/s: engine | transformers |")
    print("|---|---|---|---|---|")
    for dt, r in results["dtypes"].items():
        print(f"| {dt} | {r['engine_prefill_s']:.2f} s | {r['hf_prefill_s']:.2f} s | "
              f"{r['engine_decode_tps']:.1f} | {r['hf_decode_tps']:.1f} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
