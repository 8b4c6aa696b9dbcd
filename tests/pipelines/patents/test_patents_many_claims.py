"""Claim sets past claim 999 (issue 47: the reader stopped at 999 and reported "Claim 999 refers to
itself"): read to the end, and past the reader's own limit a warning, never a silent truncation."""

from __future__ import annotations

import pytest

from pipelines.documents import Document, IngestLimits
from pipelines.patents import analyse_document


def _claims(n: int) -> str:
    lines = ["What is claimed is:", "1. A widget comprising a base and a lid."]
    lines += [f"{k}. The widget of claim {k - 1}, wherein the lid has a rib {k}." for k in range(2, n + 1)]
    return "\n".join(lines) + "\n"


def test_a_claim_set_of_1200_claims_is_read_to_the_end():
    res = analyse_document(Document.from_text(_claims(1200), doc_id="many"))
    assert [c.number for c in res.claims] == list(range(1, 1201))
    assert res.claims[-1].depends_on == [1199] and res.claims[999].depends_on == [999]
    assert not [f for f in res.findings if f.severity == "error"]


@pytest.mark.slow
def test_past_claim_9999_a_warning_names_the_limit():
    text = _claims(10_002)
    assert len(text) > IngestLimits().max_text_chars  # built in memory: the ingest limit is not the point here
    res = analyse_document(Document.from_text(text, doc_id="too-many"))
    assert res.claims[-1].number == 9999
    codes = {f.code for f in res.findings}
    assert "claim_number_limit" in codes
    (f,) = [f for f in res.findings if f.code == "claim_number_limit"]
    assert f.severity == "warning" and "9,999" in f.message and f.claims == [9999]
