"""Writing systems of a text: the CJK character classes, whether a text contains them and how much
of it they make up.

Character classes are regex class bodies (the text between `[` and `]`), so they can be used on
their own (`HAN_RE`) or inside larger patterns (`rf"[A-Z{HAN}]"`). There are four because callers
ask four different questions:

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
- `CJK_WIDE` — characters typeset without spaces between them: CJK symbols and punctuation through
  the unified block (U+3000–U+9FFF: 。、「」, kana, bopomofo, Hangul compatibility jamo, Extension A,
  unified), the compatibility ideographs, the half- and full-width forms (U+FF00–U+FFEF) and the
  supplementary ideographic plane (U+20000–U+2FFFF). PDF ingest joins two such characters without a
  space.

Language (`detect_language`) is "zh" or "en" by one rule: the share of Han characters in the text
(`cjk_share(text, HAN, basis)`) above a threshold. Callers differ in what the share is taken of
(`basis`) and where the threshold lies, because they read different texts:

- "latin": Han / (Han + ASCII letters) — patent claims (≥ 0.25: Chinese claims keep Latin
  reference signs and formula names);
- "letters": Han / all letters (`str.isalpha`, which counts Han too) — contracts (> 0.3);
- "text": Han / all characters of the stripped text (at least 1) — clinical notes (> 0.1: notes
  are full of digits, units and punctuation).

`to_halfwidth` maps full-width ASCII (Ｓｅｃｔｉｏｎ １２) and the ideographic space to their
half-width forms one character for one, so offsets into the text stay valid.
"""

from __future__ import annotations

import re
from functools import lru_cache

HAN = "\u4e00-\u9fff"
HAN_EXT = "\u3400-\u9fff"
CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
CJK_WIDE = "\u3000-\u9fff\uf900-\ufaff\uff00-\uffef\U00020000-\U0002ffff"

HAN_RE = re.compile(f"[{HAN}]")
HAN_RUN_RE = re.compile(f"[{HAN}]+")
CJK_RE = re.compile(f"[{CJK}]")
CJK_WIDE_RE = re.compile(f"[{CJK_WIDE}]")
_LATIN_RE = re.compile(r"[A-Za-z]")


@lru_cache(maxsize=16)
def _class_re(chars: str) -> re.Pattern[str]:
    return re.compile(f"[{chars}]")


def is_han(ch: str) -> bool:
    """Whether the single character `ch` is in `HAN` (CJK Unified Ideographs)."""
    return HAN_RE.match(ch) is not None


def is_cjk_wide(ch: str) -> bool:
    """Whether the single character `ch` is in `CJK_WIDE` (set without spaces around it)."""
    return CJK_WIDE_RE.match(ch) is not None


def has_cjk(text: str, chars: str = HAN) -> bool:
    """Whether `text` contains at least one character of the class `chars` (default `HAN`)."""
    return _class_re(chars).search(text) is not None


def count_cjk(text: str, chars: str = HAN) -> int:
    """Number of characters of `text` in the class `chars` (default `HAN`)."""
    return len(_class_re(chars).findall(text))


def cjk_share(text: str, chars: str = CJK, basis: str = "latin") -> float:
    """Share of the characters of class `chars` (default `CJK`) in `text`, taken of (`basis`):
    "latin" — those characters plus the ASCII letters (digits, punctuation and spaces do not
    count); "letters" — every letter (`str.isalpha`, which counts Han too); "text" — every
    character of `text.strip()` (at least 1). 0 when the basis is empty."""
    n = count_cjk(text, chars)
    if basis == "latin":
        total = n + len(_LATIN_RE.findall(text))
    elif basis == "letters":
        total = sum(1 for c in text if c.isalpha())
    elif basis == "text":
        total = max(1, len(text.strip()))
    else:
        raise ValueError(f"unknown basis {basis!r} (use latin, letters or text)")
    return n / total if total else 0.0


def detect_language(text: str, threshold: float, basis: str, *, inclusive: bool = False) -> str:
    """ "zh" when the share of `HAN` characters (`cjk_share(text, HAN, basis)`) is above
    `threshold` (or equal to it with `inclusive`), else "en". See the module docstring for the
    bases and each caller's threshold."""
    share = cjk_share(text, HAN, basis)
    return "zh" if (share >= threshold if inclusive else share > threshold) else "en"


def to_halfwidth(text: str) -> str:
    """Full-width ASCII (U+FF01–U+FF5E) to ASCII and the ideographic space to a space; every other
    character unchanged, so the result has the same length as `text`."""
    return "".join(
        chr(ord(c) - 0xFEE0) if 0xFF01 <= ord(c) <= 0xFF5E else (" " if c == "\u3000" else c) for c in text
    )
