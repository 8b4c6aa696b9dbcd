"""Reading order in PDF ingest (pipelines/documents/pdf_ingest.py) for the cases reports meet: a
narrow margin column beside the body, two text columns with a full-width title and closing line,
a table that must not be split into "columns", superscript markers kept on their line."""

from __future__ import annotations

import tests.pipelines.reports.helpers as H
from pipelines.documents import load_document


def test_margin_column_reads_as_one_block(tmp_path):
    doc = load_document(H.make_margin_column(tmp_path / "m.pdf"))
    lines = doc.text.splitlines()
    margin = ["Edited by", "Jane Doe", "Reviewed by", "John Roe", "Received", "1 May 2024", "Published", "9 June 2024"]
    idx = [lines.index(x) for x in margin]  # each margin entry is a line of its own
    assert idx == list(range(idx[0], idx[0] + len(margin)))  # one contiguous block, in order
    body = [i for i, x in enumerate(lines) if x.startswith("Body line")]
    assert len(body) == 20 and body == list(range(body[0], body[0] + 20))  # body uninterrupted
    assert all(len(x) < 80 for x in lines)  # nothing glued across the gap


def test_two_columns_left_then_right_with_full_width_lines(tmp_path):
    doc = load_document(H.make_two_columns(tmp_path / "c.pdf"))
    lines = doc.text.splitlines()
    assert "Two Column Article Title" in lines  # the centred title is not cut at the gutter
    left = [i for i, x in enumerate(lines) if x.startswith("Left column")]
    right = [i for i, x in enumerate(lines) if x.startswith("Right column")]
    assert len(left) == len(right) == 24
    assert max(left) < min(right)
    assert lines.index("Two Column Article Title") < min(left)
    closing = next(i for i, x in enumerate(lines) if x.startswith("A closing full-width line"))
    assert closing > max(right)


def test_a_table_is_read_row_by_row(tmp_path):
    doc = load_document(H.make_table_page(tmp_path / "t.pdf"))
    assert "alpha.cls the class file" in doc.text
    assert "eta.cfg configuration" in doc.text


def test_table_under_two_columns_is_not_split(tmp_path):
    doc = load_document(H.make_zh_broker(tmp_path / "b.pdf"))
    assert "甲公司 1200 85" in doc.text and "丙公司 430 21" in doc.text
    # and the columns above it are read left column first
    assert doc.text.index("如前文所述") < doc.text.index("利润端的改善更为明显")


def test_superscript_marker_stays_on_its_line(tmp_path):
    doc = load_document(H.make_zh_broker(tmp_path / "b.pdf"))
    line = next(x for x in doc.text.splitlines() if "统计口径" in x)
    assert line.endswith("1")
    assert "\n1\n" not in doc.text[:200]
