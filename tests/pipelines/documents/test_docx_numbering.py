"""Word list labels as Word shows them (pipelines.documents.docx_ingest.format_number)."""

from __future__ import annotations

import pytest

from pipelines.documents.docx_ingest import format_number


@pytest.mark.parametrize("n, fmt, shown", [
    (4, "lowerRoman", "iv"), (14, "upperRoman", "XIV"), (1994, "upperRoman", "MCMXCIV"),
    (1, "chineseCounting", "一"), (10, "chineseCounting", "十"), (12, "chineseCountingThousand", "十二"),
    (20, "chineseLegalSimplified", "二十"), (105, "taiwaneseCounting", "一百零五"), (0, "chineseCounting", "0"),
    (3, "lowerLetter", "c"), (28, "upperLetter", "AB"), (7, "decimalZero", "07"), (12, "decimalFullWidth", "１２"),
    (5, "bullet", ""), (5, "somethingElse", "5"),
])
def test_format_number(n: int, fmt: str, shown: str) -> None:
    assert format_number(n, fmt) == shown
