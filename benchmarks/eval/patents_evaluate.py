"""Scoring the patent pipeline on a folder of `<id>.txt` claim sets with `<id>.truth.json` (the
corpus format: per claim `number`, `type` independent/dependent, `depends_on`, optional
`also_accept`).

Per document and in total:
- dependencies: claims whose `depends_on` is exactly the truth (or an accepted alternative);
- type: claims whose independent/dependent type is the truth's;
- counts: the claim counts a fee calculation needs (independent, total, multiple dependent)
  against the counts the truth implies (a claim with more than one parent is multiple dependent);
- findings: how many findings the export has, by code and severity (not scored against truth,
  recorded so that a change in noise shows).

    python -m benchmarks.eval.patents_evaluate [FOLDER] [--json]

FOLDER defaults to the development corpus (`../shared/corpus/patents` beside the checkout), else the test fixtures.

With `--llm on` it runs the LLM step `patents.claim_summaries` with the default model (or
`--model`) over the development corpus and `data/samples/patents` (files met twice counted once),
and scores the generated summaries against the rules-only ones (the scaffold built from the parsed
elements) on proxies — there is no gold summary:
- grounding: share of a summary's content words found in the claim's own text (mean), and the
  share of summaries at 0.8 or more;
- focus (dependent claims): the summary names a word the claim adds (in its own text and not in
  any ancestor's) and no word that only its ancestors hold;
- coverage (independent claims): share of the claim's elements of which the summary names a word;
- degenerate: empty, or a word sequence of three repeated;
- good: grounding >= 0.8, not degenerate, and focus (dependent) or coverage >= 0.5 (independent);
  the registry's measurement is the share of good summaries, rules vs model;
- per patent: seconds, requests, prompt and generated tokens, document reuse (from the step's record).

    OMP_NUM_THREADS=1 python -m benchmarks.eval.patents_evaluate --llm on [--strategy short|claims]
        [--prompt plain|guided] [--max-docs N] [--only ID ...] [--show N] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from pipelines.patents import PatentResult, analyse_text

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_FOLDERS = (ROOT.parent / "shared" / "corpus" / "patents", ROOT / "tests" / "fixtures" / "patents")


def score(result: PatentResult, truth: dict) -> dict:
    """Numbers for one document (see the module docstring)."""
    got = {c.number: c for c in result.claims}
    n = deps_ok = type_ok = 0
    for t in truth["claims"]:
        n += 1
        c = got.get(t["number"])
        if c is None:
            continue
        accepted = [sorted(t["depends_on"])] + [sorted(a) for a in t.get("also_accept") or []]
        deps_ok += sorted(c.depends_on) in accepted
        type_ok += c.independent == (t["type"] == "independent")
    truth_counts = {
        "independent": sum(1 for t in truth["claims"] if t["type"] == "independent"),
        "total": len(truth["claims"]),
        "multiple_dependent": sum(1 for t in truth["claims"] if len(t["depends_on"]) > 1),
    }
    s = result.stats
    got_counts = {"independent": s.n_independent, "total": s.n_active, "multiple_dependent": s.n_multiple_dependent}
    return {
        "claims": n,
        "dependencies_right": deps_ok,
        "type_right": type_ok,
        "counts_right": got_counts == truth_counts,
        "counts": got_counts,
        "findings_by_code": dict(Counter(f.code for f in result.findings)),
        "findings_by_severity": dict(Counter(f.severity for f in result.findings)),
    }


def evaluate(folder: Path) -> dict:
    """Scores for every `<id>.truth.json` in `folder` and their totals."""
    docs = {}
    for truth_path in sorted(folder.glob("*.truth.json")):
        pid = truth_path.name[: -len(".truth.json")]
        truth = json.loads(truth_path.read_text(encoding="utf-8"))
        text = (folder / f"{pid}.txt").read_text(encoding="utf-8")
        docs[pid] = score(analyse_text(text, doc_id=pid), truth)
    total: dict = {"documents": len(docs)}
    for k in ("claims", "dependencies_right", "type_right"):
        total[k] = sum(d[k] for d in docs.values())
    total["counts_right"] = sum(d["counts_right"] for d in docs.values())
    for k in ("findings_by_code", "findings_by_severity"):
        acc: Counter = Counter()
        for d in docs.values():
            acc.update(d[k])
        total[k] = dict(sorted(acc.items()))
    return {"folder": str(folder), "documents": docs, "total": total}


SAMPLES = ROOT / "data" / "samples" / "patents"


def _ancestor_words(result: PatentResult) -> dict[int, set[str]]:
    """Per claim, the content words of all its ancestors' texts."""
    from pipelines.patents.summaries import content_words

    by = {c.number: c for c in result.claims}
    out: dict[int, set[str]] = {}
    for c in result.claims:
        seen, stack, words = set(), list(c.depends_on), set()
        while stack:
            n = stack.pop()
            if n in seen or n not in by or n == c.number:
                continue
            seen.add(n)
            words |= content_words(by[n].text)
            stack.extend(by[n].depends_on)
        out[c.number] = words
    return out


