"""Make the PDF samples of the patent pipeline from the text samples beside this script.

Each PDF lays out a claims section over several pages the way a published patent does: a running
header (publication number and title) at the top, a footer with "Page N of M" at the bottom, and a
heading before the first claim, so that ingest has page furniture to recognise and the pipeline
has claims that run over page breaks. Chinese text uses reportlab's built-in CID font
STSong-Light (no font file needed).

    python data/samples/patents/make_pdf_sample.py      # writes the *.pdf next to this script

Deterministic: reportlab's invariant mode fixes the creation date and document id.
"""

from __future__ import annotations

import sys
from pathlib import Path

from reportlab import rl_config
from reportlab.lib.pagesizes import A4
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.cidfonts import UnicodeCIDFont
from reportlab.pdfgen import canvas

HERE = Path(__file__).resolve().parent

SAMPLES = [
    # (text sample, pdf to write, header, heading, font, size, leading)
    ("US6836979.txt", "US6836979_claims.pdf", "US 6,836,979 B2    Shoe structure", "What is claimed is:", "Helvetica", 10.5, 14),
    ("CN110326254A.txt", "CN110326254A_claims.pdf", "CN 110326254 A    生物体签名系统及生物体签名方法", "权利要求书", "STSong-Light", 11, 16),
]


def _wrap(text: str, font: str, size: float, width: float) -> list[str]:
    """Greedy line breaking: at spaces for Latin text, anywhere between CJK characters."""
    lines: list[str] = []
    for para in text.split("\n"):
        line = ""
        tokens: list[str] = []
        word = ""
        for ch in para:
            if ch == " " or "\u3000" <= ch <= "\u9fff" or "\uff00" <= ch <= "\uffef":
                if word:
                    tokens.append(word)
                    word = ""
                tokens.append(ch)
            else:
                word += ch
        if word:
            tokens.append(word)
        for tok in tokens:
            if pdfmetrics.stringWidth(line + tok, font, size) <= width or not line:
                line += tok
            else:
                lines.append(line.rstrip())
                line = tok.lstrip()
        lines.append(line.rstrip())
    return lines


def make_pdf(src: Path, dest: Path, header: str, heading: str, font: str, size: float, leading: float) -> int:
    """Write `dest` from the claims text in `src`; return the number of pages."""
    rl_config.invariant = 1
    if font == "STSong-Light":
        pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    width, height = A4
    margin_x, top, bottom = 72, 90, 80
    body = [ln for ln in src.read_text(encoding="utf-8").split("\n")]
    lines = [heading, ""]
    for para in body:
        lines.extend(_wrap(para, font, size, width - 2 * margin_x) if para.strip() else [""])
    per_page = int((height - top - bottom) // leading)
    pages = [lines[i : i + per_page] for i in range(0, len(lines), per_page)]
    c = canvas.Canvas(str(dest), pagesize=A4, invariant=1)
    c.setTitle(dest.stem)
    header_font = "STSong-Light" if font == "STSong-Light" else "Helvetica"
    for number, page in enumerate(pages, start=1):
        c.setFont(header_font, 9)
        c.drawString(margin_x, height - 50, header)
        c.drawRightString(width - margin_x, height - 50, f"{number}")
        c.setFont(font, size)
        y = height - top
        for ln in page:
            c.drawString(margin_x, y, ln)
            y -= leading
        c.setFont("Helvetica", 9)
        c.drawCentredString(width / 2, 45, f"Page {number} of {len(pages)}")
        c.showPage()
    c.save()
    return len(pages)


def main_into(out: Path) -> int:
    """Write every sample PDF into `out`; return how many were written."""
    for src, dest, header, heading, font, size, leading in SAMPLES:
        n = make_pdf(HERE / src, out / dest, header, heading, font, size, leading)
        print(f"{out / dest}: {n} pages")
    return len(SAMPLES)


def main() -> int:
    main_into(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
