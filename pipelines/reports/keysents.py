"""Key sentences of a report's sections, without a model: which passages may be quoted as a key
sentence (`key_candidates`), their centrality (`lexrank`), and the fusion with the model's attention
(`fuse`) that `pipelines.reports.llm_steps` uses for the deep summary.

A candidate is one of the evidence passages (`pipelines.llm.evidence.candidate_spans`: sentences,
wrapped lines joined) inside the section, a leading heading line cut off, that reads as prose: at
least 6 Latin words or 15 CJK characters, at most 700 characters, letters for at least 60% of its
visible characters (a table row or an equation is not a key sentence), opening as a sentence does
(a capital, a CJK character, a quote or a bracket, after a sentence end, a blank line or a heading:
not the tail of a sentence cut by a page break, a formula or a line break),
not ending in a colon (a lead-in), not a caption, not inside a figure's or table's caption. Centrality is continuous LexRank (Erkan & Radev 2004) over TF-IDF
vectors of content terms (Latin words outside a stop list, CJK character bigrams), damping 0.85.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from pipelines.documents import Document

MIN_WORDS = 6
MIN_CJK = 15
MAX_CHARS = 700
MIN_LETTERS = 0.6
DAMPING = 0.85

_LATIN = re.compile(r"[A-Za-z][A-Za-z'-]+")
_CJK = re.compile(r"[\u3400-\u9fff]")
_LETTER = re.compile(r"[A-Za-z\u3400-\u9fff]")
_CAPTION = re.compile(r"^\s*(?:(?:Figure|Fig\.|Table|Tab\.|Exhibit|Chart)\s*[\dA-Z][\w.\-]*[.:]\s|"
                      r"(?:图|表|附图|附表)\s*[\d一二三四五六七八九十][\d\-.－\u00ad]*\s)", re.IGNORECASE)
_OPENS = re.compile(r"[A-Z\u3400-\u9fff\"“‘(（「]")  # how a sentence opens
_SENT_END = re.compile(r"[.!?。！？:：;；]['\"”’)）]?\s*$")
_STOP = frozenset("""a an the and or of to in on at by for with from into onto over under is are was were be been being
this that these those it its their there here which who whom whose what when where how as than then such can could
may might will would shall should must do does did has have had not no nor but also both each all any some more most
other we our us they them he she his her i you your one two three figure table section et al""".split())


def _prose(text: str) -> bool:
    visible = re.sub(r"\s", "", text)
    if not visible or len(text) > MAX_CHARS or _CAPTION.match(text):
        return False
    if not _OPENS.match(text) or text.rstrip().endswith((":", "：")):
        return False  # a fragment (a sentence cut by a page or a formula) or a lead-in to a list or formula
    if len(_LETTER.findall(visible)) < MIN_LETTERS * len(visible):
        return False
    return len(_LATIN.findall(text)) >= MIN_WORDS or len(_CJK.findall(text)) >= MIN_CJK


def _drop_heading(text: str, a: int, b: int, exclude: Sequence[tuple[int, int]], label_line) -> int:
    """The start after the passage's leading label lines (a heading the passage cutter joined to
    what it introduces, by its own test, or a line that overlaps an excluded range: a heading or
    caption the report parser found), as long as more lines follow."""
    while (nl := text.find("\n", a, b)) >= 0:
        first = text[a:nl].strip()
        if not (label_line(first) or any(x < nl and a < y for x, y in exclude)):
            break
        a = nl + 1
        while a < b and text[a].isspace():
            a += 1
    return a


_ENDS = tuple(".!?。！？;；:：)）\"”’")


def _starts_sentence(text: str, a: int, lo: int) -> bool:
    """Whether text[a:] starts a sentence: the section starts there, or a sentence end, a blank line
    or a line that is not prose comes before it (under 40 characters: a heading, a label; under 80
    after a blank line; mostly digits or symbols: a table row, a formula);
    otherwise it is the tail of a sentence wrapped across lines (at a page or column break, a
    formula, or a CJK line break that the passage cutter did not join)."""
    before = text[lo:a].rstrip()
    if not before or before.endswith(_ENDS):
        return True
    gap = text[lo + len(before):a]
    if "\n" not in gap:
        return False
    if re.search(r"\n[^\S\n]*\n", gap):
        return True
    nl = before.rfind("\n")
    line = before[nl + 1:].strip()
    above = before[:nl].rstrip(" \t") if nl >= 0 else ""
    if len(line) < 40 or (len(line) < 80 and (nl < 0 or not above or above.endswith("\n"))):
        return True
    visible = re.sub(r"\s", "", line)
    return len(_LETTER.findall(visible)) < MIN_LETTERS * len(visible)  # after a table row or a formula


def key_candidates(doc: Document, start: int, end: int, exclude: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    """(start, end) of the passages in doc.text[start:end] that may be quoted as key sentences (see
    the module docstring); `exclude`: ranges a candidate must not overlap (captions, headings)."""
    from pipelines.llm.evidence import candidate_spans, label_line

    out = []
    for a, b in candidate_spans(doc, [(start, end)]):
        a = _drop_heading(doc.text, a, b, exclude, label_line)
        if a >= b or any(x < b and a < y for x, y in exclude):
            continue
        if _prose(doc.text[a:b]) and _starts_sentence(doc.text, a, start):
            out.append((a, b))
    return out


def terms(text: str) -> list[str]:
    """Content terms: lower-cased Latin words outside the stop list (a trailing plural 's' cut) and
    CJK character bigrams."""
    words = [w.lower().strip("'-") for w in _LATIN.findall(text)]
    out = [w[:-1] if len(w) > 4 and w.endswith("s") and not w.endswith("ss") else w
           for w in words if len(w) > 2 and w not in _STOP]
    for run in re.findall(r"[\u3400-\u9fff]+", text):
        out += [run[i:i + 2] for i in range(len(run) - 1)] or [run]
    return out


def idf_of(texts: Sequence[str]) -> dict[str, float]:
    """Smoothed inverse document frequency of each term over `texts` (each text one document)."""
    df = Counter(t for x in texts for t in set(terms(x)))
    n = len(texts)
    return {t: math.log((1 + n) / (1 + k)) + 1.0 for t, k in df.items()}


def lexrank(texts: Sequence[str], idf: dict[str, float] | None = None) -> list[float]:
    """Continuous LexRank of each text among `texts` (the stationary distribution of the
    cosine-similarity graph with damping `DAMPING`; sums to 1). One text: [1.0]."""
    n = len(texts)
    if n <= 1:
        return [1.0] * n
    idf = idf_of(texts) if idf is None else idf
    vocab: dict[str, int] = {}
    rows = []
    for x in texts:
        tf = Counter(terms(x))
        rows.append({vocab.setdefault(t, len(vocab)): c * idf.get(t, 1.0) for t, c in tf.items()})
    m = np.zeros((n, max(1, len(vocab))))
    for i, r in enumerate(rows):
        for j, v in r.items():
            m[i, j] = v
    norms = np.linalg.norm(m, axis=1)
    norms[norms == 0] = 1.0
    m /= norms[:, None]
    sim = m @ m.T
    np.fill_diagonal(sim, 0.0)
    sums = sim.sum(axis=1)
    p_rows = np.where(sums[:, None] > 0, sim / np.where(sums > 0, sums, 1.0)[:, None], 1.0 / n)
    p = np.full(n, 1.0 / n)
    for _ in range(100):
        nxt = (1 - DAMPING) / n + DAMPING * (p_rows.T @ p)
        if np.abs(nxt - p).sum() < 1e-10:
            p = nxt
            break
        p = nxt
    return [float(v) for v in p / p.sum()]


def _z(values: Sequence[float]) -> list[float]:
    if len(values) < 2:
        return [0.0] * len(values)
    mu = sum(values) / len(values)
    sd = math.sqrt(sum((v - mu) ** 2 for v in values) / len(values))
    return [0.0 if sd < 1e-12 else (v - mu) / sd for v in values]


def fuse(centrality: Sequence[float], attention: Sequence[float] | None) -> list[float]:
    """The key-sentence score of each candidate: the mean of the z-scored logs of its centrality and
    attention ratios (1.0: the uniform share); centrality alone when attention is None. Equal
    weights: there is no truth for summaries to fit them on (BENCHMARKS.md measures the choice
    against each report's own abstract)."""
    zc = _z([math.log(max(c, 1e-6)) for c in centrality])
    if attention is None:
        return zc
    za = _z([math.log(max(a, 1e-6)) for a in attention])
    return [(c + a) / 2 for c, a in zip(zc, za, strict=True)]


def how_many(n_candidates: int) -> int:
    """Key sentences to quote for a section with this many candidates: 2, one more per 12, at most 4."""
    return min(n_candidates, 4, 2 + n_candidates // 12)
