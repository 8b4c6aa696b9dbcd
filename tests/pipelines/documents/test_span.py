"""Tests of `pipelines.documents.Span`: a labelled range viewed over `Document.text`, never a copy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from pipelines.documents import Document, HasSpan, Page, SourceSpan, Span


def test_text_is_read_from_the_document_each_time():
    doc = Document.from_text("alpha beta gamma", doc_id="d")
    span = Span(doc, 6, 10, "word")
    assert span.text == "beta" and span.label == "word"
    assert "text" not in Span.__dataclass_fields__  # no stored copy
    doc.text = "ALPHA BETA GAMMA"  # a view follows its document
    assert span.text == "BETA"


def test_source_is_the_exportable_span():
    doc = Document.from_text("first page\fsecond page", doc_id="d")
    span = Span(doc, 11, 17)
    src = span.source()
    assert isinstance(src, SourceSpan)
    assert src == doc.span(11, 17)
    assert (src.doc_id, src.char_start, src.char_end, src.page, src.text) == ("d", 11, 17, 2, "second")
    assert Span(doc, 0, 5).source().page == 1


def test_source_carries_the_pdf_box():
    text = "ab cd"
    boxes = np.array([[0, 0, 5, 10], [5, 0, 10, 10], [np.nan] * 4, [15, 0, 20, 10], [20, 0, 25, 12]], dtype=np.float32)
    doc = Document(doc_id="p", text=text, pages=[Page(1, 0, len(text))], source_format="pdf", char_boxes=boxes)
    assert Span(doc, 3, 5).source().bbox == (15.0, 0.0, 25.0, 12.0)
    assert Span(doc, 0, 2).source().text == "ab"


@pytest.mark.parametrize("start,end", [(-1, 2), (3, 2), (0, 6), (6, 6)])
def test_bounds_are_checked(start, end):
    doc = Document.from_text("hello", doc_id="d")
    with pytest.raises(ValueError, match="outside document"):
        Span(doc, start, end)


def test_empty_and_whole_spans_are_allowed():
    doc = Document.from_text("hello", doc_id="d")
    assert Span(doc, 5, 5).text == "" and Span(doc, 0, 5).text == "hello"
    assert Span(doc, 5, 5)  # a span is truthy even when empty: `if span:` asks whether there is one


def test_equality_is_over_the_same_document_object():
    a = Document.from_text("same text", doc_id="d")
    b = Document.from_text("same text", doc_id="d")
    assert Span(a, 0, 4, "x") == Span(a, 0, 4, "x")
    assert hash(Span(a, 0, 4, "x")) == hash(Span(a, 0, 4, "x"))
    assert Span(a, 0, 4, "x") != Span(a, 0, 4, "y")
    assert Span(a, 0, 4) != Span(b, 0, 4)
    assert len({Span(a, 0, 4), Span(a, 0, 4), Span(a, 5, 9)}) == 2


def test_a_subclass_adds_fields_and_compares_them():
    @dataclass(frozen=True, slots=True, eq=False, kw_only=True)
    class Tagged(Span):
        kind: str

    doc = Document.from_text("take aspirin daily", doc_id="d")
    t = Tagged(doc, 5, 12, kind="drug")
    assert t.text == "aspirin" and t.source().text == "aspirin" and not hasattr(t, "__dict__")
    assert t == Tagged(doc, 5, 12, kind="drug") and t != Tagged(doc, 5, 12, kind="food")
    assert t != Span(doc, 5, 12)
    with pytest.raises(ValueError):
        Tagged(doc, 5, 99, kind="drug")


def test_span_is_immutable_and_short_in_repr():
    doc = Document.from_text("x" * 10_000, doc_id="big")
    span = Span(doc, 0, 3, "lbl")
    with pytest.raises(AttributeError):
        span.start = 1  # type: ignore[misc]
    assert repr(span) == "Span('big', 0, 3, 'lbl': 'xxx')"


def test_has_span_reads_through_the_held_span():
    @dataclass
    class Note(HasSpan):
        span: Span
        kind: str = ""

    doc = Document.from_text("fever since Monday", doc_id="d")
    note = Note(Span(doc, 0, 5), "symptom")
    assert (note.start, note.end, note.text) == (0, 5, "fever")
    note.span = Span(doc, 0, 11)  # a mutable holder moves its range by holding another span
    assert (note.end, note.text) == (11, "fever since")
    note.kind = "finding"
    assert note.kind == "finding"
