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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
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
