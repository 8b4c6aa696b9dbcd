"""Ingest: every format, encodings, page furniture, and a one-line error for every kind of bad input."""

from __future__ import annotations

import docx
import pytest

from pipelines.documents import Document, IngestError, IngestLimits, load_bytes, load_document
from tests.pdfgen import make_image_only_pdf, make_pdf


def check_span_invariant(doc: Document, start: int, end: int) -> None:
    s = doc.span(start, end)
    assert doc.text[s.char_start : s.char_end] == s.text


def test_utf8_text_and_spans(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text("Claim one.\r\nSecond line — ü.\n", encoding="utf-8")
    doc = load_document(p)
    assert doc.text == "Claim one.\nSecond line — ü.\n"
    assert doc.encoding == "utf-8" and doc.source_format == "txt"
    s = doc.span(11, 22)
    assert s.text == "Second line" and s.page == 1 and s.bbox is None and s.doc_id == doc.doc_id
    assert len(doc.sha256) == 64


@pytest.mark.parametrize("encoding", ["gb18030", "gbk", "utf-16", "utf-16-le"])
def test_chinese_encodings_detected(tmp_path, encoding):
    text = "权利要求书\n1. 一种生物体签名系统，其特征在于，包括处理器和存储器。\n2. 根据权利要求1所述的系统，其中所述处理器进行认证。\n" * 3
    p = tmp_path / "zh.txt"
    p.write_bytes(text.encode(encoding))
    doc = load_document(p)
    assert doc.text == text


def test_form_feed_splits_pages(tmp_path):
    p = tmp_path / "pages.txt"
    p.write_text("page one text\fpage two text", encoding="utf-8")
    doc = load_document(p)
    assert [pg.number for pg in doc.pages] == [1, 2]
    assert doc.span(doc.text.index("two"), doc.text.index("two") + 3).page == 2


@pytest.mark.parametrize(
    "name, data, reason",
    [
        ("empty.txt", b"", "file is empty"),
        ("blank.txt", b"  \n\n ", "file is empty"),
        ("junk.txt", bytes(range(256)) * 20, "binary data"),
        ("tiny.txt", b"\x00\x01\x02", "binary data"),  # odd byte count: not UTF-16 (it once read as "\u0100")
        ("image.png", b"\x89PNG\r\n\x1a\n....", "unsupported file type .png"),
        ("noext", b"hello", "unsupported file type (none)"),
        ("broken.pdf", b"%PDF-1.4\n garbage garbage \n%%EOF", "broken PDF"),
        ("fake.pdf", b"this is not a pdf at all", "not a PDF file"),
        ("broken.docx", b"PK\x03\x04 not really a zip", "cannot be parsed as docx"),
    ],
)
def test_bad_input_one_line_error(name, data, reason):
    with pytest.raises(IngestError) as err:
        load_bytes(data, f"/some/folder/{name}")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"/some/folder/{name}: ")
    assert reason in msg


def test_size_limit(tmp_path):
    p = tmp_path / "big.txt"
    p.write_text("x" * 5000, encoding="utf-8")
    with pytest.raises(IngestError, match="over the .* limit"):
        load_document(p, limits=IngestLimits(max_bytes=1000))


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(IngestError, match="no such file"):
        load_document(tmp_path / "nope.txt")
    with pytest.raises(IngestError, match="is a folder"):
        load_document(tmp_path)


def test_docx_paragraphs_numbering_and_tables(tmp_path):
    d = docx.Document()
    d.add_paragraph("Agreement")
    d.add_paragraph("First obligation.", style="List Number")
    d.add_paragraph("Second obligation.", style="List Number")
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Fee", "USD 100"
    table.cell(1, 0).text, table.cell(1, 1).text = "Term", "2 years"
    d.add_paragraph("End.")
    p = tmp_path / "a.docx"
    d.save(p)
    doc = load_document(p)
    lines = doc.text.split("\n")
    assert lines[0] == "Agreement"
    assert lines[1] == "1. First obligation." and lines[2] == "2. Second obligation."
    assert "Fee\tUSD 100" in lines and lines[-1] == "End."
    assert doc.source_format == "docx"


def test_pdf_boxes_pages_and_furniture(tmp_path):
    body1 = [f"Line {i} of the first page with some words" for i in range(1, 21)]
    body2 = [f"Line {i} of the second page continues here" for i in range(1, 21)]
    body3 = [f"Line {i} of the third page ends the document" for i in range(1, 21)]
    p = make_pdf(tmp_path / "a.pdf", [body1, body2, body3], header="ACME CONFIDENTIAL REPORT", footer_page_numbers=True, line_numbers=True)
    doc = load_document(p)
    assert len(doc.pages) == 3
    # running header, page numbers and line numbers are recognised and kept out of the text
    assert "ACME CONFIDENTIAL" not in doc.text
    assert "Page 1 of 3" not in doc.text
    kinds = {f.kind for f in doc.furniture}
    assert {"header", "page_number", "line_number"} <= kinds
    assert sum(f.kind == "line_number" for f in doc.furniture) == 3 * 4
    lines = doc.text.split("\n")
    assert lines[0] == body1[0] and body2[19] in lines
    # every span has a page and a box inside the page
    start = doc.text.index("Line 7 of the second page")
    s = doc.span(start, start + len("Line 7 of the second page"))
    assert s.page == 2 and s.text == "Line 7 of the second page"
    x0, top, x1, bottom = s.bbox
    assert 85 <= x0 < x1 <= 400 and 0 < top < bottom < doc.pages[1].height
    # the 7th line sits 6 line-pitches (14 pt) below the first
    first = doc.span(doc.text.index("Line 1 of the second"), doc.text.index("Line 1 of the second") + 4)
    assert abs((top - first.bbox[1]) - 6 * 14) < 1.0
    for a in range(0, len(doc.text) - 5, 97):
        check_span_invariant(doc, a, a + 5)


def test_pdf_two_columns_read_left_then_right(tmp_path):
    left = [f"left column sentence number {i}" for i in range(12)]
    right = [f"right column sentence number {i}" for i in range(12)]
    doc = load_document(make_pdf(tmp_path / "cols.pdf", [], columns=[(left, right)]))
    lines = doc.text.split("\n")
    assert lines[:12] == left and lines[12:24] == right


def test_pdf_chinese_text(tmp_path):
    lines = ["权利要求书", "1. 一种肢体检测放射影像装置，其特征在于，包括底座。", "2. 根据权利要求1所述的装置，其特征在于，还包括支架。"]
    doc = load_document(make_pdf(tmp_path / "zh.pdf", [lines]))
    assert doc.text.split("\n") == lines
    i = doc.text.index("根据权利要求1")
    assert doc.span(i, i + 7).bbox is not None


def test_pdf_without_text_layer(tmp_path):
    with pytest.raises(IngestError, match="no text layer"):
        load_document(make_image_only_pdf(tmp_path / "scan.pdf"))


def test_encrypted_pdf(tmp_path):
    p = make_pdf(tmp_path / "secret.pdf", [["top secret text"]], encrypt="hunter2")
    with pytest.raises(IngestError) as err:
        load_document(p)
    assert "encrypted PDF" in str(err.value) and str(err.value).startswith(str(p))


def test_page_limit(tmp_path):
    p = make_pdf(tmp_path / "long.pdf", [["a line"]] * 3)
    with pytest.raises(IngestError, match="over the 2-page limit"):
        load_document(p, limits=IngestLimits(max_pages=2))
