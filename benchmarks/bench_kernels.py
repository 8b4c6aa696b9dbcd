"""GPU benchmark of the attention kernels against what a user would otherwise run.

    python benchmarks/bench_kernels.py [--out results.json]

Cases (bf16, random data, block size 16):
- prefill attention at 32K tokens, Gemma 3 270M shape (4 heads, 1 KV head, head_dim 256):
  sliding window 512 (5 of its 6 layers) and global causal; Llama-3-8B shape (32/8 heads, 128)
  causal at 32K and 128K. Baselines: torch SDPA over contiguous K/V — with the explicit
  sliding-window mask that transformers' sdpa path builds, and is_causal=True (flash) for causal.
- decode attention, Llama-3-8B shape, batch 1 and 16 at 32K context and batch 1 and 4 at 128K,
  bf16 and INT8 pages, against SDPA over a contiguous bf16 cache. Achieved bandwidth = bytes of K/V (and scales) read / time.
- the attention-mass kernel at 128K context (32 answer rows, Gemma shape).
Times are medians of triton.testing.do_bench (ms). FLOPs count only the unmasked scores:
4 * H * D * (visible keys summed over queries).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from longdoc_kernels.kv_quant import quantize_blocks  # noqa: E402
from longdoc_kernels.paged_attention import paged_decode, paged_prefill  # noqa: E402

DEV = "cuda"
BS = 16


def bench(fn) -> float:
    import triton

    return float(triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median"))


def cache(n_tokens, kvh, d, n_seqs=1):
    n = (n_tokens + BS - 1) // BS
    k = torch.randn(n * n_seqs, BS, kvh, d, device=DEV, dtype=torch.bfloat16)
    v = torch.randn(n * n_seqs, BS, kvh, d, device=DEV, dtype=torch.bfloat16)
    table = torch.randperm(n * n_seqs, device=DEV, dtype=torch.int64).to(torch.int32).view(n_seqs, n)
    return k, v, table


def visible(t, window):
    if window is None:
        return t * (t + 1) / 2
    return sum(min(i + 1, window) for i in range(t))


SWEEP = [(128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3), (128, 64, 4, 3), (64, 128, 8, 2), (128, 32, 4, 3)]


def prefill_case(name, h, kvh, d, t, window, rows, sweep=False):
    k, v, table = cache(t, kvh, d)
    q = torch.randn(t, h, d, device=DEV, dtype=torch.bfloat16)
    scale = d**-0.5
    flops = 4 * h * d * visible(t, window)
    ms = bench(lambda: paged_prefill(q, k, v, table[0], q_offset=0, kv_len=t, scale=scale, window=window))
    tried = {}
    if sweep:
        for cfg in SWEEP:
            try:
                tried[str(cfg)] = bench(lambda cfg=cfg: paged_prefill(q, k, v, table[0], q_offset=0, kv_len=t, scale=scale, window=window, config=cfg))
            except Exception as exc:  # out of shared memory for this head_dim
                tried[str(cfg)] = f"failed: {type(exc).__name__}"
        print(name, "config sweep (BLOCK_M, BLOCK_N, warps, stages) -> ms:", tried, flush=True)
    kc = k[table[0].long()].flatten(0, 1)[:t].transpose(0, 1).unsqueeze(0)  # contiguous [1, KVH, T, D]
    vc = v[table[0].long()].flatten(0, 1)[:t].transpose(0, 1).unsqueeze(0)
    qc = q.transpose(0, 1).unsqueeze(0)
    if window is None:
        base = bench(lambda: F.scaled_dot_product_attention(qc, kc, vc, is_causal=True, scale=scale, enable_gqa=True))
        base_name = "sdpa is_causal (flash)"
    else:
        i = torch.arange(t, device=DEV)
        mask = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - window)
        base = bench(lambda: F.scaled_dot_product_attention(qc, kc, vc, attn_mask=mask, scale=scale, enable_gqa=True))
        base_name = "sdpa + window mask (transformers' path)"
    rows.append({"case": name, "ours_ms": ms, "ours_tflops": flops / ms / 1e9, "baseline": base_name, "baseline_ms": base,
                 "speedup": base / ms, "sweep": tried})


def decode_case(name, h, kvh, d, b, ctx, int8, rows, sweep=False):
    k, v, table = cache(ctx, kvh, d, n_seqs=b)
    lens = torch.full((b,), ctx, device=DEV, dtype=torch.int32)
    q = torch.randn(b, h, d, device=DEV, dtype=torch.bfloat16)
    scale = d**-0.5
    kw = {}
    tables = table
    bytes_read = 2 * b * ctx * kvh * d * 2
    if int8:
        kq, ks = quantize_blocks(k)
        vq, vs = quantize_blocks(v)
        tables = -table - 2
        kw = dict(k_cache_int8=kq, v_cache_int8=vq, k_scale=ks, v_scale=vs)
        bytes_read = 2 * b * ctx * kvh * d + 2 * 4 * b * (ctx // BS) * kvh
    ms = bench(lambda: paged_decode(q, k, v, tables, lens, scale=scale, max_kv_len=ctx, **kw))
    if sweep:
        tried = {}
        for bn in (32, 64, 128):
            for splits in (None, 32, 64, 128):
                try:
                    tried[f"block_n={bn},splits={splits}"] = bench(
                        lambda bn=bn, splits=splits: paged_decode(q, k, v, tables, lens, scale=scale, max_kv_len=ctx, block_n=bn, num_splits=splits, **kw))
                except Exception as exc:  # e.g. a tile shape the compiler rejects
                    tried[f"block_n={bn},splits={splits}"] = f"failed: {type(exc).__name__}"
        if int8:  # how the int8 values reach the tensor cores (paged_decode's int8_conv: 0 cast, 1 f16 bit trick, 2 int8 dot)
            for conv in (1, 2):
                for bn in (32, 64):
                    try:
                        tried[f"conv={conv},block_n={bn}"] = bench(
                            lambda conv=conv, bn=bn: paged_decode(q, k, v, tables, lens, scale=scale, max_kv_len=ctx, block_n=bn,
                                                                  int8_conv=conv, **kw))
                    except Exception as exc:
                        tried[f"conv={conv},block_n={bn}"] = f"failed: {type(exc).__name__}"
        print(name, "decode sweep -> ms:", tried, flush=True)
    kc = k.view(b, -1, kvh, d)[:, :ctx].transpose(1, 2)
    vc = v.view(b, -1, kvh, d)[:, :ctx].transpose(1, 2)
    qc = q.unsqueeze(2)
    base = bench(lambda: F.scaled_dot_product_attention(qc, kc, vc, scale=scale, enable_gqa=True))
    rows.append({"case": name, "ours_ms": ms, "ours_TBps": bytes_read / ms / 1e9, "baseline": "sdpa over contiguous bf16 cache",
                 "baseline_ms": base, "speedup": base / ms})


def int8_prefill_case(name, h, kvh, d, ctx, tq, rows):
    """A prefill chunk of `tq` rows at the end of a `ctx`-token sequence whose older blocks are INT8
    warm pages (block 0 and the last 256 keys before the chunk hot, as the cache lays them out), a
    global layer, through the engine's Triton backend: every visible block hot (bf16 pages), the
    default (visible blocks dequantised into a temporary each call), and the kernel reading the
    INT8 pages directly at 1, 2 and 3 pipeline stages."""
    import os

    from engine.attention.triton_backend import TritonAttentionBackend
    from engine.kv.warm_tier import WarmPages

    k, v, table = cache(ctx, kvh, d)
    row = table[0].clone()
    nb = row.shape[0]
    first_chunk = (ctx - tq) // BS
    warm_ids = torch.arange(1, first_chunk - 256 // BS, device=DEV)
    kq, ks = quantize_blocks(k)
    vq, vs = quantize_blocks(v)
    tiered = row.clone()
    tiered[warm_ids] = -row[warm_ids] - 2  # warm block w = hot block w's values, quantised
    zeros = torch.zeros(k.shape[0], kvh, d, dtype=torch.int8, device=DEV)
    warm = WarmPages(kq, vq, ks, vs, zeros, zeros)
    q = torch.randn(tq, h, d, device=DEV, dtype=torch.bfloat16)
    kw = dict(q_offset=ctx - tq, kv_len=ctx, scale=d**-0.5)
    res = {"case": name, "warm_blocks": int(warm_ids.numel()), "blocks": nb}
    hot_be, deq_be, direct_be = (TritonAttentionBackend(), TritonAttentionBackend(prefill_reads_int8=False),
                                 TritonAttentionBackend(prefill_reads_int8=True))
    res["bf16_pages_ms"] = bench(lambda: hot_be.prefill(q, k, v, row, **kw))
    res["dequantise_ms"] = bench(lambda: deq_be.prefill(q, k, v, tiered, warm=warm, **kw))
    ref_out = deq_be.prefill(q, k, v, tiered, warm=warm, **kw).out.float()
    for stages in (1, 2, 3):
        os.environ["LONGDOC_PREFILL_INT8_STAGES"] = str(stages)
        try:
            out = direct_be.prefill(q, k, v, tiered, warm=warm, **kw).out.float()
            err = float((out - ref_out).norm() / ref_out.norm())
            res[f"direct_stages{stages}_ms"] = bench(lambda: direct_be.prefill(q, k, v, tiered, warm=warm, **kw))
            res[f"direct_stages{stages}_rel_err_vs_dequantise"] = err
        except Exception as exc:  # out of shared memory at this head_dim
            res[f"direct_stages{stages}_ms"] = f"failed: {type(exc).__name__}: {str(exc)[:120]}"
    os.environ.pop("LONGDOC_PREFILL_INT8_STAGES", None)
    print(res, flush=True)
    rows.append(res)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-sweep", action="store_true", help="skip the decode block_n / split sweeps")
    ap.add_argument("--gemma-decode", action="store_true",
                    help="only decode at the Gemma 3 270M shape (4/1 heads of 256), bf16 and INT8 pages, with sweeps")
    ap.add_argument("--int8-prefill", action="store_true",
                    help="only a prefill chunk over INT8 warm pages: bf16 pages, dequantise, direct INT8 reads")
    args = ap.parse_args()
    torch.manual_seed(0)
    rows: list[dict] = []
    sweep = not args.no_sweep
    if args.int8_prefill:
        for tq in (1024, 256, 128):
            int8_prefill_case(f"prefill chunk {tq} @32K, Gemma-270M shape, global", 4, 1, 256, 32768, tq, rows)
            int8_prefill_case(f"prefill chunk {tq} @32K, Llama-8B shape", 32, 8, 128, 32768, tq, rows)
        report(rows, args.out)
        return
    if args.gemma_decode:
        for b in (1, 16):
            for int8 in (False, True):
                decode_case(f"decode b={b} @32K, Gemma-270M shape, {'INT8' if int8 else 'bf16'}", 4, 1, 256, b, 32768,
                            int8, rows, sweep=sweep)
        report(rows, args.out)
        return
    prefill_case("prefill 32K, Gemma-270M shape, window 512", 4, 1, 256, 32768, 512, rows)
    prefill_case("prefill 32K, Gemma-270M shape, global", 4, 1, 256, 32768, None, rows)
    prefill_case("prefill 32K, Llama-8B shape, causal", 32, 8, 128, 32768, None, rows)
    prefill_case("prefill 128K, Llama-8B shape, causal", 32, 8, 128, 131072, None, rows)
    decode_case("decode b=1 @32K, Llama-8B shape, bf16", 32, 8, 128, 1, 32768, False, rows)
    decode_case("decode b=1 @32K, Llama-8B shape, INT8", 32, 8, 128, 1, 32768, True, rows)
    decode_case("decode b=16 @32K, Llama-8B shape, bf16", 32, 8, 128, 16, 32768, False, rows)
    decode_case("decode b=16 @32K, Llama-8B shape, INT8", 32, 8, 128, 16, 32768, True, rows)
    decode_case("decode b=1 @128K, Llama-8B shape, bf16", 32, 8, 128, 1, 131072, False, rows, sweep=sweep)
    decode_case("decode b=1 @128K, Llama-8B shape, INT8", 32, 8, 128, 1, 131072, True, rows, sweep=sweep)
    decode_case("decode b=4 @128K, Llama-8B shape, bf16", 32, 8, 128, 4, 131072, False, rows)
    decode_case("decode b=4 @128K, Llama-8B shape, INT8", 32, 8, 128, 4, 131072, True, rows)
    report(rows, args.out)


def report(rows: list[dict], out: str | None) -> None:
    info = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    try:
        import triton

        info["triton"] = triton.__version__
    except Exception:
        pass
    print(json.dumps(info))
    print(f"{'case':58s} {'ours ms':>9s} {'rate':>14s} {'baseline ms':>12s} {'speedup':>8s}")
    for r in rows:
        if "ours_ms" not in r:  # --int8-prefill rows: their own fields
            print(r["case"], {k: (round(x, 4) if isinstance(x, float) else x) for k, x in r.items() if k != "case"})
            continue
        rate = f"{r['ours_tflops']:.0f} TFLOP/s" if "ours_tflops" in r else (f"{r['ours_TBps']:.2f} TB/s" if "ours_TBps" in r else "")
        base = f"{r['baseline_ms']:.3f}" if r["baseline_ms"] else "-"
        sp = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
        print(f"{r['case']:58s} {r['ours_ms']:9.3f} {rate:>14s} {base:>12s} {sp:>8s}")
    if out:
        Path(out).write_text(json.dumps({"info": info, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
