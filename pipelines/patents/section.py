"""Finding the claims section in a whole patent, or taking the whole input as claims.

Start: a heading line ("What is claimed is:", "I claim:", "We claim:", "Claims", "CLAIMS (20)",
"The invention claimed is", "权利要求书", "权利要求") that is followed, after blank or furniture
lines, by the start of a claim; or, without one, the input itself when it starts with a claim;
or else the first line-start "1." / "Claim 1" / "1、" that reads like a claim.
End: the next heading of another part of a patent (abstract, description, background, 说明书,
摘要 ...) or the end of the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipelines.patents.text import is_furniture_line
from pipelines.text.script import HAN

_START_HEADING = re.compile(
    r"^[ \t]*(?:"
    r"what\s+(?:is|are)\s+claimed\s*(?:is|are)?|what\s+(?:i|we)\s+claim\s*(?:is|are)?|(?:i|we|i/we)\s+claim"
    r"|(?:the\s+)?(?:invention|inventions|subject[- ]matter)\s+claimed\s+(?:is|are)|claimed\s+is"
    r"|(?:patent\s+)?claims?(?:\s*\(\s*\d+\s*\))?|listing\s+of\s+(?:the\s+)?claims|amendments?\s+to\s+the\s+claims"
    r"|claim\s+set|权[ \t]*利[ \t]*要[ \t]*求[ \t]*书?|权利要求(?:书)?(?:如下)?"
    r")(?:[ \t]*[:.\-]?[ \t]*(?=\n|$)|[ \t]*:[ \t]*(?=\S))",
    re.IGNORECASE | re.MULTILINE,
)
_END_HEADING = re.compile(
    r"^[ \t]*(?:\d+\.?\s*)?(?:"
    r"abstract(?:\s+of\s+the\s+disclosure)?|description(?:\s+of\s+(?:the\s+)?(?:embodiments|drawings|invention))?"
    r"|detailed\s+description.*|brief\s+description.*|background(?:\s+of\s+the\s+invention)?|field(?:\s+of\s+the\s+invention)?"
    r"|technical\s+field|summary(?:\s+of\s+the\s+invention)?|cross[- ]reference.*|references\s+cited|patent\s+citations.*"
    r"|cited\s+by.*|non-patent\s+citations.*|similar\s+documents.*|priority\s+(?:and\s+related\s+)?applications.*"
    r"|legal\s+events.*|family\s+cites\s+families.*|concepts.*|patentanspr(?:ü|ue)che|anspr(?:ü|ue)che|revendications"
    r"|reivindicaciones|beschreibung|description\s+of\s+(?:the\s+)?preferred\s+embodiments?"
    r"|statement\s+regarding.*|incorporation\s+by\s+reference.*|related\s+applications?|government\s+(?:rights|interest|support).*"
    r"|(?:prior|related)\s+art|examples|industrial\s+applicability|reference\s+signs?\s+list|list\s+of\s+reference.*"
    r"|说\s*明\s*书(?:\s*摘\s*要)?|摘\s*要|技术领域|背景技术|发明内容|具体实施方式|附图说明|说明书附图"
    r"|\*\s*\*\s*\*(?:\s*\*)*"
    r")[ \t]*:?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
# A claim start at the beginning of a line: "1.", "1 .", "1、", "Claim 1", "[Claim 1]", "1-3. (Canceled)".
CLAIM_START_LINE = re.compile(
    r"[ \t]*(?:\[\s*claim\s+\d{1,4}\s*\]|claim\s+\d{1,4}\s*[.:\]]?|\d{1,4}\s?(?:[.、]|\s*\.?\s*-\s*\d{1,4}\s*\.)(?!\d))",
    re.IGNORECASE,
)
_FIRST_CLAIM = re.compile(
    rf"^[ \t]*(?:\[\s*claim\s+1\s*\]|claim\s+1\s*[.:\]]?|1\s?[.、](?!\d))[ \t]*(?:\([^)\n]{{1,40}}\)\s*)?(?=[A-Z\"'(\[{HAN}])",
    re.IGNORECASE | re.MULTILINE,
)


@dataclass(frozen=True)
class Section:
    """Where the claims are: [start, end) of the claims, the heading found (if any), and how. Offsets
    into the normalised text searched (`patents.text.normalise`, same length as `Document.text`)."""

    start: int
    end: int
    method: str  # "heading" | "whole_input" | "first_claim" | "none"
    heading_start: int | None = None
    heading_end: int | None = None


def _skip_blank_and_furniture(norm: str, pos: int, limit: int = 600) -> int:
    """Offset of the first line at/after pos that is neither blank nor furniture."""
    stop = min(len(norm), pos + limit)
    while pos < stop:
        nl = norm.find("\n", pos)
        if nl < 0:
            nl = len(norm)
        line = norm[pos:nl]
        if line.strip() and not is_furniture_line(line):
            return pos
        pos = nl + 1
    return min(pos, len(norm))


def find_end(norm: str, start: int) -> int:
    """End of the claims section that starts at `start`: the next end heading, or the text's end."""
    m = _END_HEADING.search(norm, start)
    return m.start() if m else len(norm)


def find_section(norm: str) -> Section:
    """Locate the claims section in `norm` (see the module docstring)."""
    first_text = _skip_blank_and_furniture(norm, 0, limit=len(norm))
    if (
        CLAIM_START_LINE.match(norm, first_text)
        and _looks_like_claim_start(norm, first_text)
        and not _END_HEADING.match(norm, first_text)  # "1. Field of the Invention" starts a description
    ):
        return Section(first_text, find_end(norm, first_text), "whole_input")
    for m in _START_HEADING.finditer(norm):
        after = m.end()
        # The heading may be followed by the first claim on the same line ("We claim: 1. A ...").
        rest_of_line = norm[after : norm.find("\n", after) if "\n" in norm[after:] else len(norm)]
        pos = after if rest_of_line.strip() else _skip_blank_and_furniture(norm, after)
        if pos < len(norm) and CLAIM_START_LINE.match(norm, pos):
            end = find_end(norm, pos)
            if end > pos:
                hs, he = m.start(), m.end()
                while hs < he and norm[hs].isspace():
                    hs += 1
                while he > hs and (norm[he - 1].isspace() or norm[he - 1] in ":.-"):
                    he -= 1
                return Section(pos, end, "heading", hs, he)
    m = _FIRST_CLAIM.search(norm)
    if m:
        pos = m.start()
        while pos < len(norm) and norm[pos] in " \t":
            pos += 1
        return Section(pos, find_end(norm, pos), "first_claim")
    return Section(0, 0, "none")


def _looks_like_claim_start(norm: str, pos: int) -> bool:
    line_end = norm.find("\n", pos)
    line = norm[pos : line_end if line_end >= 0 else len(norm)]
    return bool(re.match(r"\s*(?:\[\s*claim\s+\d+\s*\]|claim\s+\d+|\d{1,4}\s?[.、]|\d{1,4}\s*\.?\s*-\s*\d{1,4}\s*\.)\s*\S", line, re.IGNORECASE))
