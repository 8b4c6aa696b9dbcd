"""Measure the alignment threshold (and the value of MiniLM) on version pairs with truth.

    python -m benchmarks.eval.contracts_calibrate CORPUS_DIR [--foreign DIR_OR_FILE ...] [--semantic] [--seeds 3]
    python -m benchmarks.eval.contracts_calibrate CORPUS_DIR --compare     (n-gram vs MiniLM on heavier edits)
    python -m benchmarks.eval.contracts_calibrate CORPUS_DIR --floor [--foreign ...]   (the content floor)

CORPUS_DIR holds one folder per real pair (`v1.txt`, `v2.txt`, `truth.json`). Besides the real pairs,
every v1 is altered synthetically (`contracts_synthetic.make_pair`: deletions, insertions of clauses taken from
the --foreign texts, word edits of 25% of a clause, rewordings, moves) with several seeds. For each
threshold on a grid the script reports mean clause-alignment F1 over the real pairs and over the
synthetic pairs; the chosen threshold is the middle of the widest run of grid points whose overall
mean F1 is within 0.002 of the best. It also reports the score gap: the lowest score of a true pair
against the highest best-candidate score of a clause that truly has no partner.

`--floor` measures `AlignConfig.min_content` (the content score below which no pair is matched) at
the chosen threshold: the same cases plus, per pair and seed, a variant in which three numbered
clauses keep their number under a foreign clause's text (`reuse`: truly deleted + added); the
floor is the middle of the widest run of grid points within 0.002 of the best mean F1.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

from benchmarks.eval.contracts_evaluate import score
from benchmarks.eval.contracts_synthetic import make_pair
from pipelines.contracts.align import AlignConfig, align, content_scores, score_matrix
from pipelines.contracts.similarity import ngram_matrix
from pipelines.contracts.structure import parse_structure
from pipelines.documents import Document

GRID = [round(x, 2) for x in np.arange(0.20, 0.92, 0.02)]


def _foreign(paths: list[str], lang: str) -> list[str]:
    out = []
    for p in paths:
        for f in sorted(Path(p).rglob("*.txt")) if Path(p).is_dir() else [Path(p)]:
            text = f.read_text(encoding="utf-8", errors="replace")
            st = parse_structure(Document.from_text(text))
            if st.language != lang:
                continue
            for c in st.clauses:
                body = c.body(text).strip()
                if 80 <= len(body) <= 1200:
                    out.append(re.sub(r"\s+", " ", body))
    return out


def _cases(corpus: Path, foreign: list[str], seeds: int) -> list[tuple[str, str, str, dict, bool]]:
    cases = []
    pairs = sorted(d for d in corpus.iterdir() if (d / "truth.json").is_file())
    for d in pairs:
        truth = json.loads((d / "truth.json").read_text(encoding="utf-8"))
        cases.append((d.name, (d / "v1.txt").read_text(encoding="utf-8"), (d / "v2.txt").read_text(encoding="utf-8"), truth, True))
    for d in pairs:
        a = (d / "v1.txt").read_text(encoding="utf-8")
        lang = parse_structure(Document.from_text(a)).language
        pool = _foreign([str(p / "v1.txt") for p in pairs if p != d] + foreign, lang)
        # a foreign clause must really be foreign: drop any that resembles a clause of this document
        st = parse_structure(Document.from_text(a))
        if pool:
            sim = ngram_matrix(pool, [c.body(a) for c in st.clauses], lang)
            pool = [t for t, m in zip(pool, sim.max(axis=1), strict=True) if m < 0.5]
        if not pool:
            continue
        for seed in range(seeds):
            share = (0.2, 0.35, 0.5)[seed % 3]  # word-edit strength varies with the seed
            syn = make_pair(a, pool, seed, edit_share=share)
            cases.append((f"{d.name}#syn{seed}/edit{share}", syn.a, syn.b, syn.truth, False))
    return cases


def run(corpus: Path, foreign: list[str], semantic: bool, seeds: int) -> dict:
    cfg0 = AlignConfig(semantic=semantic)
    table = {t: [] for t in GRID}
    gaps = []
    for name, a, b, truth, real in _cases(corpus, foreign, seeds):
        sa, sb = parse_structure(Document.from_text(a)), parse_structure(Document.from_text(b))
        content, _ = content_scores(a, sa, b, sb, cfg0)
        for t in GRID:
            cfg = AlignConfig(threshold=t, semantic=semantic, w_anchor=cfg0.w_anchor, w_context=cfg0.w_context)
            al = align(a, sa, b, sb, cfg, content=content)
            s = score(truth, sa.clauses, sb.clauses, al.pairs)
            table[t].append((name, real, s.alignment_f1, s.changed_f1))
        S = score_matrix(content, sa.clauses, sb.clauses, cfg0)
        al = align(a, sa, b, sb, cfg0, content=content)
        gaps.append((name, _gap(truth, sa.clauses, sb.clauses, S)))
    rows = []
    for t in GRID:
        real = [x[2] for x in table[t] if x[1]]
        syn = [x[2] for x in table[t] if not x[1]]
        allf = [x[2] for x in table[t]]
        rows.append({"threshold": t, "real_f1": float(np.mean(real)), "synthetic_f1": float(np.mean(syn)) if syn else None,
                     "all_f1": float(np.mean(allf)), "min_f1": float(np.min(allf)),
                     "changed_f1": float(np.mean([x[3] for x in table[t]]))})
    best, plateau, chosen = _plateau(rows, "threshold")
    return {"semantic": semantic, "cases": len(table[GRID[0]]), "grid": rows, "best_all_f1": best,
            "plateau": plateau, "chosen": chosen, "gaps": gaps}


def _plateau(rows: list[dict], key: str) -> tuple[float, list[float], float]:
    """The best mean F1 over the grid, the widest run of grid points (step 0.02) within 0.002 of it,
    and the middle of that run."""
    best = max(r["all_f1"] for r in rows)
    good = [r[key] for r in rows if r["all_f1"] >= best - 0.002]
    runs, cur = [], [good[0]]
    for t in good[1:]:
        if round(t - cur[-1], 2) <= 0.02:
            cur.append(t)
        else:
            runs.append(cur)
            cur = [t]
    runs.append(cur)
    widest = max(runs, key=len)
    return best, [widest[0], widest[-1]], round((widest[0] + widest[-1]) / 2, 2)


FLOOR_GRID = [round(x, 2) for x in np.arange(0.0, 0.62, 0.02)]


def _reuse_cases(corpus: Path, foreign: list[str], seeds: int) -> list[tuple[str, str, str, dict, bool]]:
    pairs = sorted(d for d in corpus.iterdir() if (d / "truth.json").is_file())
    cases = []
    for d in pairs:
        a = (d / "v1.txt").read_text(encoding="utf-8")
        st = parse_structure(Document.from_text(a))
        pool = _foreign([str(p / "v1.txt") for p in pairs if p != d] + foreign, st.language)
        if pool:
            sim = ngram_matrix(pool, [c.body(a) for c in st.clauses], st.language)
            pool = [t for t, m in zip(pool, sim.max(axis=1), strict=True) if m < 0.5]
        for seed in range(seeds if pool else 0):
            syn = make_pair(a, pool, seed, n_each=3, ops=("reuse",))
            cases.append((f"{d.name}#reuse{seed}", syn.a, syn.b, syn.truth, False))
    return cases


def run_floor(corpus: Path, foreign: list[str], seeds: int) -> dict:
    """Mean clause-alignment F1 per content floor (real pairs, synthetic edits, reused numbers)."""
    cfg0 = AlignConfig()
    groups = {"real": [], "synthetic": [], "reuse": []}
    cases = [(c, "real" if c[4] else "synthetic") for c in _cases(corpus, foreign, seeds)]
    cases += [(c, "reuse") for c in _reuse_cases(corpus, foreign, seeds)]
    table: dict[float, list[tuple[str, float]]] = {f: [] for f in FLOOR_GRID}
    for (name, a, b, truth, _real), group in cases:
        sa, sb = parse_structure(Document.from_text(a)), parse_structure(Document.from_text(b))
        content, _ = content_scores(a, sa, b, sb, cfg0)
        for f in FLOOR_GRID:
            al = align(a, sa, b, sb, AlignConfig(min_content=f), content=content)
            table[f].append((group, score(truth, sa.clauses, sb.clauses, al.pairs).alignment_f1))
        groups[group].append(name)
    rows = []
    for f in FLOOR_GRID:
        row = {"floor": f, "all_f1": float(np.mean([x[1] for x in table[f]])),
               "min_f1": float(np.min([x[1] for x in table[f]]))}
        for g in groups:
            row[f"{g}_f1"] = float(np.mean([x[1] for x in table[f] if x[0] == g]))
        rows.append(row)
    best, plateau, chosen = _plateau(rows, "floor")
    return {"threshold": cfg0.tau, "cases": {g: len(v) for g, v in groups.items()}, "grid": rows,
            "best_all_f1": best, "plateau": plateau, "chosen": chosen}


def _gap(truth: dict, A, B, S: np.ndarray) -> dict:
    """Lowest score of a true 1-1 pair vs highest best score of a truly unpaired clause (head clauses)."""
    def head(clauses, u):
        return next((k for k, c in enumerate(clauses) if c.start <= u["start"] < c.end), None)
    ua = {u.get("id") or u.get("label"): u for u in truth["units_v1"]}
    ub = {u.get("id") or u.get("label"): u for u in truth["units_v2"]}
    pos, neg = [], []
    for r in truth["alignment"]:
        old, new = r.get("old_id", r.get("old")), r.get("new_id", r.get("new"))
        i = head(A, ua[old]) if old else None
        j = head(B, ub[new]) if new else None
        if i is not None and j is not None:
            pos.append(float(S[i, j]))
        elif i is not None and S.shape[1]:
            neg.append(float(S[i].max()))
        elif j is not None and S.shape[0]:
            neg.append(float(S[:, j].max()))
    return {"min_true_pair": round(min(pos), 3) if pos else None, "max_unpaired_best": round(max(neg), 3) if neg else None}


def compare_paths(corpus: Path, seeds: int = 4) -> list[dict]:
    """n-gram path vs n-gram+MiniLM on heavier synthetic edits of the English pairs (4 deletions,
    insertions, word edits and rewordings each per variant), each path at its own measured threshold."""
    pairs = sorted(d for d in corpus.iterdir() if (d / "truth.json").is_file())
    out = []
    for share in (0.35, 0.5, 0.65):
        for semantic in (False, True):
            f = []
            for d in pairs:
                a = (d / "v1.txt").read_text(encoding="utf-8")
                st = parse_structure(Document.from_text(a))
                if st.language != "en":
                    continue
                pool = _foreign([str(p / "v1.txt") for p in pairs if p != d], "en")
                sim = ngram_matrix(pool, [c.body(a) for c in st.clauses], "en")
                pool = [t for t, m in zip(pool, sim.max(axis=1), strict=True) if m < 0.5]
                for seed in range(seeds):
                    syn = make_pair(a, pool, 100 + seed, n_each=4, ops=("delete", "insert", "edit", "reword"),
                                    edit_share=share)
                    sa, sb = parse_structure(Document.from_text(syn.a)), parse_structure(Document.from_text(syn.b))
                    al = align(syn.a, sa, syn.b, sb, AlignConfig(semantic=semantic))
                    s = score(syn.truth, sa.clauses, sb.clauses, al.pairs)
                    f.append((s.alignment_f1, s.changed_f1))
            arr = np.array(f)
            out.append({"edit_share": share, "semantic": semantic, "n": len(f),
                        "alignment_f1_mean": round(float(arr[:, 0].mean()), 4), "alignment_f1_min": round(float(arr[:, 0].min()), 4),
                        "changed_f1_mean": round(float(arr[:, 1].mean()), 4)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--foreign", nargs="*", default=[])
    ap.add_argument("--semantic", action="store_true")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--compare", action="store_true", help="compare the n-gram and MiniLM paths on heavier edits")
    ap.add_argument("--floor", action="store_true", help="measure the content floor (clauses reusing a number)")
    args = ap.parse_args()
    if args.floor:
        out = run_floor(args.corpus, args.foreign, args.seeds)
        for r in out["grid"]:
            print(f"floor={r['floor']:.2f} " + " ".join(f"{k}={v:.4f}" for k, v in r.items() if k != "floor"))
        print(json.dumps({k: v for k, v in out.items() if k != "grid"}))
        return
    if args.compare:
        for row in compare_paths(args.corpus):
            print(json.dumps(row))
        return
    out = run(args.corpus, args.foreign, args.semantic, args.seeds)
    for r in out["grid"]:
        print(f"t={r['threshold']:.2f} real={r['real_f1']:.4f} syn={r['synthetic_f1']:.4f} all={r['all_f1']:.4f} "
              f"min={r['min_f1']:.4f} changed={r['changed_f1']:.4f}")
    for name, g in out["gaps"]:
        print(f"gap {name}: {g}")
    print(json.dumps({k: v for k, v in out.items() if k not in {"grid", "gaps"}}))


if __name__ == "__main__":
    main()
