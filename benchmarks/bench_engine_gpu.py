"""Model-level GPU benchmark: the engine (Triton backend, CUDA graphs) against transformers (sdpa),
same random weights, same run, with the card's ceilings measured in that run.

    python3 benchmarks/bench_engine_gpu.py --models gemma,llama8b --out results_dir

Models (bf16, random weights drawn on the GPU; the engine shares the transformers model's weight
memory, so weights are counted once in either peak):
- gemma: Gemma 3 270M, its real config (18 layers, 640 hidden, 4/1 heads of 256, window 512 on 5 of
  6 layers, vocab 262144, tied embeddings).
- llama8b: Llama-3-8B shape (32 layers, 4096 hidden, 32/8 heads of 128, FFN 14336, vocab 128256,
  llama3 RoPE), untied.

Measured per model:
- prefill: time to first token of one prompt (prefill + first sample; a fresh random prompt per
  repetition, so no prefix cache helps; the engine prefills it in one chunk, as transformers does),
  engine vs transformers `generate(max_new_tokens=1)`;
  MFU = (2 * matmul params * T + attention FLOPs of the visible pairs) / time / measured bf16 matmul rate.
- decode: time per step at a given batch and context. Engine, two ways: "e2e" = `LLM.stream`
  (scheduler, graphs, GPU sampling; the median interval between tokens once every sequence has its
  first one; the mean, which includes the graph capture of a new context bucket, is kept too), and "step" = the decode step alone on a cache filled with
  random K/V to the context (runner forward + logits + batched sampling; used where prefilling the
  context for real would cost most of the device time). Transformers: `generate` with a streamer
  that timestamps every step (median interval), after a warm-up at the same batch size.
  MBU = (weight bytes + K/V bytes read per step) / step time / measured HBM copy bandwidth.
- peak memory: torch.cuda.max_memory_allocated over each case (weights included).
Times are medians of the repetitions (or of the steps, for decode).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.config import CacheConfig  # noqa: E402
from engine.core.sampling import SamplingParams, sample_batch  # noqa: E402
from engine.core.sequence import Sequence  # noqa: E402
from engine.model.loader import build_model  # noqa: E402
from engine.model.loader.random_weights import hf_to_engine_config, llm_from_model  # noqa: E402

GiB = 2**30


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def now() -> float:
    sync()
    return time.perf_counter()


def peak_reset() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_gib() -> float:
    return torch.cuda.max_memory_allocated() / GiB if torch.cuda.is_available() else 0.0


# ------------------------------------------------------------------------------------ ceilings
def ceilings(dev: str) -> dict:
    if dev != "cuda":
        return {"copy_TBps": float("nan"), "matmul_TFLOPs": float("nan")}
    a = torch.randn(2 * GiB // 2, dtype=torch.bfloat16, device=dev)
    b = torch.empty_like(a)
    times = []
    for i in range(25):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        if i >= 5:
            times.append(s.elapsed_time(e) / 1e3)
    copy = 2 * a.numel() * 2 / statistics.median(times) / 1e12
    del a, b
    n = 8192
    x = torch.randn(n, n, dtype=torch.bfloat16, device=dev)
    y = torch.randn(n, n, dtype=torch.bfloat16, device=dev)
    times = []
    for i in range(15):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.mm(x, y)
        e.record()
        e.synchronize()
        if i >= 5:
            times.append(s.elapsed_time(e) / 1e3)
    mm = 2 * n**3 / statistics.median(times) / 1e12
    del x, y
    torch.cuda.empty_cache()
    return {"copy_TBps": copy, "matmul_TFLOPs": mm}


# ------------------------------------------------------------------------------------ models
def hf_configs(tiny: bool) -> dict:
    import transformers as tf

    if tiny:  # a CPU smoke test of this script: same code path, toy shapes
        return {
            "gemma": tf.Gemma3TextConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=6,
                                         num_attention_heads=4, num_key_value_heads=1, head_dim=32,
                                         max_position_embeddings=4096, sliding_window=64, query_pre_attn_scalar=32,
                                         eos_token_id=None),
            "llama8b": tf.LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                                      eos_token_id=None, bos_token_id=None),
        }
    return {
        "gemma": tf.Gemma3TextConfig(
            vocab_size=262144, hidden_size=640, intermediate_size=2048, num_hidden_layers=18, num_attention_heads=4,
            num_key_value_heads=1, head_dim=256, rms_norm_eps=1e-6, max_position_embeddings=32768 + 1024,
            sliding_window=512, query_pre_attn_scalar=256, tie_word_embeddings=True, eos_token_id=None,
        ),
        "llama8b": tf.LlamaConfig(
            vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
            num_key_value_heads=8, max_position_embeddings=131072 + 1024, rms_norm_eps=1e-5,
            rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
            tie_word_embeddings=False, eos_token_id=None, bos_token_id=None,
        ),
    }


def build_pair(hf_cfg, dev: str):
    """(transformers model, engine model, engine config) sharing one set of random bf16 weights."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    with torch.device(dev):
        hf = AutoModelForCausalLM.from_config(hf_cfg, dtype=torch.bfloat16, attn_implementation="sdpa").eval()
    for p in hf.parameters():
        p.requires_grad_(False)
    cfg = hf_to_engine_config(hf_cfg)
    eng = build_model(cfg, dict(hf.state_dict()), torch.device(dev))
    # point the transformers model at the engine's tensors (fused q/k/v and gate/up slices): one copy
    hf_keys = set(hf.state_dict())
    hf.load_state_dict({k: v for k, v in eng.state_dict().items() if k in hf_keys}, strict=False, assign=True)
    if hf_cfg.tie_word_embeddings:
        hf.tie_weights()
    for p in hf.parameters():
        p.requires_grad_(False)
    gc.collect()
    torch.cuda.empty_cache() if dev == "cuda" else None
    return hf, eng, cfg


