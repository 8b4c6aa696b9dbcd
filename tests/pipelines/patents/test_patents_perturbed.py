"""The corpus claim sets pasted the ways people paste them: on one line, hard-wrapped, with page
furniture (page numbers, running headers) between lines, indented, with CRLF, without blank
lines, with form feeds, inside a whole patent, wrapped and with furniture. The dependencies must
stay exactly those of the truth files."""

from __future__ import annotations

import re
import textwrap

import pytest

from pipelines.documents import Document
from pipelines.patents.analyse import analyse_document
from pipelines.patents.pipeline import analyse_text
from tests.pipelines.patents.helpers import CORPUS_IDS, deps, load_text, load_truth


def one_line(t: str) -> str:
    return re.sub(r"\s*\n\s*", " ", t)


def wrap(t: str, width: int = 72) -> str:
    return "\n".join(line for para in t.split("\n") for line in (textwrap.wrap(para, width) or [""]))


def furniture(t: str) -> str:
    out = []
    for i, line in enumerate(t.split("\n")):
        out.append(line)
        if i % 17 == 16:
            out += ["", str(i // 17 + 1), "US 7,000,000 B2", ""]
    return "\n".join(out)


def whole_patent(t: str) -> str:
    return (
        "SHOE\n\nBACKGROUND OF THE INVENTION\n\n1. Field of the Invention\nClaim 3 of the prior art is known.\n\n"
        "What is claimed is:\n\n" + t + "\n\nABSTRACT OF THE DISCLOSURE\nA shoe according to claim 1.\n"
    )


PERTURBATIONS = {
    "one_line": one_line,
    "wrap": wrap,
    "furniture": furniture,
    "indent": lambda t: "\n".join("    " + line for line in t.split("\n")),
    "no_blank_lines": lambda t: re.sub(r"\n\n+", "\n", t),
    "form_feeds": lambda t: "\n".join(line + ("\f" if i % 23 == 22 else "") for i, line in enumerate(t.split("\n"))),
    "whole_patent": whole_patent,
    "wrap_and_furniture": lambda t: furniture(wrap(t)),
}


@pytest.mark.parametrize("name", sorted(PERTURBATIONS))
def test_perturbed_corpus_keeps_dependencies(name):
    wrong = []
    for patent_id in CORPUS_IDS:
        truth = {c["number"]: c["depends_on"] for c in load_truth(patent_id)["claims"]}
        got = deps(analyse_text(PERTURBATIONS[name](load_text(patent_id))))
        if got != truth:
            wrong.append((patent_id, sorted(n for n in truth if got.get(n) != truth[n])[:5], sorted(set(got) - set(truth))[:5]))
    assert not wrong


def test_crlf_document_without_normalisation():
    text = load_text("US7156074").replace("\n", "\r\n")
    result = analyse_document(Document.from_text(text, doc_id="crlf"))
    assert deps(result) == {c["number"]: c["depends_on"] for c in load_truth("US7156074")["claims"]}
    for c in result.claims:
        assert text[c.span.char_start : c.span.char_end] == c.span.text
