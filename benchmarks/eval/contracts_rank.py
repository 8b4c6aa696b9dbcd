"""Where the true material changes land in the report's change list (material first).

    python -m benchmarks.eval.contracts_rank CORPUS_DIR

For each pair with truth, the truth rows that change substance (added, removed, or changed with a
`kind` other than `capitalisation_only`, `whitespace_only` or `cross_reference_renumbering`: a
reference that only follows a renumbering is by design not material) are looked up in `result.summary`: a
summary item covers a truth unit when the clause it names (either side) starts inside that unit.
Per pair: how many true material changes there are, how many the report marks material, their
1-based ranks in the list, and how many items the report marks material that cover no true
material change (noise ranked with them, e.g. layout reflow).
"""

from __future__ import annotations

import argparse
import json
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
    return {"true_material": len(wanted), "listed": found, "marked_material": material,
            "ranks": sorted(rank_list), "worst_rank": max(rank_list, default=None),
            "material_noise": noise, "summary_items": len(result.summary)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path)
    args = ap.parse_args()
    for d in sorted(p for p in args.corpus.iterdir() if (p / "truth.json").is_file()):
        truth = json.loads((d / "truth.json").read_text(encoding="utf-8"))
        res = compare_texts((d / "v1.txt").read_text(encoding="utf-8"), (d / "v2.txt").read_text(encoding="utf-8"))
        print(json.dumps({"pair": d.name, **ranks(truth, res)}))


if __name__ == "__main__":
    main()