def weight_bytes(eng) -> int:
    """Bytes of weights one decode step reads: every matrix and norm, the LM head (the tied embedding
    matrix for Gemma), not the embedding table (a lookup reads B rows)."""
    total = sum(p.numel() * p.element_size() for n, p in eng.named_parameters() if "embed_tokens" not in n)
    if eng.config.tie_word_embeddings:
        w = eng.model.embed_tokens.weight
        total += w.numel() * w.element_size()
    return total


def matmul_params(eng) -> int:
    """Parameters in the per-token matmuls of the layers (LM head excluded: prefill applies it to one row)."""
    return sum(p.numel() for n, p in eng.named_parameters() if ".layers." in n and p.dim() == 2)


def visible_pairs(t: int, window: int | None) -> int:
    if window is None or window >= t:
        return t * (t + 1) // 2
    return window * (window + 1) // 2 + (t - window) * window


def prefill_flops(eng, t: int) -> float:
    c = eng.config
    attn = sum(4 * c.num_heads * c.head_dim * visible_pairs(t, w) for w in c.layer_windows)
    return 2.0 * matmul_params(eng) * t + 2.0 * c.vocab_size * c.hidden_size + attn


def kv_bytes_per_step(eng, ctx: int, batch: int, warm: bool = False) -> int:
    """K/V bytes one decode step reads. `warm`: the global layers' tokens outside the 16 sinks and
    the 256-token hot window are INT8 (one byte; the per-block scales, 0.2% more, are not counted)."""
    c = eng.config
    per_tok = c.num_kv_heads * c.head_dim * 2 * 2  # K and V, bf16
    if not warm:
        return batch * sum(min(ctx, w) if w else ctx for w in c.layer_windows) * per_tok
    full = min(ctx, 256 + 16)
    return batch * sum(min(ctx, w) * per_tok if w else full * per_tok + (ctx - full) * per_tok // 2
                       for w in c.layer_windows)


