"""Benchmark: aligning a pair of 300-clause contracts (target: under 10 s on a 2-core CPU).

    python benchmarks/bench_contracts.py [--clauses 300] [--repeat 3] [--semantic]

Version A is built from real clause bodies of the English fixture contracts (tests/fixtures/contracts),
numbered as 20 sections of 15 clauses (1.1 … 20.15); Chinese: 300 articles 第一条 … 第三百条 from the
Chinese fixture's paragraphs. Version B is A altered by `benchmarks.eval.contracts_synthetic.make_pair`
(5 deletions, insertions, word edits, rewordings and moves each), so the run also reports alignment
F1 against that known truth. Times are medians over --repeat runs of the whole pipeline
(`compare_documents`: structure, alignment, redline, flags, export model) plus the JSON dump.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.eval.contracts_evaluate import score  # noqa: E402
from benchmarks.eval.contracts_synthetic import make_pair  # noqa: E402
from pipelines.contracts.align import AlignConfig, align  # noqa: E402
from pipelines.contracts.pipeline import compare_documents  # noqa: E402
from pipelines.contracts.structure import parse_structure  # noqa: E402
from pipelines.documents import Document  # noqa: E402
from pipelines.text.numerals import int_to_chinese  # noqa: E402

FIX = ROOT / "tests" / "fixtures" / "contracts"


def bodies(lang: str) -> list[str]:
    out = []
    for d in sorted(FIX.iterdir()):
        if not d.is_dir() or not d.name.startswith(lang):
            continue
        text = (d / "v1.txt").read_text(encoding="utf-8")
        for c in parse_structure(Document.from_text(text)).clauses:
            b = re.sub(r"\s+", " ", c.body(text)).strip()
            if len(b) >= (60 if lang == "en" else 20):
                out.append(b)
    return out


def build(n: int, lang: str) -> str:
    pool = bodies(lang)
    parts = []
    if lang == "en":
        per = 15
        for k in range(n):
            sec, sub = divmod(k, per)
            if sub == 0:
                parts.append(f"{sec + 1}. Section {sec + 1}")
            # vary repeated bodies so that clauses stay distinguishable, like a real long contract
            parts.append(f"{sec + 1}.{sub + 1} {pool[k % len(pool)]} (Ref {k + 1}.)")
    else:
        for k in range(n):
            parts.append(f"第{int_to_chinese(k + 1)}条 {pool[k % len(pool)]}（序{k + 1}）")
    return "\n\n".join(parts) + "\n"


def run(n: int, lang: str, repeat: int, semantic: bool) -> dict:
    a = build(n, lang)
    foreign = bodies("zh" if lang == "en" else "en")[:50] if lang == "en" else ["甲方应当在本合同签订后十日内向乙方交付设备，并提供安装调试服务。",
                                                                               "乙方逾期付款的，每逾期一日按应付款项的千分之一支付违约金。"]
    syn = make_pair(a, foreign if lang == "zh" else bodies("en")[-5:], seed=7, n_each=5)
    da = Document.from_text(syn.a, doc_id="a")
    db = Document.from_text(syn.b, doc_id="b")
    cfg = AlignConfig(semantic=semantic)
    if semantic:
        from pipelines.text.retrieval import minilm_model
        t0 = time.perf_counter()
        minilm_model()
        load_s = time.perf_counter() - t0
    times, dumps = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = compare_documents(da, db, cfg)
        t1 = time.perf_counter()
        js = r.model_dump_json(indent=2)
        t2 = time.perf_counter()
        times.append(t1 - t0)
        dumps.append(t2 - t1)
    sa, sb = parse_structure(Document.from_text(syn.a)), parse_structure(Document.from_text(syn.b))
    al = align(syn.a, sa, syn.b, sb, cfg)
    s = score(syn.truth, sa.clauses, sb.clauses, al.pairs)
    out = {
        "lang": lang, "semantic": semantic, "clauses_a": r.stats["clauses_a"], "clauses_b": r.stats["clauses_b"],
        "chars_a": len(syn.a), "compare_s_median": round(statistics.median(times), 3),
        "compare_s_all": [round(t, 3) for t in times], "json_dump_s": round(statistics.median(dumps), 3),
        "json_bytes": len(js), "alignment_f1": round(s.alignment_f1, 4), "changed_f1": round(s.changed_f1, 4),
        "move_recall": s.move_recall,
    }
    if semantic:
        out["model_load_s"] = round(load_s, 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clauses", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--semantic", action="store_true", help="also time the MiniLM path (English)")
    args = ap.parse_args()
    print(json.dumps({"python": platform.python_version(), "machine": platform.machine(), "clauses": args.clauses}))
    for lang in ("en", "zh"):
        print(json.dumps(run(args.clauses, lang, args.repeat, False)))
    if args.semantic:
        print(json.dumps(run(args.clauses, "en", args.repeat, True)))


if __name__ == "__main__":
    main()
