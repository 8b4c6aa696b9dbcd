"""Clause alignment: a global optimal assignment of A's clauses to B's, then split/merge, moves and
renumbering.

Score of a pair (i, j) (all terms in 0..1):
    lexical   = 0.5 * char n-gram TF-IDF cosine + 0.5 * rapidfuzz ratio        (always)
    semantic  = MiniLM cosine, blended in as (1 - w) * lexical + w * semantic  (English, optional)
    score     = content + w_anchor * anchor agreement (same anchor, heading or defined term)
                        + w_context * mean content score of the neighbouring pairs (i-1, j-1), (i+1, j+1)
The assignment maximises the sum of (score - threshold) over matched pairs with
scipy.optimize.linear_sum_assignment, so a pair below the threshold is never forced: those clauses
are added or deleted. A pair whose content score alone is below `min_content` is never matched
either: a clause whose number and neighbours survive but whose text is new is deleted + added, not
modified (the anchor and context terms may tip a close call, not make one). The threshold was measured on the development corpus (see
`benchmarks/eval/contracts_calibrate.py` and BENCHMARKS.md), not guessed.

After the assignment: a clause of A whose text is covered by two or more clauses of B (its partner
and unmatched ones) is `split`, the converse `merged`; pairs outside the longest (length-weighted)
increasing subsequence of B positions are `moved`; numbered clauses whose number changed are
`renumbered`; a moved or renumbered clause that was also edited stays one event with `edited` set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linear_sum_assignment

from pipelines.contracts.redline import same_tokens
from pipelines.contracts.similarity import (
    containment,
    embedding_matrix,
    ngram_matrix,
    normalise,
    ratio_matrix,
    shingles,
)
from pipelines.contracts.structure import Clause, Structure
from pipelines.text.retrieval import minilm_model

NUMBERED_KINDS = {"numbered", "schedule", "paragraph"}


# Measured with `python -m benchmarks.eval.contracts_calibrate` on the 4 corpus pairs plus 12 synthetic
# alterations of them (see BENCHMARKS.md, "Contracts"): the middle of the plateau of best F1.
THRESHOLD_NGRAM = 0.47  # plateau 0.34-0.60
THRESHOLD_SEMANTIC = 0.48  # plateau 0.36-0.60
# Measured with `python -m benchmarks.eval.contracts_calibrate CORPUS --floor`: the same cases plus
# variants whose clauses keep their number under new text (see BENCHMARKS.md, "Contracts").
MIN_CONTENT = 0.37  # plateau 0.32-0.42 (F1 1.000 at 0.40 only: true pairs with 50 % of words edited reach down to ~0.41)


@dataclass(frozen=True)
class AlignConfig:
    """Weights and threshold of the alignment score (threshold measured: see benchmarks/eval/contracts_calibrate.py)."""

    threshold: float | None = None  # None: the measured default for the path in use (below)
    w_anchor: float = 0.10
    w_context: float = 0.10
    semantic: bool = False  # blend MiniLM into the content score (English only)
    w_semantic: float = 0.5
    certain: float = 0.9  # a clause whose best lexical score reaches this is not embedded
    split_containment: float = 0.75  # share of a fragment's shingles found in the whole
    split_coverage: float = 0.80  # share of the whole covered by all its fragments together
    min_content: float = MIN_CONTENT  # content score below which a pair is never matched (measured)

    @property
    def tau(self) -> float:
        if self.threshold is not None:
            return self.threshold
        return THRESHOLD_SEMANTIC if self.semantic else THRESHOLD_NGRAM


@dataclass
class Pair:
    a: int | None
    b: int | None
    score: float = 0.0
    change: str = ""
    edited: bool = False
    renumbered: bool = False
    moved: bool = False
    group: str | None = None


@dataclass
class Alignment:
    pairs: list[Pair]
    content: np.ndarray  # content score matrix (for calibration and inspection)
    semantic_used: bool = False
    notes: list[str] = field(default_factory=list)


def _anchor_agreement(A: list[Clause], B: list[Clause]) -> np.ndarray:
    def keys(c: Clause) -> set[str]:
        k = {"a:" + c.anchor.split("~")[0]}
        if c.heading:
            k.add("h:" + normalise(c.heading))
        if c.defines:
            k.add("t:" + c.defines[0])
        return k

    ka = [keys(c) for c in A]
    kb = [keys(c) for c in B]
    index: dict[str, list[int]] = {}
    for j, k in enumerate(kb):
        for x in k:
            index.setdefault(x, []).append(j)
    m = np.zeros((len(A), len(B)))
    for i, k in enumerate(ka):
        for x in k:
            for j in index.get(x, ()):
                m[i, j] = 1.0
    return m


def content_scores(text_a: str, sa: Structure, text_b: str, sb: Structure, cfg: AlignConfig) -> tuple[np.ndarray, bool]:
    """The content similarity matrix (lexical, optionally blended with MiniLM) and whether MiniLM was used."""
    A, B = sa.clauses, sb.clauses
    lang = "zh" if "zh" in (sa.language, sb.language) else "en"
    bodies_a = [c.body(text_a) for c in A]
    bodies_b = [c.body(text_b) for c in B]
    if not A or not B:
        return np.zeros((len(A), len(B))), False
    lex = 0.5 * ngram_matrix(bodies_a, bodies_b, lang) + 0.5 * ratio_matrix(bodies_a, bodies_b)
    na = [normalise(t) for t in bodies_a]
    nb = [normalise(t) for t in bodies_b]
    where_b: dict[str, list[int]] = {}
    for j, t in enumerate(nb):
        where_b.setdefault(t, []).append(j)
    for i, t in enumerate(na):
        for j in where_b.get(t, ()):
            lex[i, j] = 1.0
    used = False
    if cfg.semantic and lang == "en":
        # only clauses without a near-identical counterpart are uncertain; only they are embedded
        rows = np.where(lex.max(axis=1) < cfg.certain)[0]
        cols = np.where(lex.max(axis=0) < cfg.certain)[0]
        if len(rows) and len(cols):
            sem = embedding_matrix([bodies_a[i] for i in rows], [bodies_b[j] for j in cols])
            if sem is not None:
                sub = lex[np.ix_(rows, cols)]
                lex[np.ix_(rows, cols)] = (1 - cfg.w_semantic) * sub + cfg.w_semantic * sem
                used = True
        elif minilm_model() is not None:
            used = True  # nothing uncertain: the blend would change nothing
    return np.clip(lex, 0.0, 1.0), used


def score_matrix(content: np.ndarray, A: list[Clause], B: list[Clause], cfg: AlignConfig) -> np.ndarray:
    n, m = content.shape
    s = content + cfg.w_anchor * _anchor_agreement(A, B)
    if n and m and cfg.w_context:
        pad = np.zeros((n + 2, m + 2))
        pad[1:-1, 1:-1] = content
        ctx = 0.5 * (pad[:-2, :-2] + pad[2:, 2:])
        s = s + cfg.w_context * ctx
    return s


def align(text_a: str, sa: Structure, text_b: str, sb: Structure, cfg: AlignConfig | None = None,
          content: np.ndarray | None = None) -> Alignment:
    """Align the clauses of two versions. `content` may be passed in to reuse a computed matrix."""
    cfg = cfg or AlignConfig()
    A, B = sa.clauses, sb.clauses
    used = False
    if content is None:
        content, used = content_scores(text_a, sa, text_b, sb, cfg)
    S = score_matrix(content, A, B, cfg)
    match_a: dict[int, int] = {}
    if len(A) and len(B):
        gain = np.maximum(S - cfg.tau, 0.0)
        gain[content < cfg.min_content] = 0.0
        rows, cols = linear_sum_assignment(-gain)
        for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
            if gain[i, j] > 0:
                match_a[i] = j
    match_b = {j: i for i, j in match_a.items()}
    lang = "zh" if "zh" in (sa.language, sb.language) else "en"

    # split / merge: fragments of one clause found in several clauses of the other version
    groups_a: dict[int, list[int]] = {}  # A clause -> B clauses (split)
    groups_b: dict[int, list[int]] = {}  # B clause -> A clauses (merged)
    sh_a = [shingles(c.body(text_a), lang) for c in A]
    sh_b = [shingles(c.body(text_b), lang) for c in B]
    _fragments(A, B, sh_a, sh_b, match_a, match_b, cfg, groups_a)
    _fragments(B, A, sh_b, sh_a, match_b, match_a, cfg, groups_b)

    pairs: list[Pair] = []
    grouped_b: set[int] = set()
    grouped_a: set[int] = set()
    for i, js in groups_a.items():
        for j in js:
            pairs.append(Pair(i, j, float(S[i, j]), "split", group=f"split:{A[i].anchor}"))
            grouped_b.add(j)
        grouped_a.add(i)
    for j, is_ in groups_b.items():
        if j in grouped_b:
            continue
        for i in is_:
            if i in grouped_a:
                continue
            pairs.append(Pair(i, j, float(S[i, j]), "merged", group=f"merged:{B[j].anchor}"))
            grouped_a.add(i)
        grouped_b.add(j)
    for i, j in match_a.items():
        if i not in grouped_a and j not in grouped_b:
            pairs.append(Pair(i, j, float(S[i, j])))
    matched_a = {p.a for p in pairs}
    matched_b = {p.b for p in pairs}
    for i in range(len(A)):
        if i not in matched_a:
            best = float(S[i].max()) if len(B) else 0.0
            pairs.append(Pair(i, None, best, "deleted"))
    for j in range(len(B)):
        if j not in matched_b:
            best = float(S[:, j].max()) if len(A) else 0.0
            pairs.append(Pair(None, j, best, "added"))

    _classify(pairs, A, B, text_a, text_b, lang)
    pairs.sort(key=_order_key(pairs))
    return Alignment(pairs, content, used)


def _fragments(X: list[Clause], Y: list[Clause], sh_x: list[set], sh_y: list[set], match_x: dict[int, int],
               match_y: dict[int, int], cfg: AlignConfig, out: dict[int, list[int]]) -> None:
    """For each clause x of X, the clauses of Y (its partner and unmatched ones) that are fragments of it,
    when together they cover x. Writes x -> [y, ...] into `out`."""
    unmatched_y = [j for j in range(len(Y)) if j not in match_y]
    if not unmatched_y:
        return
    for x in range(len(X)):
        if len(sh_x[x]) < 6:
            continue
        cands = [j for j in unmatched_y if len(sh_y[j]) >= 3 and containment(sh_y[j], sh_x[x]) >= cfg.split_containment]
        if not cands:
            continue
        parts = sorted(set(cands) | ({match_x[x]} if x in match_x else set()))
        if len(parts) < 2:
            continue
        if x in match_x and containment(sh_y[match_x[x]], sh_x[x]) < cfg.split_containment:
            parts = [j for j in parts if j != match_x[x]]
            if len(parts) < 2:
                continue
        union = set().union(*(sh_y[j] for j in parts))
        partner_cov = containment(sh_x[x], sh_y[match_x[x]]) if x in match_x else 0.0
        if containment(sh_x[x], union) >= cfg.split_coverage and containment(sh_x[x], union) > partner_cov + 0.1:
            # every part must lie close to the others in Y (a split stays in one place)
            if max(parts) - min(parts) <= 2 * len(parts):
                out[x] = parts
                unmatched_y = [j for j in unmatched_y if j not in parts]


def _classify(pairs: list[Pair], A: list[Clause], B: list[Clause], text_a: str, text_b: str, lang: str) -> None:
    """Set edited / renumbered / moved and the change type of each pair."""
    for p in pairs:
        if p.a is None or p.b is None:
            continue
        ca, cb = A[p.a], B[p.b]
        la = (ca.label_start, ca.label_end) if ca.label_start is not None else None
        lb = (cb.label_start, cb.label_end) if cb.label_start is not None else None
        p.edited = not same_tokens(text_a, (ca.start, ca.end, la), text_b, (cb.start, cb.end, lb), lang)
        if ca.kind in NUMBERED_KINDS and cb.kind in NUMBERED_KINDS:
            p.renumbered = ca.anchor.split("~")[0] != cb.anchor.split("~")[0]
    # moves: pairs outside the longest increasing subsequence of B positions (weighted by length)
    one_to_one = sorted((p for p in pairs if p.a is not None and p.b is not None), key=lambda p: (p.a, p.b))
    keep = _weighted_lis([p.b for p in one_to_one], [max(A[p.a].end - A[p.a].start, 1) for p in one_to_one])
    for k, p in enumerate(one_to_one):
        if k not in keep and not p.change:
            p.moved = True
    _move_groups(one_to_one)
    for p in pairs:
        if p.change:
            continue
        if p.moved:
            p.change = "moved"
        elif p.renumbered:
            p.change = "renumbered"
        elif p.edited:
            p.change = "modified"
        else:
            p.change = "unchanged"
    for p in pairs:
        if p.change in {"split", "merged"}:
            p.edited = True


def _weighted_lis(seq: list[int], weights: list[int]) -> set[int]:
    """Indexes of a maximum-weight strictly increasing subsequence (O(n^2), n = matched pairs)."""
    n = len(seq)
    if not n:
        return set()
    best = list(weights)
    prev = [-1] * n
    for k in range(n):
        for q in range(k):
            if seq[q] < seq[k] and best[q] + weights[k] > best[k]:
                best[k] = best[q] + weights[k]
                prev[k] = q
    k = max(range(n), key=lambda x: (best[x], -x))
    out = set()
    while k != -1:
        out.add(k)
        k = prev[k]
    return out


def _move_groups(one_to_one: list[Pair]) -> None:
    """Consecutive moved pairs that stay together in both versions form one move group."""
    g = 0
    prev: Pair | None = None
    for p in one_to_one:
        if not p.moved:
            prev = None
            continue
        if prev is not None and p.a == prev.a + 1 and p.b == prev.b + 1:
            p.group = prev.group
        else:
            g += 1
            p.group = f"move:{g}"
        prev = p


def _order_key(pairs: list[Pair]):
    """Rows in B's order; a deleted clause right after the row of its nearest preceding A clause."""
    b_of_a = {p.a: p.b for p in pairs if p.a is not None and p.b is not None}

    def key(p: Pair) -> tuple:
        if p.b is not None:
            return (p.b, 0, p.a if p.a is not None else -1)
        anchor_b = -1
        for i in range(p.a - 1, -1, -1):
            if i in b_of_a:
                anchor_b = b_of_a[i]
                break
        return (anchor_b, 1, p.a)

    return key
