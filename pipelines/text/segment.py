"""Chinese word segmentation: runs of Han characters cut into words (jieba with its bundled
dictionary, dictionary-only mode, so the same text always gives the same words; nothing is
downloaded), each word as offsets into the text it was given."""

from __future__ import annotations

import logging
from functools import lru_cache

from pipelines.text.script import HAN_RUN_RE


@lru_cache(maxsize=1)
def _jieba():
    import jieba

    jieba.setLogLevel(logging.WARNING)
    tok = jieba.Tokenizer()
    tok.initialize()
    return tok


def han_words(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """(start, end) of every word of the Han runs in text[start:end], in order; other characters
    (Latin, digits, punctuation, space) are not covered."""
    end = len(text) if end is None else end
    out: list[tuple[int, int]] = []
    for m in HAN_RUN_RE.finditer(text, start, end):
        run = m.group(0)
        if len(run) == 1:
            out.append((m.start(), m.end()))
            continue
        for _w, s, e in _jieba().tokenize(run, HMM=False):
            out.append((m.start() + s, m.start() + e))
    return out