# ------------------------------------------------------------------------------------ engine
def engine_llm(eng, cfg, dev, max_len, seqs, chunk, budget=None, graphs=True, step_tokens=None, **cache_kw):
    """`step_tokens`: the scheduler's tokens per step (None: the scheduler's default, on CUDA 16K
    tokens of prefill a step + the decodes);
    `cache_kw`: more CacheConfig fields (the warm tier's)."""
    from engine import SchedulerConfig
    from engine.attention.triton_backend import default_backend

    cache = CacheConfig(block_size=16, memory_budget=budget, **cache_kw)
    sched = SchedulerConfig(max_num_seqs=max(seqs, 1), max_model_len=max_len, max_prefill_chunk=chunk,
                            max_num_batched_tokens=step_tokens)
    return llm_from_model(eng, cfg, device=dev, dtype=torch.bfloat16, cache=cache,
                          backend=default_backend(torch.device(dev)), cuda_graphs=graphs if dev == "cuda" else False,
                          scheduler=sched)


def rand_prompt(vocab: int, n: int, gen: torch.Generator) -> list[int]:
    return torch.randint(3, vocab, (n,), generator=gen).tolist()


def kv_budget(cfg, ctx: int, seqs: int, chunk: int) -> int:
    """Bytes of KV pool for `seqs` sequences of `ctx` tokens (+ the sliding pools), with slack."""
    per_layer_tok = cfg.num_kv_heads * cfg.head_dim * 2 * 2
    glob = sum(1 for w in cfg.layer_windows if w is None) * (ctx + 64) * per_layer_tok
    slide = sum(1 for w in cfg.layer_windows if w is not None) * (min(ctx, (cfg.layer_windows[0] or 0)) + chunk + 64) * per_layer_tok
    return int((glob + slide * 2) * seqs * 1.15) + 256 * 2**20


def engine_prefill(eng, cfg, dev, t: int, reps: int, gen) -> dict:
    chunk = t  # one chunk, as transformers does: its attention then runs through the fused SDPA path
    peak_reset()
    llm = engine_llm(eng, cfg, dev, t + 64, 1, chunk, budget=kv_budget(cfg, t, 1, chunk))
    p = SamplingParams(max_tokens=1, ignore_eos=True)
    llm.generate([rand_prompt(cfg.vocab_size, min(t, 2048), gen)], p)  # compile / warm up
    times = []
    for _ in range(reps):
        prompt = rand_prompt(cfg.vocab_size, t, gen)
        t0 = now()
        llm.generate([prompt], p)
        times.append(now() - t0)
    out = {"ttft_s": statistics.median(times), "times": times, "peak_GiB": peak_gib()}
    del llm
    return out


def warm_tier_kw(cfg, ctx: int, batch: int) -> dict:
    """CacheConfig fields for an INT8 warm tier holding every global-layer block outside the sinks
    and a 256-token hot window (INT8 pages + per-block scales + key summaries, with slack)."""
    glob = sum(1 for w in cfg.layer_windows if w is None)
    per_tok = glob * cfg.num_kv_heads * cfg.head_dim * 2  # K and V at one byte
    return {"warm_budget": int(per_tok * 1.25 * (ctx + 64) * batch) + 64 * 2**20, "hot_window": 256, "sink_tokens": 16}


