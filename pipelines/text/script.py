"""Writing systems of a text: the CJK character classes, whether a text contains them and how much
of it they make up.

Character classes are regex class bodies (the text between `[` and `]`), so they can be used on
their own (`HAN_RE`) or inside larger patterns (`rf"[A-Z{HAN}]"`). There are three because callers
ask three different questions:

- `HAN` — CJK Unified Ideographs, U+4E00–U+9FFF: the common Chinese characters (all of GB2312
  and almost all of GBK's Han characters). The pipelines use it to decide "is this Chinese text"
  and to cut Chinese into characters; punctuation such as 。，、 is not in it.
- `HAN_EXT` — U+3400–U+9FFF: Extension A (rare characters, U+3400–U+4DBF), the Yijing hexagram
  symbols (U+4DC0–U+4DFF) and the unified block, as one contiguous range. The reports pipeline
  reads PDF text, where rare characters do occur in titles and captions.
- `CJK` — every East Asian script counted as "CJK" when measuring how much of a text is not
  Latin: hiragana and katakana (U+3040–U+30FF), Extension A, the unified block, the
  compatibility ideographs (U+F900–U+FAFF) and Hangul syllables (U+AC00–U+D7AF). Used to decide
  whether a text is mostly CJK (retrieval: BM25 over character bigrams instead of an English
  embedder) and for key-entity patterns.
"""

from __future__ import annotations

import re

HAN = "\u4e00-\u9fff"
HAN_EXT = "\u3400-\u9fff"
CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"

HAN_RE = re.compile(f"[{HAN}]")
HAN_RUN_RE = re.compile(f"[{HAN}]+")
CJK_RE = re.compile(f"[{CJK}]")
_LATIN_RE = re.compile(r"[A-Za-z]")


def is_han(ch: str) -> bool:
    """Whether the single character `ch` is in `HAN` (CJK Unified Ideographs)."""
    return "\u4e00" <= ch <= "\u9fff"


def has_cjk(text: str, chars: str = HAN) -> bool:
    """Whether `text` contains at least one character of the class `chars` (default `HAN`)."""
    pattern = HAN_RE if chars == HAN else CJK_RE if chars == CJK else re.compile(f"[{chars}]")
    return pattern.search(text) is not None


def count_cjk(text: str, chars: str = HAN) -> int:
    """Number of characters of `text` in the class `chars` (default `HAN`)."""
    pattern = HAN_RE if chars == HAN else CJK_RE if chars == CJK else re.compile(f"[{chars}]")
    return len(pattern.findall(text))


def cjk_share(text: str) -> float:
    """Share of `CJK` characters among the CJK and Latin (A-Z, a-z) letters of `text`; 0 when it
    has neither. Digits, punctuation and spaces do not count."""
    cjk = len(CJK_RE.findall(text))
    latin = len(_LATIN_RE.findall(text))
    return cjk / (cjk + latin) if cjk + latin else 0.0
