"""Mentions as a reader checks them: another work's figures, tables and equations are external
(and the reason says which words said so), callouts are found across line breaks, hyphenated
label words and panel letters, "图3和图4" is two mentions with a box each, and labels keep the
number as printed. Real cases from the corpus PDFs; the rest from small PDFs drawn by
tests/pdfgen.py."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from pipelines.documents import Document, load_document
from pipelines.reports import analyse_document
from tests.pdfgen import make_pdf

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "reports"

CAPTIONS = [
    "", "Figure 1. A plot of things.", "", "Figure 2. Another plot.", "", "Figure 3. Third plot with panels.", "",
    "Table 1. Numbers.", "", "Table 5. More numbers.", "", "x = y + 1 (3a)", "x = y + 2 (3b)", "x = y + 3 (3c)",
]
EN_LINES = [
    "Results are in Figure 1 and Table 1. Tables 2-3 of the original",
    "study report more. Supplementary Table 1 from Lee et al.",
    "and Table 5 list the cohorts. As Figs. 4-5 in [12] show, the effect holds;",
    "see also Figure 3b and Fig. 3B. The sample is in the Figure",
    "2 below, and in the Fig-",
    "ure 1 above. Eq. 2.27 and 2.33 in [9] hold; Eq. 3a-3c too.",
    "Unlike Figure 2 in [12], our Figure 3 shows the drift. See Figure 3b-d.",
    "Supplementary Figure 2 lists the runs.",
]
ZH_LINES = [
    "原文图3和图4给出了结果，文献[5]中的表2也是。",
    "如图1和图3所示，表1与表2相同。见图2.1。由式（A.3）可得。",
    "表3.2列出了分项数据，根据3.2可知收入上升。",
    "表3.2的口径不变，根据3.2亿元的收入测算。图2.1中，根据2.1节的方法。",
]
ZH_CAPTIONS = [
    "", "图4：销量", "", "表2：更多数据", "", "表3.2：分项数据", "", "图2.1：结构", "", "a = b + c （A.3）", "",
    "References", "[5] Zhang San. A paper. 2020.", "[9] A. Kraichnan. Small-scale structure. 1974.",
    "[12] B. Lee. Other paper. 2020.",
]


@cache
def corpus(name: str):
    pdf = FIX / f"{name}.pdf"
    doc = load_document(pdf)
    return doc, analyse_document(doc, pdf.read_bytes())


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    path = make_pdf(tmp_path_factory.mktemp("callouts") / "callouts.pdf", [EN_LINES + CAPTIONS, ZH_LINES + ZH_CAPTIONS])
    doc = load_document(path)
    return doc, analyse_document(doc, path.read_bytes())


def find(result, text: str, page: int | None = None, nth: int = 0):
    hits = [m for m in result.mentions if m.text == text and (page is None or m.page == page)]
    assert len(hits) > nth, (text, [m.text for m in result.mentions])
    return hits[nth]


# -- another work's figures, tables and equations ------------------------------------------------

@pytest.mark.parametrize("text,page,nth,evidence", [
    ("Tables 2-3", 1, 0, "of the original"),
    ("Table 1", 1, 1, "from Lee et al"),
    ("Figs. 4-5", 1, 0, "in [12]"),
    ("Figure 2", 1, 0, "in [12]"),
    ("图3", 2, 0, "原文"),
    ("图4", 2, 0, "原文"),
    ("表2", 2, 0, "文献[5]中的"),
])
def test_another_works_floats_are_external_with_the_words_that_say_so(drawn, text, page, nth, evidence):
    _, result = drawn
    m = find(result, text, page, nth)
    assert m.resolution == "external" and m.targets == [], m
    assert m.reason.startswith("external") and evidence in m.reason, m.reason


def test_a_float_in_a_sentence_about_another_works_float_is_external(drawn):
    _, result = drawn
    m = find(result, "Table 5", 1)  # "Supplementary Table 1 from Lee et al. and Table 5 list the cohorts."
    assert m.resolution == "external" and m.targets == []
    assert "Table 1 from Lee et al" in m.reason


def test_our_own_float_beside_another_works_stays_internal(drawn):
    _, result = drawn
    m = find(result, "Figure 3", 1)  # "Unlike Figure 2 in [12], our Figure 3 shows the drift."
    assert m.resolution == "internal" and m.targets == ["figure-3"]
    assert find(result, "Figure 1", 1).targets == ["figure-1"]


def test_a_supplementary_float_is_not_linked_to_the_body_float_of_that_number(drawn):
    _, result = drawn
    m = next(m for m in result.mentions if m.text == "Figure 2" and m.reason.startswith("a supplementary"))
    assert m.targets == [] and m.resolution == "unresolved"


def test_equations_of_another_work_are_external_one_mention_per_number():
    _, result = corpus("debuyl")  # p16: "linked by Eq. 2.27 and 2.33 in [9]."
    a, b = find(result, "Eq. 2.27", 16), find(result, "2.33", 16)
    for m in (a, b):
        assert m.kind == "equation" and m.resolution == "external" and m.targets == [] and "in [9]" in m.reason
    assert a.bbox != b.bbox
    assert find(result, "Eq. 2.31", 16).resolution == "external"
    young = find(result, "Eq. 2", 10)  # "(...) samples Eq. 2 in Young et al. [1], i.e. Eq. 3 in our manuscript"
    assert young.resolution == "external" and young.targets == []
    assert find(result, "Eq. 3", 10).targets == ["equation-3"]


def test_an_equation_range_with_a_unicode_hyphen_covers_every_equation():
    _, result = corpus("debuyl")  # p14: "Using the definition of G(x, y, t) and Eq. 36a‐36d:"
    m = find(result, "Eq. 36a\u201036d", 14)
    assert m.targets == ["equation-36a", "equation-36b", "equation-36c", "equation-36d"]


def test_equation_lists_and_ranges_in_a_drawn_pdf(drawn):
    _, result = drawn
    assert find(result, "Eq. 3a-3c", 1).targets == ["equation-3a", "equation-3b", "equation-3c"]
    zh = find(result, "式（A.3）", 2)
    assert zh.targets == ["equation-a-3"]


# -- mentions found where they hide ---------------------------------------------------------------

def test_label_and_number_on_different_lines(drawn):
    _, result = drawn
    m = find(result, "Figure\n2", 1)
    assert m.targets == ["figure-2"] and len(m.boxes) == 2


def test_label_word_hyphenated_over_a_line_break(drawn):
    _, result = drawn
    m = find(result, "Fig-\nure 1", 1)
    assert m.kind == "figure" and m.targets == ["figure-1"] and len(m.boxes) == 2


@pytest.mark.parametrize("text,panel", [("Figure 3b", "b"), ("Fig. 3B", "B"), ("Figure 3b-d", "b-d")])
def test_panel_letters(drawn, text, panel):
    _, result = drawn
    m = find(result, text, 1)
    assert m.targets == ["figure-3"] and m.panel == panel


# -- one mention per callout ----------------------------------------------------------------------

def test_two_callouts_are_two_mentions_with_their_own_boxes(drawn):
    doc, result = drawn
    f1, f3 = find(result, "图1", 2), find(result, "图3", 2, nth=1)
    t1, t2 = find(result, "表1", 2), find(result, "表2", 2, nth=1)
    assert (f1.targets, f3.targets, t1.targets, t2.targets) == (["figure-1"], ["figure-3"], ["table-1"], ["table-2"])
    assert f1.bbox != f3.bbox and t1.bbox != t2.bbox
    for m in (f1, f3, t1, t2):
        assert doc.text[m.span.char_start:m.span.char_end] == m.text


def test_sub_figure_callouts_of_the_thesis_are_separate_mentions():
    _, result = corpus("zh-sustechthesis-example")  # p10: "比如图 2­2a) 和图 2­2b)。"
    a, b = find(result, "图 2\u00ad2a)", 10), find(result, "图 2\u00ad2b)", 10)
    assert a.targets == b.targets == ["figure-2-2"] and (a.panel, b.panel) == ("a", "b")
    assert a.bbox != b.bbox


def test_fig_and_fig_in_the_replication_are_two_mentions():
    _, result = corpus("debuyl")  # p8: "the original Fig. 1 and Fig. 2" (the LaTeX points to this PDF's figures)
    assert find(result, "Fig. 1", 8).targets == ["figure-1"]
    assert find(result, "Fig. 2", 8).targets == ["figure-2"]


# -- labels as printed ----------------------------------------------------------------------------

def test_numbers_are_reported_as_printed(drawn):
    _, result = drawn
    by_id = {t.id: t for t in result.targets}
    assert by_id["figure-2-1"].number == "2.1" and by_id["table-3-2"].number == "3.2"
    assert by_id["equation-a-3"].number == "A.3"
    assert find(result, "图2.1", 2).targets == ["figure-2-1"]
    _, thesis = corpus("zh-sustechthesis-example")
    assert {t.id: t.number for t in thesis.targets}["figure-2-1"] == "2-1"  # printed with a soft hyphen


# -- a bare number naming a float ------------------------------------------------------------------

def test_a_bare_number_in_a_sentence_about_that_table_resolves(drawn):
    doc, result = drawn
    bare = [m for m in result.mentions if m.text == "3.2" and m.page == 2]
    assert len(bare) == 1, [m.text for m in result.mentions if m.page == 2]  # not "根据3.2亿元", a quantity
    m = bare[0]
    assert m.kind == "table" and m.targets == ["table-3-2"] and m.reason.startswith("bare number")
    assert doc.text[m.span.char_start - 2:m.span.char_start] == "根据"
    assert not [m for m in result.mentions if m.text == "2.1" and m.page == 2]  # "根据2.1节": not after a cue it names


# -- the words that say whose a float is, one sentence at a time ----------------------------------

_FLOATS = ("\n\nFigure 1. A.\n\nFigure 2. B.\n\nFigure 3. C.\n\nTable 1. D.\n\nTable 2. E.\n\nTable 3. F.\n\n"
           "References\n[3] X. Y. A paper. 2000.\n[12] Z. W. Another paper. 2001.\n")


@pytest.mark.parametrize("sentence,want", [
    ("Tables 2–3 of the original study report more.", {"Tables 2–3": None}),
    ("See [12, Fig. 3] for the setup.", {"Fig. 3": None}),
    ("As shown in Figure 3 of reference [12].", {"Figure 3": None}),
    ("As in Lee et al. (2019, Figure 2).", {"Figure 2": None}),
    ("As before (Lee et al., 2019, Fig. 2).", {"Fig. 2": None}),
    ("As before (Smith, 2019, Fig. 2).", {"Fig. 2": None}),
    ("Fig. 3 from ref. [12] shows it.", {"Fig. 3": None}),
    ("Smith et al.'s Figure 2 shows it.", {"Figure 2": None}),
    ("参考文献[3]中表2给出了结果。", {"表2": None}),
    ("与原文表2相比，本文表1更全。", {"表2": None, "表1": "table-1"}),
    ("We compare our Figure 1 with Figure 2 in [12].", {"Figure 1": "figure-1", "Figure 2": None}),
    ("Figure 1 reproduces Figure 2 of the original study.", {"Figure 1": "figure-1", "Figure 2": None}),
    ("In 2019, Figure 2 shows growth.", {"Figure 2": "figure-2"}),
    ("如图3（引自文献[12]）所示，结果相同。", {"图3": None}),
    ("Figure 2 (adapted from Smith 2019) shows it.", {"Figure 2": None}),
    ("Table 1 from Lee et al. lists the cohorts. Table 2 shows our results.", {"Table 1": None, "Table 2": "table-2"}),
    ("Data from 2019; Figure 2 shows growth.", {"Figure 2": "figure-2"}),
])
def test_whose_float_a_sentence_names(sentence, want):
    doc = Document.from_text(sentence + _FLOATS, doc_id="t")
    result = analyse_document(doc)
    got = {m.text: m for m in result.mentions if m.span.char_start < len(sentence) and m.kind != "citation"}
    assert set(got) == set(want), got
    for text, target in want.items():
        m = got[text]
        if target is None:
            assert m.resolution == "external" and m.targets == [] and m.reason.startswith("external"), m
        else:
            assert m.resolution == "internal" and m.targets == [target], m


def test_text_after_the_last_bibliography_entry_is_still_read(tmp_path):
    """The last numbered entry ends with its page; a next page of body text (an appendix without
    a heading) is not swallowed into it, so its mentions are found."""
    path = make_pdf(tmp_path / "bib.pdf", [
        ["Body text cites [1] and [2].", "", "Figure 1. A plot.", "", "References",
         "[1] A. Author. A paper. 2001.", "[2] B. Author. Another paper. 2002."],
        ["The appendix text shows Figure 1 again.", "More text here with Figure 1."],
    ])
    doc = load_document(path)
    result = analyse_document(doc, path.read_bytes())
    assert [(m.page, m.targets) for m in result.mentions if m.kind == "figure"] == [(2, ["figure-1"]), (2, ["figure-1"])]
    last = next(t for t in result.targets if t.id == "ref-2")
    assert last.span.text == "[2] B. Author. Another paper. 2002."


def test_a_plural_chain_after_two_callouts_takes_both_in_reading_order(tmp_path):
    import tests.pipelines.reports.helpers as H

    path = H.make_zh_broker(tmp_path / "broker.pdf")  # "从图 1 和图 2 可以看出，…，上述图表均来自公司年报。"
    result = analyse_document(load_document(path), path.read_bytes())
    assert [m.targets for m in result.mentions if m.page == 2 and m.text in ("图 1", "图 2")] == [["figure-1"], ["figure-2"]]
    chain = next(m for m in result.mentions if m.text == "上述图表")
    assert chain.targets == ["figure-1", "figure-2"]


def test_label_and_number_across_a_page_break(tmp_path):
    """'… shown in Figure' at a page's foot, '2 and …' at the next page's head (running header and
    page numbers between them in the PDF): one mention, its boxes on its own page only."""
    path = make_pdf(tmp_path / "pb.pdf", [
        ["Intro text here.", "", "Figure 2. A plot.", "", "The result is shown in Figure"],
        ["2 and in Table", "1 below.", "", "Table 1. Numbers."],
    ], header="Journal of Things, vol. 3", footer_page_numbers=True)
    doc = load_document(path)
    result = analyse_document(doc, path.read_bytes())
    fig = find(result, "Figure\n2", 1)
    assert fig.targets == ["figure-2"] and len(fig.boxes) == 1 and fig.boxes[0] == fig.bbox
    assert find(result, "Table\n1", 2).targets == ["table-1"]
