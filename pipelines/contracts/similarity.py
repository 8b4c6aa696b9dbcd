"""How alike two clauses are: character n-gram TF-IDF cosine and rapidfuzz ratio (the deterministic
path that always works), shingle containment (for split/merge), and optional MiniLM sentence
embeddings for English (all-MiniLM-L6-v2, the process's one model from `pipelines.text.retrieval`).

Normalisation for comparison: NFKC (full-width to half-width), case folded, whitespace collapsed.
Chinese is compared on character bigrams plus unigrams (MiniLM is English-only).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter

import numpy as np
from scipy import sparse

from pipelines.text.retrieval import minilm_encode, minilm_model


def normalise(s: str) -> str:
    """Comparison form: NFKC, case-folded, one space for any whitespace run."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", s)).strip().casefold()


def _grams(s: str, lang: str) -> list[str]:
    if lang == "zh":
        chars = [c for c in s if not c.isspace()]
        return chars + [a + b for a, b in zip(chars, chars[1:], strict=False)]
    s = f" {s} "
    return [s[i:i + 3] for i in range(max(len(s) - 2, 1))] + re.findall(r"\w+", s)


def ngram_matrix(a_texts: list[str], b_texts: list[str], lang: str) -> np.ndarray:
    """Cosine similarity of sublinear-TF x IDF character n-gram vectors, shape (len(a), len(b)).
    IDF is computed over the clauses of both versions, so boilerplate that every clause shares
    weighs little."""
    docs = [Counter(_grams(normalise(t), lang)) for t in a_texts + b_texts]
    vocab: dict[str, int] = {}
    df: Counter = Counter()
    for d in docs:
        df.update(d.keys())
    for g in sorted(df):
        vocab[g] = len(vocab)
    n = len(docs)
    idf = {g: math.log((1 + n) / (1 + c)) + 1.0 for g, c in df.items()}
    rows, cols, vals = [], [], []
    for i, d in enumerate(docs):
        for g, c in d.items():
            rows.append(i)
            cols.append(vocab[g])
            vals.append((1.0 + math.log(c)) * idf[g])
    m = sparse.csr_matrix((vals, (rows, cols)), shape=(n, max(len(vocab), 1)), dtype=np.float64)
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    m = sparse.diags(1.0 / norms) @ m
    a, b = m[: len(a_texts)], m[len(a_texts):]
    return np.asarray((a @ b.T).todense())


def ratio_matrix(a_texts: list[str], b_texts: list[str]) -> np.ndarray:
    """rapidfuzz normalised Indel similarity (0..1) of the normalised texts."""
    from rapidfuzz import fuzz, process

    a = [normalise(t) for t in a_texts]
    b = [normalise(t) for t in b_texts]
    if not a or not b:
        return np.zeros((len(a), len(b)))
    return process.cdist(a, b, scorer=fuzz.ratio, dtype=np.float32, workers=1).astype(np.float64) / 100.0


def shingles(text: str, lang: str) -> set[str]:
    """Word bigrams (English) or character bigrams (Chinese) of the normalised text."""
    t = normalise(text)
    if lang == "zh":
        chars = [c for c in t if not c.isspace()]
        return {a + b for a, b in zip(chars, chars[1:], strict=False)}
    words = re.findall(r"\w+", t)
    return {f"{a} {b}" for a, b in zip(words, words[1:], strict=False)} or set(words)


def containment(part: set[str], whole: set[str]) -> float:
    """Share of `part` found in `whole`."""
    return len(part & whole) / len(part) if part else 0.0


# ---------------------------------------------------------------------------------------------
# MiniLM (English only)

def embedding_matrix(a_texts: list[str], b_texts: list[str]) -> np.ndarray | None:
    """Cosine similarity of MiniLM embeddings, or None when the model cannot be loaded."""
    if minilm_model() is None or not a_texts or not b_texts:
        return None
    emb = minilm_encode([t[:2000] for t in a_texts + b_texts], batch_size=32)
    emb = np.asarray(emb, dtype=np.float64)
    return np.clip(emb[: len(a_texts)] @ emb[len(a_texts):].T, 0.0, 1.0)