def summary_scores(result: PatentResult, summaries) -> dict:
    """The proxies of the module docstring for one patent's summaries (model's or rules')."""
    from pipelines.patents.summaries import body, content_words, element_head

    by = {c.number: c for c in result.claims}
    anc = _ancestor_words(result)
    rows = []
    for s in summaries:
        c = by[s.claim]
        words = content_words(body(s.text))
        toks = s.text.lower().split()
        grams = [tuple(toks[i : i + 3]) for i in range(len(toks) - 2)]
        degenerate = not words or len(grams) != len(set(grams))
        row = {"claim": s.claim, "kind": s.kind, "grounding": s.grounding, "degenerate": degenerate,
               "words": len(toks), "claim_words": len(c.text.split())}
        own = content_words(c.text)
        if c.independent:
            heads = [content_words(element_head(e.text)) for e in c.elements] or [own]
            row["coverage"] = sum(bool(h & words) for h in heads) / len(heads)
            row["good"] = s.grounding >= 0.8 and not degenerate and row["coverage"] >= 0.5
        else:
            novel = own - anc[c.number]
            parent_only = anc[c.number] - own
            row["focus"] = bool(words & novel) and not (words & parent_only)
            row["good"] = s.grounding >= 0.8 and not degenerate and row["focus"]
        rows.append(row)
    return {"rows": rows}


def _totals(rows: list[dict]) -> dict:
    n = len(rows)
    dep = [r for r in rows if r["kind"] == "dependent"]
    ind = [r for r in rows if r["kind"] == "independent"]
    avg = lambda xs: round(sum(xs) / len(xs), 4) if xs else None  # noqa: E731
    return {"summaries": n, "grounding_mean": avg([r["grounding"] for r in rows]),
            "grounded_share": avg([r["grounding"] >= 0.8 for r in rows]),
            "focus_share": avg([r["focus"] for r in dep]), "coverage_mean": avg([r["coverage"] for r in ind]),
            "degenerate_share": avg([r["degenerate"] for r in rows]), "good_share": avg([r["good"] for r in rows]),
            "words_per_claim_word": avg([r["words"] / max(1, r["claim_words"]) for r in rows])}


def evaluate_llm(files: list[Path], strategy: str = "short", model: str | None = None, max_num_seqs: int = 8,
                 show: int = 0, prompt: str = "guided") -> dict:
    """Run patents.claim_summaries (--llm on) over `files`; scores model vs rules and the step's cost."""
    import time

    from pipelines.documents import Document
    from pipelines.llm import EngineSettings, LLMRun, get_engine
    from pipelines.patents import rules_summaries
    from pipelines.patents.pipeline import analyse_document

    settings = EngineSettings(model=model, device="cpu", dtype="float32", max_num_seqs=max_num_seqs)
    t0 = time.perf_counter()
    engine = get_engine(settings)
    load_s = time.perf_counter() - t0
    docs, all_model, all_rules, shown = {}, [], [], []
    for f in files:
        text = f.read_text(encoding="utf-8").replace("\r\n", "\n")
        doc = Document.from_text(text, doc_id=f.stem)
        run = LLMRun("on", settings, engine=engine)
        t = time.perf_counter()
        res = analyse_document(doc, llm=run, summary_strategy=strategy, summary_prompt=prompt)
        seconds = time.perf_counter() - t
        rec = res.llm.steps[0] if res.llm and res.llm.steps else None
        model_rows = summary_scores(res, res.claim_summaries or [])["rows"]
        rules_rows = summary_scores(res, rules_summaries(res))["rows"]
        all_model += model_rows
        all_rules += rules_rows
        docs[f.stem] = {"claims": len(rules_rows), "seconds": round(seconds, 2),
                        "step": rec.model_dump() if rec else None,
                        "model": _totals(model_rows), "rules": _totals(rules_rows),
                        "fell_back_to_rules": sum(s.source == "rules" for s in res.claim_summaries or [])}
        for s in (res.claim_summaries or [])[: max(0, show - len(shown))]:
            c = next(c for c in res.claims if c.number == s.claim)
            shown.append({"patent": f.stem, "claim": s.claim, "claim_text": " ".join(c.text.split()),
                          "rules": s.scaffold, "model": s.text, "grounding": s.grounding,
                          "spans": [(x.span.char_start, x.span.char_end, x.share) for x in s.spans]})
    return {"strategy": strategy, "prompt": prompt, "model": settings.describe(), "load_s": round(load_s, 1), "documents": docs,
            "model_total": _totals(all_model), "rules_total": _totals(all_rules), "shown": shown}


