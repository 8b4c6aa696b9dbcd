"""Intervals: the bisection answers equal a scan over every range."""

from __future__ import annotations

import random

from pipelines.text.intervals import Intervals


def test_overlaps_and_covers_equal_a_scan():
    rng = random.Random(3)
    for _ in range(200):
        ranges = [(a, a + rng.randint(0, 9)) for a in (rng.randint(0, 100) for _ in range(rng.randint(0, 12)))]
        iv = Intervals(ranges)
        for _ in range(30):
            s = rng.randint(-5, 110)
            e = s + rng.randint(1, 12)  # an empty [s, s) overlaps nothing (documented)
            assert iv.overlaps(s, e) == any(a < e and s < b for a, b in ranges if b > a), (ranges, s, e)
            assert iv.covers(s) == any(a <= s < b for a, b in ranges), (ranges, s)


def test_add_keeps_only_ranges_that_overlap_none():
    iv = Intervals()
    assert iv.add(10, 20) and iv.add(0, 10) and iv.add(20, 25)  # touching is not overlapping
    assert not iv.add(5, 12) and not iv.add(24, 30) and not iv.add(3, 3)
    assert len(iv) == 3 and iv.covers(0) and iv.covers(24) and not iv.covers(25)


def test_discard_frees_exactly_the_range_held():
    iv = Intervals()
    iv.add(0, 5)
    iv.add(10, 20)
    assert not iv.discard(10, 19) and iv.discard(10, 20) and not iv.overlaps(12, 14) and iv.add(12, 14)
