"""The web UI with hostile uploads: several bad files show one error each (not only the first), and
document text holding markdown links, images or HTML is shown as its characters (medical, reports,
contracts pages; `md_text` checked with a CommonMark parser)."""

from __future__ import annotations

import html

import pytest
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from app.ui.common import IngestErrors, load_all, md_line, md_text

HOSTILE = [
    "[click me](http://evil.example/x)",
    "![pixel](http://evil.example/p.png)",
    "<img src=x onerror=alert(1)> <b>bold</b>",
    "# heading\n- item\n> quote",
    "**strong** _em_ `code` ~~del~~ $x^2$ :red[colour] :material/home:",
    "<http://evil.example/auto> [ref][1]\n\n[1]: http://evil.example/r",
    "a \\* backslash \\\\ and & entities &amp; &lt;",
]
MARKUP = {"link_open", "image", "html_inline", "html_block", "heading_open", "em_open", "strong_open",
          "code_inline", "s_open", "bullet_list_open", "blockquote_open"}


def _token_types(text: str) -> set[str]:
    md = MarkdownIt("commonmark").enable("strikethrough")
    out = set()
    for tok in md.parse(text):
        out.add(tok.type)
        out.update(child.type for child in tok.children or [])
    return out


@pytest.mark.parametrize("text", HOSTILE)
def test_md_text_leaves_no_markup_and_keeps_the_characters(text):
    escaped = md_text(text)
    assert not _token_types(escaped) & MARKUP, _token_types(escaped)
    assert "$" not in escaped.replace("\\$", "")  # no LaTeX for Streamlit's math either
    rendered = MarkdownIt("commonmark").renderInline(escaped)
    assert html.unescape(rendered) == " ".join(text.split())
    if "backslash" not in text:  # the last case checks only that the characters survive
        assert _token_types(text) & MARKUP  # the input itself is markup (so the test can fail)


def test_load_all_names_every_bad_file():
    with pytest.raises(IngestErrors) as err:
        load_all([("a.pdf", b"garbage"), ("ok.txt", b"fine text"), ("b.docx", b"junk"), ("c.txt", b"")])
    assert len(err.value.errors) == 3
    assert [e.split(":")[0] for e in err.value.errors] == ["a.pdf", "b.docx", "c.txt"]


def test_medical_page_shows_an_error_for_each_bad_file():
    from app.ui.medical_page import EMBEDDINGS, PENDING

    at = AppTest.from_string("from app.ui.medical_page import page\npage()\n", default_timeout=60)
    at.session_state[EMBEDDINGS] = False
    at.session_state[PENDING] = ([("scan.pdf", b"garbage"), ("note.txt", b"Chief complaint: cough."),
                                  ("letter.docx", b"not a docx"), ("empty.txt", b"")], None)
    at.run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 3
    for name, err in zip(["scan", "letter", "empty"], errors, strict=True):
        assert name in err


def test_contracts_page_shows_both_bad_versions():
    at = AppTest.from_string("from app.ui.contracts_page import page\npage()\n", default_timeout=60)
    at.session_state["contracts_pending_input"] = (("v1.pdf", b"%PDF-1.4 broken"), ("v2.txt", b""))
    at.run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 2 and "v1" in errors[0] and "v2" in errors[1]


def _markup_in(values) -> set[str]:
    found = set()
    for v in values:
        found |= _token_types(v) & {"link_open", "image", "html_inline", "html_block"}
    return found


def test_medical_evidence_with_links_and_images_is_shown_as_text():
    from app.ui.medical_page import EMBEDDINGS, PENDING

    note = ("Chief complaint: cough and fever [click me](http://evil.example/x).\n"
            "Assessment: pneumonia ![pixel](http://evil.example/p.png) <img src=x onerror=alert(1)>.\n"
            "Plan: start amoxicillin 500 mg PO TID for pneumonia.\n")
    at = AppTest.from_string("from app.ui.medical_page import page\npage()\n", default_timeout=60)
    at.session_state[EMBEDDINGS] = False
    at.session_state[PENDING] = ([("note.txt", note.encode())], "why was amoxicillin started for pneumonia?")
    at.run()
    assert not at.exception, at.exception
    # the lines holding document text (the page's own colour legend is HTML on purpose)
    bodies = [v for v in [m.value for m in at.markdown] + [e.value for e in at.error]
              if "pneumonia" in v or "evil" in v]
    assert any("evil" in b for b in bodies), "the hostile sentence should be shown as evidence"
    assert not _markup_in(bodies)


def test_reports_target_card_with_links_and_html_is_shown_as_text():
    report = ("Annual report\n\nRevenue grew strongly, as Figure 1 shows.\n\n"
              "Figure 1: Revenue by year [click](http://evil.example/x) ![px](http://evil.example/p.png) <b>x</b>\n")
    at = AppTest.from_string("from app.ui.reports_page import page\npage()\n", default_timeout=90)
    at.session_state["reports_pending_input"] = ("r.txt", report.encode())
    at.run()
    assert not at.exception, at.exception
    assert any("evil.example" in t.value for t in at.text)  # the caption, as text
    assert not _markup_in([m.value for m in at.markdown] + [e.value for e in at.error])


@pytest.mark.parametrize("name", ["[x](http://evil.example).pdf", "![i](a.png).txt", "<img src=x>.txt",
                                  "- item.txt", "1. first.txt", "# title.txt", "www.evil.example.pdf",
                                  "a_b_*c*.txt", "$x$.md", "`code`.txt"])
def test_md_line_keeps_an_error_line_readable_and_inert(name):
    line = f"{name}: file is empty"
    escaped = md_line(line)
    types = _token_types(escaped)
    assert not types & (MARKUP | {"ordered_list_open"}), types
    assert html.unescape(MarkdownIt("commonmark").renderInline(escaped)) == line
    assert "www" not in escaped or "www\\." in escaped  # no bare-URL autolink for GFM either
    assert md_line("bad.pdf: broken PDF (No /Root object! - Is this really a PDF?)") == \
        "bad.pdf: broken PDF (No /Root object! - Is this really a PDF?)"