def llm_files(max_docs: int | None, names: list[str] | None = None) -> list[Path]:
    """The development corpus then data/samples/patents, a file name met twice counted once."""
    seen, out = set(), []
    for folder in (DEFAULT_FOLDERS[0], SAMPLES):
        for f in sorted(folder.glob("*.txt")) if folder.is_dir() else []:
            if f.name not in seen and (not names or f.stem in names):
                seen.add(f.name)
                out.append(f)
    return out[:max_docs] if max_docs else out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", type=Path)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--llm", choices=("off", "on"), default="off", help="on: score patents.claim_summaries")
    ap.add_argument("--strategy", choices=("short", "claims"), default="short")
    ap.add_argument("--prompt", choices=("plain", "guided"), default="guided",
                    help="guided: the claim's own rules summary in the prompt too")
    ap.add_argument("--model", default=None, help="a GGUF file or HF folder (default: the packaged Gemma 3 270M)")
    ap.add_argument("--max-docs", type=int, default=None)
    ap.add_argument("--only", nargs="*", default=None, help="patent ids (file stems) to run")
    ap.add_argument("--max-num-seqs", type=int, default=8, help="the engine's batch (8: the default settings)")
    ap.add_argument("--show", type=int, default=0, help="print this many summaries beside their claims")
    args = ap.parse_args()
    if args.llm == "on":
        out = evaluate_llm(llm_files(args.max_docs, args.only), args.strategy, args.model, args.max_num_seqs, args.show,
                           args.prompt)
        if args.json:
            print(json.dumps(out, indent=1, sort_keys=True, ensure_ascii=False))
            return 0
        print(f"patents.claim_summaries, strategy {out['strategy']}, prompt {out['prompt']}, {out['model']} (load {out['load_s']} s)")
        for pid, d in out["documents"].items():
            st = d["step"] or {}
            print(f"  {pid:14} {d['claims']:3} claims  {d['seconds']:6.1f} s  requests {st.get('requests')}  "
                  f"prompt {st.get('prompt_tokens')} gen {st.get('generated_tokens')} tokens  reuse {st.get('reuse')}  "
                  f"good model {d['model']['good_share']} rules {d['rules']['good_share']}"
                  + (f"  error {st.get('error')}" if st.get("error") else ""))
        for k in ("model_total", "rules_total"):
            print(f"  {k}: {out[k]}")
        for s in out["shown"]:
            print(f"\n  [{s['patent']} claim {s['claim']}] {s['claim_text'][:300]}")
            print(f"    rules: {s['rules']}")
            print(f"    model: {s['model']}  (grounding {s['grounding']}, spans {s['spans']})")
        return 0
    folder = args.folder or next((f for f in DEFAULT_FOLDERS if f.is_dir()), DEFAULT_FOLDERS[-1])
    out = evaluate(folder)
    if args.json:
        print(json.dumps(out, indent=1, sort_keys=True))
        return 0
    print(f"{out['folder']}")
    for pid, d in out["documents"].items():
        print(f"  {pid:14} deps {d['dependencies_right']}/{d['claims']}  type {d['type_right']}/{d['claims']}  "
              f"counts {'right' if d['counts_right'] else 'WRONG'} {d['counts']}  findings {d['findings_by_code']}")
    t = out["total"]
    print(f"  total: {t['documents']} documents, dependencies {t['dependencies_right']}/{t['claims']}, "
          f"type {t['type_right']}/{t['claims']}, counts right in {t['counts_right']}/{t['documents']}")
    print(f"  findings by code: {t['findings_by_code']}")
    print(f"  findings by severity: {t['findings_by_severity']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
