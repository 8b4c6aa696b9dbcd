"""CPU decode with and without prompt-lookup speculative decoding (engine/core/speculative.py) on
questions over real documents: the packaged Gemma 3 270M with the CPU defaults (int8 weights),
one engine, the proposer switched on and off between runs of the same prompt (order alternating;
the prefix cache cleared before each run, so both compute the prompt the same way),
greedy answers up to 64 tokens stopped at a blank line. Per document and thread count: decode tokens
per second (first streamed token to the last), the drafts' acceptance, and whether both runs gave
the same tokens.

    python benchmarks/probe_cpu_speculative.py [--threads 1 2] [--doc-tokens 3000] [--json PATH]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine import LLM, CacheConfig, SamplingParams, SchedulerConfig  # noqa: E402
from engine.core.speculative import NgramProposer  # noqa: E402

S = "data/samples"
DOCS = {
    "contract (en)": (f"{S}/contracts/en-github-tos-2017-10-to-2018-05/v2.txt",
                      ["What law governs these terms?", "Quote the sentence that limits GitHub's liability.",
                       "How can a user terminate the agreement?"]),
    "patent (en)": (f"{S}/patents/US6836979.txt",
                    ["What does claim 1 claim?", "What is the title of the patent?",
                     "Which claims depend on claim 1?"]),
    "discharge summary (en)": (f"{S}/medical/curated-abscess-cellulitis/abscess-with-cellulitis-discharge-summary.txt",
                               ["What was the diagnosis?", "Which antibiotics were given?",
                                "What follow-up was arranged?"]),
    "contract (zh)": (f"{S}/contracts/zh-interpretation-personal-injury-2020-to-2022/v2.txt",
                      ["本解释自何时起施行？", "误工费如何计算？", "残疾赔偿金按照什么标准计算？"]),
}


def run(llm: LLM, prompt: list[int], params: SamplingParams) -> tuple[list[int], float | None]:
    stamps, toks = [], []
    t = time.perf_counter()
    for d in llm.stream([prompt], params):
        stamps.append(time.perf_counter() - t)
        toks += d.token_ids
    span = stamps[-1] - stamps[0] if len(stamps) > 1 else 0
    return toks, (len(stamps) - 1) / span if span > 0 else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--doc-tokens", type=int, default=3000)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    llm = LLM(device="cpu", cache=CacheConfig(memory_budget=2**30), scheduler=SchedulerConfig(max_model_len=8192))
    k = llm.core.proposer.k
    params = SamplingParams(max_tokens=64, stop=["\n\n"])
    rows = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        for name, (path, questions) in DOCS.items():
            path = Path(ROOT / path)
            if not path.exists():
                print(f"skip {name}: {path} missing")
                continue
            doc = llm.encode(path.read_text(encoding="utf-8"))[: args.doc_tokens]
            for i, q in enumerate(questions):
                prompt = doc + llm.encode(f"\n\nQuestion: {q}\nAnswer:")
                res = {}
                order = ("spec", "plain") if i % 2 else ("plain", "spec")
                for way in order:
                    llm.core.proposer = NgramProposer(k) if way == "spec" else None
                    llm.clear_prefix_cache()  # both runs compute the prompt afresh (same prefill)
                    toks, tps = run(llm, prompt, params)
                    res[way] = (toks, tps, llm.core.proposer.stats if way == "spec" else None)
                st = res["spec"][2]
                row = {"threads": threads, "doc": name, "question": q, "tokens": len(res["plain"][0]),
                       "plain_tok_s": res["plain"][1], "spec_tok_s": res["spec"][1],
                       "same_tokens": res["plain"][0] == res["spec"][0],
                       "drafted": st.drafted, "accepted": st.accepted}
                rows.append(row)
                print(json.dumps(row, ensure_ascii=False), flush=True)
    print("\n| threads | document | answers' tokens | plain tok/s (median) | speculative tok/s (median) | drafts accepted | same tokens |")
    print("|---|---|---|---|---|---|---|")
    for threads in args.threads:
        for name in DOCS:
            rs = [r for r in rows if r["threads"] == threads and r["doc"] == name and r["plain_tok_s"] and r["spec_tok_s"]]
            if not rs:
                continue
            acc = sum(r["accepted"] for r in rs), sum(r["drafted"] for r in rs)
            print(f"| {threads} | {name} | {sum(r['tokens'] for r in rs)} | {statistics.median(r['plain_tok_s'] for r in rs):.1f} | "
                  f"{statistics.median(r['spec_tok_s'] for r in rs):.1f} | {acc[0]} of {acc[1]} | "
                  f"{sum(r['same_tokens'] for r in rs)} of {len(rs)} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                               "machine": platform.platform(), "k": k, "rows": rows}, indent=1,
                                              ensure_ascii=False))


if __name__ == "__main__":
    main()
