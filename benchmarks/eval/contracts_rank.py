"""Where the true material changes land in the report's change list (material first).

    python -m benchmarks.eval.contracts_rank CORPUS_DIR [--llm off|on] [--pairs NAME ...] [--max-explain N]

For each pair with truth, the truth rows that change substance (added, removed, or changed with a
`kind` other than `capitalisation_only`, `whitespace_only` or `cross_reference_renumbering`: a
reference that only follows a renumbering is by design not material) are looked up in `result.summary`: a
summary item covers a truth unit when the clause it names (either side) starts inside that unit.
Per pair: how many true material changes there are, how many the report marks material, their
1-based ranks in the list, and how many items the report marks material that cover no true
material change (noise ranked with them, e.g. layout reflow); material precision / recall / F1
(items marked material that cover a true material change; true material changes whose first item is
marked material).

`--llm on` runs the pipeline's LLM steps (pipelines.contracts.llm_steps: materiality fused with the
flags, explanations, amendment summary) with the default model (`EngineSettings()`; load time is not
counted) and adds, per pair, the seconds of the comparison, each step's record (seconds, requests,
tokens, reuse), how often the fusion changed the rules' decision, and how many explanations were
kept (grounded) or replaced by the rules' sentence.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from pipelines.contracts import ContractResult, compare_texts

NOT_MATERIAL_KINDS = {"capitalisation_only", "whitespace_only", "cross_reference_renumbering"}


def _uid(u: dict) -> str:
    return u.get("id") or u.get("label")


def true_material(truth: dict) -> list[tuple[str | None, str | None]]:
    """(old unit, new unit) of every truth row that changes substance."""
    out = []
    for r in truth["alignment"]:
        if r["status"] == "unchanged":
            continue
        if r["status"] == "changed" and r.get("kind") in NOT_MATERIAL_KINDS:
            continue
        out.append((r.get("old_id", r.get("old")), r.get("new_id", r.get("new"))))
    return out


def ranks(truth: dict, result: ContractResult) -> dict:
    """The ranking figures of one pair (see the module docstring)."""
    starts = {side: {c.anchor: c.span.char_start for c in result.clauses[side]} for side in ("a", "b")}
    units = {"a": {_uid(u): u for u in truth["units_v1"]}, "b": {_uid(u): u for u in truth["units_v2"]}}

    def covers(item, old: str | None, new: str | None) -> bool:
        for side, uid, anchor in (("a", old, item.a), ("b", new, item.b)):
            if uid is None or anchor is None:
                continue
            u, s = units[side][uid], starts[side][anchor]
            if u["start"] <= s < u["end"]:
                return True
        return False

    wanted = true_material(truth)
    found, material, rank_list = 0, 0, []
    for old, new in wanted:
        hits = [k for k, item in enumerate(result.summary) if covers(item, old, new)]
        if hits:
            found += 1
            rank_list.append(hits[0] + 1)
            material += result.summary[hits[0]].material
    noise = sum(1 for item in result.summary if item.material
                and not any(covers(item, old, new) for old, new in wanted))
    n_material = sum(1 for item in result.summary if item.material)
    p = (n_material - noise) / n_material if n_material else 1.0
    r = material / len(wanted) if wanted else 1.0
    return {"true_material": len(wanted), "listed": found, "marked_material": material,
            "ranks": sorted(rank_list), "worst_rank": max(rank_list, default=None),
            "material_noise": noise, "summary_items": len(result.summary),
            "material_p": round(p, 4), "material_r": round(r, 4),
            "material_f1": round(2 * p * r / (p + r), 4) if p + r else 0.0}


def llm_figures(result: ContractResult) -> dict:
    """What the LLM steps did on one pair (see the module docstring)."""
    if result.llm is None:
        return {}
    expl = [it.explanation for it in result.summary if it.explanation is not None]
    judged = [it.materiality for it in result.summary if it.materiality is not None]
    return {"steps": [s.model_dump(include={"step", "ran", "seconds", "requests", "prompt_tokens",
                                            "generated_tokens", "item_errors", "reuse", "error"})
                      for s in result.llm.steps],
            "judged": len(judged), "fusion_changed": sum(m.changed for m in judged),
            "explained": len(expl), "explanations_kept": sum(e.kept for e in expl),
            "summary_kept": result.amendment.kept if result.amendment is not None else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--llm", choices=["off", "on"], default="off")
    ap.add_argument("--pairs", nargs="*", help="only these pair folders")
    ap.add_argument("--max-explain", type=int, default=None, help="explain at most N material changes")
    ap.add_argument("--verbose", action="store_true", help="print each item with its judgement and explanation")
    args = ap.parse_args()
    run, settings = None, None
    if args.llm == "on":
        from pipelines.contracts.llm_steps import StepSettings
        from pipelines.llm import EngineSettings, LLMRun, get_engine

        t0 = time.perf_counter()
        engine = get_engine(EngineSettings())
        print(json.dumps({"model_load_s": round(time.perf_counter() - t0, 1)}))
        settings = StepSettings() if args.max_explain is None else StepSettings(max_explain=args.max_explain)
    for d in sorted(p for p in args.corpus.iterdir() if (p / "truth.json").is_file()):
        if args.pairs and d.name not in args.pairs:
            continue
        truth = json.loads((d / "truth.json").read_text(encoding="utf-8"))
        ticks: list[float] = []
        if args.llm == "on":
            run = LLMRun("on", EngineSettings(), engine=engine, on_progress=lambda step, p, ticks=ticks: ticks.append(time.perf_counter()))
        t0 = time.perf_counter()
        res = compare_texts((d / "v1.txt").read_text(encoding="utf-8"), (d / "v2.txt").read_text(encoding="utf-8"),
                            llm=run, llm_settings=settings)
        t1 = time.perf_counter()
        secs = round(t1 - t0, 1)
        extra = {}
        if ticks:  # the longest wait between two progress callbacks (or from the start / to the end)
            edges = [t0, *ticks, t1]
            extra = {"progress_calls": len(ticks),
                     "longest_silence_s": round(max(b - a for a, b in zip(edges, edges[1:], strict=False)), 1)}
        print(json.dumps({"pair": d.name, "seconds": secs, **ranks(truth, res), **llm_figures(res), **extra},
                         ensure_ascii=False))
        if args.verbose:
            for item in res.summary:
                m = item.materiality
                print(f"  {'M' if item.material else '-'} tier={m.rule_tier if m else '?'} "
                      f"score={m.score if m else '?'} {item.text[:110]}")
                if item.explanation is not None:
                    e = item.explanation
                    print(f"      [{'kept' if e.kept else 'rules'} {e.support}] {e.text[:220]}")
                    if not e.kept:
                        print(f"      (model said: {e.generated[:200]})")
            if res.amendment is not None:
                print(f"  SUMMARY [{'kept' if res.amendment.kept else 'rules'}] {res.amendment.text}")
                print(f"  (model said: {res.amendment.generated})")


if __name__ == "__main__":
    main()
