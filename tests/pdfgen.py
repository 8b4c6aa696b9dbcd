"""Small PDFs for tests, made with reportlab: pages of text lines, with optional running header,
footer with page numbers, and margin line numbers; encrypted and image-only variants."""

from __future__ import annotations

from pathlib import Path

from reportlab.lib.pagesizes import A4
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.cidfonts import UnicodeCIDFont
from reportlab.pdfgen import canvas

_CJK = "STSong-Light"


def _font(c: canvas.Canvas, text: str, size: float) -> None:
    if any(ord(ch) > 0x2E80 for ch in text):
        if _CJK not in pdfmetrics.getRegisteredFontNames():
            pdfmetrics.registerFont(UnicodeCIDFont(_CJK))
        c.setFont(_CJK, size)
    else:
        c.setFont("Helvetica", size)


def make_pdf(
    path: Path,
    pages: list[list[str]],
    header: str | None = None,
    footer_page_numbers: bool = False,
    line_numbers: bool = False,
    encrypt: str | None = None,
    columns: list[tuple[list[str], list[str]]] | None = None,
) -> Path:
    """Write a PDF: each page a list of lines at 14 pt spacing from the top margin."""
    width, height = A4
    c = canvas.Canvas(str(path), pagesize=A4, encrypt=encrypt, invariant=1)
    total = len(pages) + len(columns or [])
    pno = 0

    def furniture() -> None:
        if header:
            _font(c, header, 8)
            c.drawString(72, height - 40, header)
        if footer_page_numbers:
            c.setFont("Helvetica", 8)
            c.drawCentredString(width / 2, 30, f"Page {pno} of {total}")

    for lines in pages:
        pno += 1
        furniture()
        y = height - 90
        for i, line in enumerate(lines, start=1):
            _font(c, line, 10)
            c.drawString(90, y, line)
            if line_numbers and i % 5 == 0:
                c.setFont("Helvetica", 7)
                c.drawString(60, y, str(i))
            y -= 14
        c.showPage()
    for left, right in columns or []:
        pno += 1
        furniture()
        for x, lines in ((60, left), (width / 2 + 20, right)):
            y = height - 90
            for line in lines:
                _font(c, line, 10)
                c.drawString(x, y, line)
                y -= 14
        c.showPage()
    c.save()
    return path


def make_image_only_pdf(path: Path) -> Path:
    """A PDF with drawings but no text layer (like a scan)."""
    c = canvas.Canvas(str(path), pagesize=A4, invariant=1)
    c.rect(100, 100, 300, 400, fill=1)
    c.showPage()
    c.save()
    return path
