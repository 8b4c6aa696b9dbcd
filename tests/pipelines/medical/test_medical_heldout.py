"""Assertion accuracy on tests/fixtures/medical/heldout/assertions.tsv: 40 realistic sentences
(25 English, 15 Chinese) written after the rules were built. First run, before any change:
35/40 (the 5 misses were entity spans: "Suspected urinary tract infection" swallowed its trigger,
"不除外胆总管结石" likewise, "colon cancer" found as "cancer"; assertion right on every entity found).
Those span bugs were then fixed, so the set is no longer strictly held out. A case counts as
correct when an entity overlapping the expected text carries the expected assertion."""

from __future__ import annotations

from pathlib import Path

from pipelines.documents import Document
from pipelines.medical.entities import extract
from pipelines.medical.sections import find_sections

CASES = Path(__file__).resolve().parents[2] / "fixtures" / "medical" / "heldout" / "assertions.tsv"


def _cases():
    for line in CASES.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            yield line.split("\t")


def test_heldout_assertion_accuracy(record_property):
    ok = n = 0
    wrong = []
    for sentence, term, expected in _cases():
        n += 1
        start = sentence.index(term)
        end = start + len(term)
        ms = [m for m in extract(Document.from_text(sentence), find_sections(Document.from_text(sentence))) if m.start < end and start < m.end]
        if ms and ms[0].assertion == expected:
            ok += 1
        else:
            wrong.append((sentence, term, expected, [(m.text, m.assertion) for m in ms]))
    record_property("heldout_assertion_accuracy", round(ok / n, 4))
    print("held-out assertion accuracy", ok, "/", n, wrong)
    assert n == 40
    assert ok / n >= 0.9, wrong


TIMES = CASES.parent / "times.tsv"


def test_heldout_time_normalisation(record_property):
    """20 time expressions (12 English, 8 Chinese) written after the rules were built; first run: 20/20."""
    from datetime import date

    from pipelines.medical.timex import find_times, normalize

    ok = n = 0
    wrong = []
    for line in TIMES.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        text, expr, start, anchored = line.split("\t")
        n += 1
        hits = [t for t in find_times(Document.from_text(text)) if t.text == expr]
        tv = normalize(hits[0], date(2024, 7, 15), {"admission": date(2024, 7, 12), "surgery": date(2024, 7, 13)}) if hits else None
        if tv is not None and (tv.start, tv.anchored_to) == (start, anchored):
            ok += 1
        else:
            wrong.append((expr, tv))
    record_property("heldout_time_accuracy", round(ok / n, 4))
    print("held-out time normalisation", ok, "/", n, wrong)
    assert n == 20 and ok / n >= 0.9, wrong
