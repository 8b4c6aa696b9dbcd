"""Assertion accuracy on tests/fixtures/medical/heldout/assertions.tsv: 40 realistic sentences
(25 English, 15 Chinese) written after the rules were built. First run, before any change:
35/40 (the 5 misses were entity spans: "Suspected urinary tract infection" swallowed its trigger,
"不除外胆总管结石" likewise, "colon cancer" found as "cancer"; assertion right on every entity found).
Those span bugs were then fixed, so the set is no longer strictly held out. A case counts as
correct when an entity overlapping the expected text carries the expected assertion."""

from __future__ import annotations

from pathlib import Path

from pipelines.medical.entities import extract
from pipelines.medical.sections import find_sections

CASES = Path(__file__).resolve().parents[1] / "fixtures" / "medical" / "heldout" / "assertions.tsv"


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
        ms = [m for m in extract(sentence, find_sections(sentence)) if m.start < end and start < m.end]
        if ms and ms[0].assertion == expected:
            ok += 1
        else:
            wrong.append((sentence, term, expected, [(m.text, m.assertion) for m in ms]))
    record_property("heldout_assertion_accuracy", round(ok / n, 4))
    print("held-out assertion accuracy", ok, "/", n, wrong)
    assert n == 40
    assert ok / n >= 0.9, wrong
