"""Disjoint character ranges with logarithmic lookups: `Intervals` answers "does [s, e) overlap a
range already taken?" and "is offset p inside one?" by bisection, where a scan over every range
made a document's extraction quadratic (a 490,000-character note of dates and lab values took
minutes: each new mention was compared with all those before it)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable


class Intervals:
    """Half-open ranges [start, end) that do not overlap each other (`add` keeps only a range that
    overlaps none already held), kept sorted by start."""

    def __init__(self, ranges: Iterable[tuple[int, int]] = ()) -> None:
        """Start with `ranges`, which may overlap: their union is held (what `overlaps` and `covers`
        answer for is the same)."""
        self._starts: list[int] = []
        self._ends: list[int] = []
        for s, e in sorted(r for r in ranges if r[1] > r[0]):
            if self._ends and s <= self._ends[-1]:
                self._ends[-1] = max(self._ends[-1], e)
            else:
                self._starts.append(s)
                self._ends.append(e)

    def __len__(self) -> int:
        return len(self._starts)

    def overlaps(self, s: int, e: int) -> bool:
        """Whether [s, e) overlaps a held range (an empty [s, s) overlaps none)."""
        if e <= s:
            return False
        i = bisect.bisect_left(self._starts, e)  # ranges starting before e
        return i > 0 and self._ends[i - 1] > s

    def covers(self, p: int) -> bool:
        """Whether offset p lies inside a held range."""
        i = bisect.bisect_right(self._starts, p)
        return i > 0 and self._ends[i - 1] > p

    def add(self, s: int, e: int) -> bool:
        """Hold [s, e) unless it is empty or overlaps a held range; whether it was added."""
        if e <= s or self.overlaps(s, e):
            return False
        i = bisect.bisect_left(self._starts, s)
        self._starts.insert(i, s)
        self._ends.insert(i, e)
        return True

    def discard(self, s: int, e: int) -> bool:
        """Let go of the held range [s, e) (exactly that range); whether it was held."""
        i = bisect.bisect_left(self._starts, s)
        if i < len(self._starts) and self._starts[i] == s and self._ends[i] == e:
            del self._starts[i], self._ends[i]
            return True
        return False
