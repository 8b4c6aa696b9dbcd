"""A document as token ids for the fallback: the characters of every token (when a tokenizer gave
them), the token indices where paragraphs and sentences start, snapping a cut to those starts, and
chunking on them. Paragraphs start after a blank line; sentences after . ! ? (with closing quotes
or brackets) followed by white space, after 。！？； and at every line break.
"""

from __future__ import annotations

import bisect
import re

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