def engine_decode_e2e(eng, cfg, dev, ctx: int, batch: int, steps: int, gen, prefill_chunks: int | None = None,
                      warm: bool = False) -> dict:
    """Real generation through LLM.stream: prefill every prompt, then `steps` decode steps.
    step_ms is the median interval between the tokens of the sequence admitted last, after its first
    token (as for transformers; every other sequence is still decoding then); mean_step_ms also counts the one-time CUDA-graph capture of the
    step's (batch, context) bucket, which happens inside the timed span on a new context length.
    Chunk: the whole prompt at batch 1, else ~32K tokens of prefill per step (the sliding-window
    pools are sized for window + chunk per sequence, so the chunk sets their memory).
    `prefill_chunks` sets the scheduler's tokens per step to that many sequences' chunks (+ the
    decodes); None keeps the scheduler's default (on CUDA 16K tokens of prefill a step). `warm`: with an INT8 warm tier
    (`warm_tier_kw`), so the decode steps read the global layers' old blocks as INT8 pages."""
    chunk = min(ctx, 32768) if batch == 1 else min(ctx, max(2048, 32768 // batch))
    extra = 0 if batch == 1 else 4 * batch
    peak_reset()
    step_tokens = prefill_chunks * chunk + batch if prefill_chunks else None
    llm = engine_llm(eng, cfg, dev, ctx + steps + extra + 64, batch, chunk,
                     budget=kv_budget(cfg, ctx + steps + extra, batch, chunk), step_tokens=step_tokens,
                     **(warm_tier_kw(cfg, ctx + steps + extra, batch) if warm else {}))
    warm_up = SamplingParams(max_tokens=4, ignore_eos=True)
    # with the warm tier the warm-up prompts outrun the hot window, so demotion (and the first
    # compile of its quantise kernel) happens before the timed span
    n_warm_up = min(1024 if warm else 256, ctx)
    llm.generate([rand_prompt(cfg.vocab_size, n_warm_up, gen) for _ in range(batch)], warm_up)
    prompts = [rand_prompt(cfg.vocab_size, ctx, gen) for _ in range(batch)]
    # prompts are admitted over several steps: the extra tokens keep the early sequences decoding
    # while the last one takes its `steps` timed steps, so every timed step decodes the full batch
    params = SamplingParams(max_tokens=steps + 1 + extra, ignore_eos=True)
    t0 = now()
    first: dict[int, float] = {}
    stamps: dict[int, list[float]] = {}
    most_warm = 0
    for d in llm.stream(prompts, params):
        t = time.perf_counter()
        first.setdefault(d.index, t)
        stamps.setdefault(d.index, []).append(t)
        if warm and len(stamps[d.index]) % 16 == 2:
            most_warm = max(most_warm, sum(llm.kv.blocks_per_tier()["warm_used"]))
    last = max(first, key=first.get)  # the sequence admitted last
    st = stamps[last][: steps + 1]
    gaps = [b - a for a, b in zip(st, st[1:], strict=False)]
    t_all, t_end, n_steps = st[0], st[-1], len(gaps)
    graphs = getattr(llm.runner, "graphs", None)
    out = {
        "step_ms": statistics.median(gaps) * 1e3 if gaps else float("nan"),
        "mean_step_ms": (t_end - t_all) / n_steps * 1e3 if n_steps else float("nan"),
        "chunk": chunk,
        "step_tokens": step_tokens,
        "steps_timed": n_steps,
        "ttft_first_s": min(first.values()) - t0,
        "ttft_last_s": max(first.values()) - t0,
        "peak_GiB": peak_gib(),
        "graph_replays": graphs.replays if graphs is not None else 0,
        "graphs_off": graphs.disabled if graphs is not None else "no graph runner",
        # sequences still producing tokens when the timed span ended: fewer than the batch means the
        # timed steps did not run the whole batch (early sequences had finished)
        "decoding_at_end": sum(1 for v in stamps.values() if v[-1] >= t_end),
    }
    if warm:
        out["warm_blocks_used_max"] = most_warm  # INT8 blocks (over all global layers' groups) seen during decode
        out["warm_blocks_total"] = sum(llm.kv.blocks_per_tier()["warm_total"])
    del llm
    return out


def engine_decode_step(eng, cfg, dev, ctx: int, batch: int, steps: int, gen, graphs: bool = True) -> dict:
    """The decode step alone over a cache filled with random K/V up to `ctx` tokens per sequence."""
    chunk = 4096
    peak_reset()
    llm = engine_llm(eng, cfg, dev, ctx + steps + 64, batch, chunk, budget=kv_budget(cfg, ctx + steps, batch, chunk),
                     graphs=graphs)
    for g in llm.kv.groups:
        for t in (g.k, g.v):
            t.normal_()  # finite K/V everywhere (the pools start uninitialised)
    saved_hook = getattr(llm.runner, "on_computed", None)
    llm.runner.on_computed = None  # these sequences bypass the scheduler: no prefix-cache bookkeeping
    seqs = []
    for i in range(batch):
        s = Sequence(10_000 + i, rand_prompt(cfg.vocab_size, ctx, gen), SamplingParams(max_tokens=steps + 2, ignore_eos=True))
        s.tables = llm.kv.new_tables()
        for start in range(0, ctx, chunk):  # allocate like a chunked prefill (sliding pools stay bounded)
            n = min(chunk, ctx - start)
            llm.kv.allocate_slots(s.tables, start, n)
            llm.kv.release_out_of_window(s.tables, start + n)
        s.num_cached = ctx
        s.output_ids.append(int(torch.randint(3, cfg.vocab_size, (1,), generator=gen)))
        seqs.append(s)

    def step() -> None:
        hidden = llm.runner.forward([], seqs)
        logits = llm.model.logits(hidden)
        toks = sample_batch(logits, [s.params for s in seqs], [[] for _ in seqs], [None] * len(seqs))
        for s, t in zip(seqs, toks, strict=True):
            s.output_ids.append(t)

    for _ in range(3):  # capture + warm-up
        step()
    times = []
    for _ in range(steps):
        t0 = now()
        step()
        times.append(time.perf_counter() - t0)
    graphs = getattr(llm.runner, "graphs", None)
    out = {
        "step_ms": statistics.median(times) * 1e3,
        "steps_timed": steps,
        "peak_GiB": peak_gib(),
        "graph_replays": graphs.replays if graphs is not None else 0,
        "graphs_off": graphs.disabled if graphs is not None else "no graph runner",
    }
    llm.runner.on_computed = saved_hook
    for s in seqs:
        llm.kv.free(s.tables)
    return out


# ------------------------------------------------------------------------------------ transformers
class StepTimer:
    """A generate() streamer that timestamps every put (the prompt first, then each new token)."""

    def __init__(self) -> None:
        self.stamps: list[float] = []

    def put(self, value) -> None:
        self.stamps.append(time.perf_counter())

    def end(self) -> None:
        pass


def hf_generate(hf, ids: torch.Tensor, new: int, streamer=None, static: bool = False):
    kw = {"cache_implementation": "static"} if static else {}
    return hf.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                       do_sample=False, streamer=streamer, pad_token_id=0, **kw)


def hf_prefill(hf, vocab, dev, t: int, reps: int, gen) -> dict:
    peak_reset()
    try:
        hf_generate(hf, torch.randint(3, vocab, (1, min(t, 2048)), generator=gen).to(dev), 1)
        times = []
        for _ in range(reps):
            ids = torch.randint(3, vocab, (1, t), generator=gen).to(dev)
            t0 = now()
            hf_generate(hf, ids, 1)
            times.append(now() - t0)
        return {"ttft_s": statistics.median(times), "times": times, "peak_GiB": peak_gib()}
    except torch.OutOfMemoryError as exc:
        return {"oom": str(exc).split("\n")[0][:160], "peak_GiB": peak_gib()}


def hf_decode(hf, vocab, dev, ctx: int, batch: int, steps: int, gen, static: bool = False) -> dict:
    peak_reset()
    try:
        hf_generate(hf, torch.randint(3, vocab, (batch, 128), generator=gen).to(dev), 8, static=static)  # warm-up
        ids = torch.randint(3, vocab, (batch, ctx), generator=gen).to(dev)
        timer = StepTimer()
        t0 = now()
        hf_generate(hf, ids, steps + 1, streamer=timer, static=static)
        t_end = now()
        st = timer.stamps  # [prompt, token 1, token 2, ...]
        gaps = [b - a for a, b in zip(st[1:], st[2:], strict=False)]
        return {"step_ms": statistics.median(gaps) * 1e3, "steps_timed": len(gaps), "ttft_s": st[1] - t0,
                "total_s": t_end - t0, "peak_GiB": peak_gib()}
    except torch.OutOfMemoryError as exc:
        return {"oom": str(exc).split("\n")[0][:160], "peak_GiB": peak_gib()}


def logit_check(hf, eng, cfg, dev, gen) -> float:
    """Relative difference of the last 8 positions' logits, engine vs transformers, same weights."""
    llm = engine_llm(eng, cfg, dev, 1024, 1, 1024, budget=kv_budget(cfg, 1024, 1, 1024))
    prompt = rand_prompt(cfg.vocab_size, 512, gen)
    a = llm.prompt_logits(prompt, last=8).float()
    with torch.inference_mode():
        b = hf(torch.tensor([prompt], device=dev)).logits[0, -8:].float()
    del llm
    return float((a - b).norm() / b.norm())


# ------------------------------------------------------------------------------------ plan
PLANS = {
    "gemma": {
        "prefill": [(8192, 3), (32768, 3)],
        # (context, batch, engine method); transformers runs the same (context, batch) with generate
        "decode": [(1024, 1, "e2e"), (32768, 1, "e2e"), (1024, 16, "e2e"), (32768, 16, "e2e"),
                   (1024, 1, "step"), (1024, 1, "step-eager"), (32768, 1, "step"), (1024, 16, "step"), (32768, 16, "step")],
        "hf_decode": [(1024, 1), (32768, 1), (1024, 16), (32768, 16)],
        "steps": 48,
    },
    "llama8b": {
        "prefill": [(8192, 3), (32768, 2), (131072, 1)],
        "decode": [(32768, 1, "e2e"), (32768, 1, "step"), (131072, 1, "step"), (32768, 16, "step")],
        "hf_decode": [(32768, 1), (131072, 1), (32768, 16)],
        "steps": 32,
    },
}


# --warm-tier: each e2e decode case with bf16 pages and with the INT8 warm tier, side by side
WARM_PLANS = {
    "gemma": {"prefill": [], "decode": [(32768, 1, "e2e"), (32768, 1, "e2e-warm"), (32768, 16, "e2e"),
                                        (32768, 16, "e2e-warm")], "hf_decode": [], "steps": 48},
    "llama8b": {"prefill": [], "decode": [(32768, 1, "e2e"), (32768, 1, "e2e-warm"), (131072, 1, "e2e"),
                                          (131072, 1, "e2e-warm")], "hf_decode": [], "steps": 32},
}


def scale_plan(plan: dict, tiny: bool) -> dict:
    if not tiny:
        return plan
    f = lambda n: max(64, n // 128)  # noqa: E731
    return {
        "prefill": [(f(t), 1) for t, _ in plan["prefill"]],
        "decode": [(f(c), b, m) for c, b, m in plan["decode"]],
        "hf_decode": [(f(c), b) for c, b in plan["hf_decode"]],
        "steps": 4,
    }


def run_model(name: str, hf_cfg, dev: str, tiny: bool, hf_static: bool, skip_hf: bool, log,
              prefill_chunks: int | None = None, warm_tier: bool = False) -> dict:
    gen = torch.Generator().manual_seed(1)
    plan = scale_plan((WARM_PLANS if warm_tier else PLANS)[name], tiny)
    t0 = time.perf_counter()
    hf, eng, cfg = build_pair(hf_cfg, dev)
    res: dict = {"model": name, "weight_bytes": weight_bytes(eng), "matmul_params": matmul_params(eng),
                 "build_s": time.perf_counter() - t0, "prefill": [], "decode": []}
    res["logit_rel_diff_vs_transformers"] = logit_check(hf, eng, cfg, dev, gen)
    log(f"[{name}] built in {res['build_s']:.1f} s; engine vs transformers logits rel diff "
        f"{res['logit_rel_diff_vs_transformers']:.2e}")
    for t, reps in plan["prefill"]:
        e = engine_prefill(eng, cfg, dev, t, reps, gen)
        e["flops"] = prefill_flops(eng, t)
        h = {"skipped": True} if skip_hf else hf_prefill(hf, cfg.vocab_size, dev, t, reps, gen)
        res["prefill"].append({"tokens": t, "engine": e, "transformers": h})
        log(f"[{name}] prefill {t}: engine {e['ttft_s']:.3f} s, transformers {h.get('ttft_s', h)}")
    for ctx, b, how in plan["decode"]:
        try:
            if how in ("e2e", "e2e-warm"):
                e = engine_decode_e2e(eng, cfg, dev, ctx, b, plan["steps"], gen,
                                      prefill_chunks=prefill_chunks if b > 1 else None, warm=how == "e2e-warm")
            else:
                e = engine_decode_step(eng, cfg, dev, ctx, b, plan["steps"], gen, graphs=how == "step")
        except torch.OutOfMemoryError as exc:
            e = {"oom": str(exc).split("\n")[0][:160]}
        e["method"] = how
        e["bytes_per_step"] = res["weight_bytes"] + kv_bytes_per_step(eng, ctx, b, warm=how == "e2e-warm")
        res["decode"].append({"context": ctx, "batch": b, "engine": e})
        log(f"[{name}] decode ctx {ctx} b {b} ({how}): engine {e.get('step_ms', e)} ms/step")
    res["hf_decode"] = []
    if not skip_hf:
        for ctx, b in plan["hf_decode"]:
            h = hf_decode(hf, cfg.vocab_size, dev, ctx, b, plan["steps"], gen)
            res["hf_decode"].append({"context": ctx, "batch": b, "transformers": h})
            log(f"[{name}] transformers decode ctx {ctx} b {b}: {h.get('step_ms', h)}")
        if hf_static:
            for ctx, b in plan["hf_decode"][:1]:
                t1 = time.perf_counter()
                h = hf_decode(hf, cfg.vocab_size, dev, ctx, b, plan["steps"], gen, static=True)
                h["with_compile_s"] = time.perf_counter() - t1
                res["hf_decode"].append({"context": ctx, "batch": b, "transformers_static": h})
                log(f"[{name}] transformers static-cache decode ctx {ctx} b {b}: {h.get('step_ms', h)}")
    del hf, eng
    peak_reset()
    return res


def summarize(models: list[dict], ceil: dict) -> list[str]:
    bw, mm = ceil["copy_TBps"] * 1e12, ceil["matmul_TFLOPs"] * 1e12
    lines = [f"ceilings: HBM copy {ceil['copy_TBps']:.2f} TB/s, bf16 matmul {ceil['matmul_TFLOPs']:.0f} TFLOP/s"]
    for r in models:
        lines.append(f"== {r['model']} (weights {r['weight_bytes'] / 1e9:.2f} GB read per decode step; "
                     f"logits vs transformers rel diff {r['logit_rel_diff_vs_transformers']:.1e})")
        lines.append(f"{'prefill':>10s} {'engine s':>9s} {'MFU':>5s} {'peak GiB':>8s} {'hf s':>8s} {'hf peak':>8s} {'speedup':>8s}")
        for p in r["prefill"]:
            e, h = p["engine"], p["transformers"]
            mfu = e["flops"] / e["ttft_s"] / mm
            hs = f"{h['ttft_s']:.3f}" if "ttft_s" in h else ("OOM" if "oom" in h else "-")
            hp = f"{h['peak_GiB']:.1f}" if "peak_GiB" in h else "-"
            sp = f"{h['ttft_s'] / e['ttft_s']:.2f}x" if "ttft_s" in h else "-"
            lines.append(f"{p['tokens']:>10d} {e['ttft_s']:9.3f} {mfu:5.0%} {e['peak_GiB']:8.1f} {hs:>8s} {hp:>8s} {sp:>8s}")
        lines.append(f"{'decode':>14s} {'how':>10s} {'ms/step':>8s} {'tok/s':>8s} {'MBU':>5s} {'peak':>6s} {'graphs':>6s}"
                     f" {'TTFT last':>9s}")
        for d in r["decode"]:
            e = d["engine"]
            if "step_ms" not in e:
                lines.append(f"{d['context']:>8d} b={d['batch']:<3d} {e['method']:>10s} OOM")
                continue
            tps = d["batch"] * 1e3 / e["step_ms"]
            mbu = e["bytes_per_step"] / (e["step_ms"] / 1e3) / bw
            ttft = f"{e['ttft_last_s']:8.2f}s" if "ttft_last_s" in e else f"{'-':>9s}"
            lines.append(f"{d['context']:>8d} b={d['batch']:<3d} {e['method']:>10s} {e['step_ms']:8.2f} {tps:8.0f} {mbu:5.0%} "
                         f"{e['peak_GiB']:6.1f} {e['graph_replays']:6d} {ttft}"
                         + (f"  warm blocks {e['warm_blocks_used_max']}/{e['warm_blocks_total']}" if "warm_blocks_total" in e else "")
                         + (f"  (!) only {e['decoding_at_end']} of {d['batch']} still decoding"
                            if e.get("decoding_at_end", d["batch"]) < d["batch"] else ""))
        for d in r["hf_decode"]:
            key = "transformers_static" if "transformers_static" in d else "transformers"
            h = d[key]
            if "step_ms" not in h:
                lines.append(f"{d['context']:>8d} b={d['batch']:<3d} {key}: OOM ({h.get('oom', '')[:60]})")
                continue
            tps = d["batch"] * 1e3 / h["step_ms"]
            lines.append(f"{d['context']:>8d} b={d['batch']:<3d} {key}: {h['step_ms']:.2f} ms/step, {tps:.0f} tok/s, "
                         f"TTFT {h['ttft_s']:.2f} s, peak {h['peak_GiB']:.1f} GiB")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="gemma,llama8b")
    ap.add_argument("--out", default=None, help="folder for results.json")
    ap.add_argument("--tiny", action="store_true", help="toy shapes (a smoke test of the script, e.g. on the CPU)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--hf-static", action="store_true", help="also transformers' static cache (compiles per shape)")
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--prefill-chunks", type=int, default=None,
                    help="e2e decode at batch > 1: sequences' prefill chunks per step (default: the scheduler's "
                         "default, on CUDA 16K tokens; 1: one chunk a step, the CPU default)")
    ap.add_argument("--warm-tier", action="store_true",
                    help="only e2e decode, each case with bf16 pages and with the INT8 warm tier (engine only)")
    args = ap.parse_args()
    start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - start:7.1f}s] {msg}", flush=True)

    info = {"torch": torch.__version__, "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu"}
    try:
        import transformers
        import triton

        info.update(transformers=transformers.__version__, triton=triton.__version__)
    except Exception:
        pass
    ceil = ceilings(args.device)
    log(f"{info} {ceil}")
    cfgs = hf_configs(args.tiny)
    models = []
    for name in args.models.split(","):
        models.append(run_model(name, cfgs[name], args.device, args.tiny, args.hf_static, args.skip_hf or args.warm_tier,
                                log, args.prefill_chunks, args.warm_tier))
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / "engine_results.json").write_text(json.dumps({"info": info, "ceilings": ceil, "models": models}, indent=2))
    lines = summarize(models, ceil)
    print("\n".join(lines))
    if args.out:
        (Path(args.out) / "engine_summary.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
