"""Scoring an alignment against a truth file (the corpus format: `units_v1`, `units_v2`, `alignment`).

The truth's units may be coarser or finer than our clauses, so both are compared through offsets:
a truth unit is represented by the clause that contains its first character (its head clause); a
clause belongs to the truth unit that contains its first character. From our pairs this gives
predicted unit pairs (old, new), (old, None) for deletions and (None, new) for additions.

- alignment F1: over the set of unit pairs (a truth row with `also_accept` accepts that pairing too);
- changed F1: over the unit pairs that are changed (truth: status changed/added/removed; ours: any of
  our clauses starting inside either unit is edited, added, deleted, split or merged);
- renumber recall: truth rows marked `renumbered` whose pair we found and marked renumbered;
- move recall: truth rows marked `moved` (synthetic truths) whose pair we found and marked moved.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.contracts.align import Pair
from pipelines.contracts.structure import Clause


@dataclass
class Scores:
    alignment_p: float
    alignment_r: float
    alignment_f1: float
    changed_p: float
    changed_r: float
    changed_f1: float
    renumber_recall: float | None
    move_recall: float | None
    n_truth_rows: int
    errors: list[str]

    def as_dict(self) -> dict:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items() if k != "errors"}


def _uid(u: dict) -> str:
    return u.get("id") or u.get("label")


def _unit_of(units: list[dict], pos: int) -> str | None:
    for u in units:
        if u["start"] <= pos < u["end"]:
            return _uid(u)
    return None


def _head(clauses: list[Clause], u: dict) -> int | None:
    for k, c in enumerate(clauses):
        if c.start <= u["start"] < c.end or u["start"] <= c.start < u["end"]:
            return k
    return None


def _f1(tp: int, n_pred: int, n_true: int) -> tuple[float, float, float]:
    p = tp / n_pred if n_pred else 1.0
    r = tp / n_true if n_true else 1.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def score(truth: dict, clauses_a: list[Clause], clauses_b: list[Clause], pairs: list[Pair]) -> Scores:
    ua, ub = truth["units_v1"], truth["units_v2"]
    by_a: dict[int, list[Pair]] = {}
    by_b: dict[int, list[Pair]] = {}
    for p in pairs:
        if p.a is not None:
            by_a.setdefault(p.a, []).append(p)
        if p.b is not None:
            by_b.setdefault(p.b, []).append(p)

    pred: dict[tuple, Pair | None] = {}
    for u in ua:
        h = _head(clauses_a, u)
        ps = by_a.get(h, []) if h is not None else []
        if not ps or all(p.b is None for p in ps):
            pred[(_uid(u), None)] = ps[0] if ps else None
        for p in ps:
            if p.b is not None:
                pred[(_uid(u), _unit_of(ub, clauses_b[p.b].start))] = p
    for u in ub:
        h = _head(clauses_b, u)
        ps = by_b.get(h, []) if h is not None else []
        for p in ps:
            old = _unit_of(ua, clauses_a[p.a].start) if p.a is not None else None
            pred.setdefault((old, _uid(u)), p)
    pred = {k: v for k, v in pred.items() if k != (None, None)}

    rows = truth["alignment"]
    true_keys: dict[tuple, dict] = {}
    for r in rows:
        key = (r.get("old_id", r.get("old")), r.get("new_id", r.get("new")))
        true_keys[key] = r
    # also_accept: another pairing a person accepted for a genuinely ambiguous row
    for r in rows:
        alt = r.get("also_accept")
        if alt:
            old = r.get("old_id", r.get("old"))
            new_alt = alt.get("new_id", alt.get("new"))
            if (old, new_alt) in pred:
                true_keys.pop((old, r.get("new_id", r.get("new"))), None)
                true_keys.pop((None, new_alt), None)
                true_keys[(old, new_alt)] = {**r, "status": alt.get("status", "changed"), "new_id": new_alt}

    tp = len(set(pred) & set(true_keys))
    ap, ar, af = _f1(tp, len(pred), len(true_keys))

    def changed_pred(key: tuple) -> bool:
        old, new = key
        hit = False
        for side, units, clauses, idx in (("a", ua, clauses_a, by_a), ("b", ub, clauses_b, by_b)):
            uid = old if side == "a" else new
            if uid is None:
                continue
            u = next(x for x in units if _uid(x) == uid)
            for k, c in enumerate(clauses):
                if u["start"] <= c.start < u["end"] or c.start <= u["start"] < c.end:
                    for p in idx.get(k, []):
                        if p.edited or p.a is None or p.b is None or p.change in {"split", "merged"}:
                            hit = True
        return hit

    pc = {k for k in pred if changed_pred(k)}
    tc = {k for k, r in true_keys.items() if r["status"] != "unchanged"}
    cp, cr, cf = _f1(len(pc & tc), len(pc), len(tc))

    ren = [k for k, r in true_keys.items() if r.get("renumbered")]
    ren_hits = sum(1 for k in ren if k in pred and pred[k] is not None and pred[k].renumbered)
    mov = [k for k, r in true_keys.items() if r.get("moved")]
    mov_hits = sum(1 for k in mov if k in pred and pred[k] is not None and pred[k].moved)

    errors = [f"missed pair {k}" for k in sorted(set(true_keys) - set(pred), key=str)]
    errors += [f"wrong pair {k}" for k in sorted(set(pred) - set(true_keys), key=str)]
    errors += [f"missed change {k}" for k in sorted(tc - pc, key=str)]
    errors += [f"spurious change {k}" for k in sorted(pc - tc, key=str)]
    return Scores(ap, ar, af, cp, cr, cf, ren_hits / len(ren) if ren else None, mov_hits / len(mov) if mov else None,
                  len(true_keys), errors)


def main() -> None:
    """`python -m benchmarks.eval.contracts_evaluate CORPUS_DIR [--semantic]`: per-pair scores against truth."""
    import argparse
    import json
    import time
    from pathlib import Path

    from pipelines.contracts.align import AlignConfig, align
    from pipelines.contracts.structure import parse_structure
    from pipelines.documents import Document

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--semantic", action="store_true")
    ap.add_argument("--errors", action="store_true", help="list the wrong and missed pairs")
    args = ap.parse_args()
    for d in sorted(p for p in args.corpus.iterdir() if (p / "truth.json").is_file()):
        truth = json.loads((d / "truth.json").read_text(encoding="utf-8"))
        a, b = (d / "v1.txt").read_text(encoding="utf-8"), (d / "v2.txt").read_text(encoding="utf-8")
        t0 = time.perf_counter()
        sa, sb = parse_structure(Document.from_text(a)), parse_structure(Document.from_text(b))
        al = align(a, sa, b, sb, AlignConfig(semantic=args.semantic))
        s = score(truth, sa.clauses, sb.clauses, al.pairs)
        print(json.dumps({"pair": d.name, "seconds": round(time.perf_counter() - t0, 2), **s.as_dict()}))
        if args.errors:
            for e in s.errors:
                print("   ", e)


if __name__ == "__main__":
    main()
