"""Benchmark: a second question over a cached long document, through the prefix cache, on the real
default model (Gemma 3 270M GGUF), CPU (issue 5: "a second question over a cached 30K-token
document has TTFT <= 10% of the first, in a new process too").

    OMP_NUM_THREADS=1 python benchmarks/bench_prefix_reuse.py [--doc-tokens 30000]
        [--chunk 1024] [--dtype float32] [--max-tokens 16] [--threads 1] [--store DIR] [--json out.json]

Document: the English texts of the shared corpus joined as bench_fallback.py does (its
`build_document`, with its planted fact at depth 0.35), cut to `--doc-tokens` tokens.
Prompt A = [BOS] instructions + document + question A; prompt B = the same token prefix + question B
(the prefix is tokenized once, so both prompts share it token for token).

The engine runs with the prefix cache on (SchedulerConfig.prefix_caching, the default) and a cold
tier of a disk store only (CacheConfig.disk_cache_dir in a temp dir, host_cache_bytes=0): each
prefill-chunk boundary's KV is written through to disk as the first prompt is computed.

1. A, cold: TTFT with nothing cached (includes writing the chunks to the disk store).
2. B, same process: TTFT with the document's blocks still in device memory (the device prefix cache).
3. B, new process (this script re-run with --child): an engine with only the disk store of step 1;
   TTFT of its first request (model load reported apart), prompt tokens served from the cache.
4. B, prefix caching off (same process): the full prefill, for the answer check and for scale.
Greedy answers (`--max-tokens`) of 2, 3 and 4 are compared token for token. Reuse happens at chunk
boundaries only (engine/kv/prefix_cache.py), so up to one chunk of the document plus the question is
computed in 2 and 3. Every TTFT is GenerationOutput.metrics['ttft_s'] (from the call, prompt already
tokenized). Note: the disk store's files were just written by step 1, so the new process reads them
from the OS page cache, not from the disk itself.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fallback import INSTRUCTIONS, build_document  # noqa: E402

QUESTION_A = "\n\nQuestion: What is the vault access code of the Harwick Archive?\nAnswer:"
QUESTION_B = "\n\nQuestion: What may GitHub do if a user violates its terms of service?\nAnswer:"


def make_llm(args, store: str, prefix_caching: bool = True):
    from engine import LLM, CacheConfig, SchedulerConfig

    ctx = args.context
    kv_bytes = max(256 * 2**20, ctx * 3 * 256 * 2 * 4 * 2)  # global layers' K+V in fp32, x2 headroom
    cache = CacheConfig(memory_budget=kv_bytes, host_cache_bytes=0, disk_cache_dir=store)
    sched = SchedulerConfig(max_model_len=ctx, max_prefill_chunk=args.chunk, prefix_caching=prefix_caching)
    return LLM(device="cpu", dtype=args.dtype, cache=cache, scheduler=sched)


def stats(llm) -> dict:
    disk = llm.prefix.cold.disk if llm.prefix.cold is not None else None
    out = {"prefix": llm.prefix.stats.to_dict()}
    if disk is not None:
        out["disk"] = {"entries": len(disk), "bytes": disk.bytes_used, "hits": disk.hits, "misses": disk.misses,
                       "writes": disk.writes, "rejected_corrupt": disk.rejected_corrupt,
                       "rejected_mismatch": disk.rejected_mismatch}
    return out


def child(args) -> None:
    """New process: only the disk store; answer question B; print one JSON line."""
    import torch

    torch.set_num_threads(args.threads)
    from engine import SamplingParams

    ids = json.loads(Path(args.ids_file).read_text())
    t = time.perf_counter()
    llm = make_llm(args, args.store)
    load_s = time.perf_counter() - t
    out = llm.generate(ids, SamplingParams(max_tokens=args.max_tokens, ignore_eos=True))[0]
    print(json.dumps({"load_s": load_s, "ttft_s": out.metrics["ttft_s"], "cached": out.cached_tokens,
                      "prompt_tokens": len(ids), "tokens": out.token_ids, "text": out.text, **stats(llm)}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--doc-tokens", type=int, default=30000)
    ap.add_argument("--context", type=int, default=32768, help="max_model_len of the engine")
    ap.add_argument("--chunk", type=int, default=1024, help="max_prefill_chunk (reuse granularity)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--store", default=None, help="disk store directory (default: a new temp dir)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ids-file", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return

    import torch

    torch.set_num_threads(args.threads)
    from engine import SamplingParams

    t_start = time.perf_counter()
    tmp = tempfile.mkdtemp(prefix="longdoc-prefix-reuse-")
    store = args.store or os.path.join(tmp, "store")
    print(f"# {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}  command: "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '?')} python benchmarks/bench_prefix_reuse.py "
          + " ".join(sys.argv[1:]))
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared), torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}, dtype {args.dtype}, load average at start {os.getloadavg()[0]:.2f}")
    t = time.perf_counter()
    llm = make_llm(args, store)
    load_s = time.perf_counter() - t
    doc, _ = build_document(llm, args.doc_tokens, 0.35)
    prefix_ids = llm.encode(INSTRUCTIONS + doc)
    a_ids = prefix_ids + llm.encode(QUESTION_A, add_special_tokens=False)
    b_ids = prefix_ids + llm.encode(QUESTION_B, add_special_tokens=False)
    print(f"# model {llm.model_path.name}, load {load_s:.1f} s, max_prefill_chunk {llm.scheduler_config.max_prefill_chunk}, "
          f"block {llm.cache_config.block_size}, context {llm.max_model_len}, disk store {store}")
    print(f"# shared prefix (BOS + instructions + document) {len(prefix_ids)} tokens; prompt A {len(a_ids)}, "
          f"prompt B {len(b_ids)} tokens; greedy answers of {args.max_tokens} tokens")
    greedy = SamplingParams(max_tokens=args.max_tokens, ignore_eos=True)
    res: dict = {"prefix_tokens": len(prefix_ids), "prompt_a": len(a_ids), "prompt_b": len(b_ids)}

    out_a = llm.generate(a_ids, greedy)[0]
    res["a_cold"] = {"ttft_s": out_a.metrics["ttft_s"], "cached": out_a.cached_tokens, "text": out_a.text}
    res["after_a"] = stats(llm)
    print(f"1. A cold             TTFT {out_a.metrics['ttft_s']:8.2f} s  cached {out_a.cached_tokens:6d}/{len(a_ids)}"
          f"  answer {out_a.text!r}", flush=True)

    out_b = llm.generate(b_ids, greedy)[0]
    res["b_same_process"] = {"ttft_s": out_b.metrics["ttft_s"], "cached": out_b.cached_tokens, "text": out_b.text}
    print(f"2. B same process     TTFT {out_b.metrics['ttft_s']:8.2f} s  cached {out_b.cached_tokens:6d}/{len(b_ids)}"
          f"  answer {out_b.text!r}", flush=True)

    ids_file = os.path.join(tmp, "b_ids.json")
    Path(ids_file).write_text(json.dumps(b_ids))
    cmd = [sys.executable, __file__, "--child", "--ids-file", ids_file, "--store", store,
           "--context", str(args.context), "--chunk", str(args.chunk), "--dtype", args.dtype,
           "--max-tokens", str(args.max_tokens), "--threads", str(args.threads)]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": str(args.threads)})
    child_wall = time.perf_counter() - t
    if proc.returncode != 0:
        print(proc.stderr[-4000:])
        raise SystemExit(f"child process failed ({proc.returncode})")
    ch = json.loads(proc.stdout.strip().splitlines()[-1])
    ch["wall_s"] = child_wall
    res["b_new_process"] = ch
    print(f"3. B new process      TTFT {ch['ttft_s']:8.2f} s  cached {ch['cached']:6d}/{ch['prompt_tokens']}"
          f"  answer {ch['text']!r}")
    print(f"   (process wall {child_wall:.1f} s incl. model load {ch['load_s']:.1f} s; disk store: "
          f"{ch['disk']['entries']} entries, {ch['disk']['bytes'] / 2**20:.0f} MiB, {ch['disk']['hits']} hits, "
          f"{ch['disk']['misses']} misses, rejected {ch['disk']['rejected_corrupt']}+{ch['disk']['rejected_mismatch']}; "
          f"prefix stats {ch['prefix']})", flush=True)

    llm.core.scheduler.prefix_caching = False
    out_ref = llm.generate(b_ids, greedy)[0]
    llm.core.scheduler.prefix_caching = True
    res["b_no_prefix_cache"] = {"ttft_s": out_ref.metrics["ttft_s"], "cached": out_ref.cached_tokens,
                                "text": out_ref.text}
    print(f"4. B no prefix cache  TTFT {out_ref.metrics['ttft_s']:8.2f} s  cached {out_ref.cached_tokens:6d}/{len(b_ids)}"
          f"  answer {out_ref.text!r}", flush=True)

    cold = out_a.metrics["ttft_s"]
    same_ok = out_b.token_ids == out_ref.token_ids
    new_ok = ch["tokens"] == out_ref.token_ids
    res["checks"] = {
        "same_process_ratio": out_b.metrics["ttft_s"] / cold, "new_process_ratio": ch["ttft_s"] / cold,
        "same_process_tokens_identical": same_ok, "new_process_tokens_identical": new_ok,
    }
    c = res["checks"]
    print("\n## bar: TTFT of the second question <= 10% of the first")
    print(f"  same process: {out_b.metrics['ttft_s']:.2f} / {cold:.2f} s = {100 * c['same_process_ratio']:.1f}%  "
          f"{'MET' if c['same_process_ratio'] <= 0.10 else 'NOT MET'}")
    print(f"  new process:  {ch['ttft_s']:.2f} / {cold:.2f} s = {100 * c['new_process_ratio']:.1f}%  "
          f"{'MET' if c['new_process_ratio'] <= 0.10 else 'NOT MET'}")
    print(f"  (B's full prefill without the cache: {out_ref.metrics['ttft_s']:.2f} s)")
    print("## greedy tokens of B, cached prefix vs computed from scratch")
    print(f"  device prefix cache: {'identical' if same_ok else 'DIFFERENT'} ({len(out_b.token_ids)} tokens)")
    print(f"  disk store, new process: {'identical' if new_ok else 'DIFFERENT'} ({len(ch['tokens'])} tokens)")
    res["total_s"] = time.perf_counter() - t_start
    print(f"\n# total {res['total_s']:.0f} s, load average at end {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
