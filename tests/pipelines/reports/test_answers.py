"""Questions the report's resolved references answer exactly (pipelines.reports.answers): where a
figure or table is cited (its sentences, another work's figure left out), what it shows (its
caption), where it is, a label the report lacks; other questions go to evidence search."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.documents import load_document
from pipelines.reports import analyse_document
from pipelines.reports.answers import structure_answer
from tests.pipelines.reports.helpers import make_en_paper

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "reports"


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    path = make_en_paper(tmp_path_factory.mktemp("paper") / "paper.pdf")
    doc = load_document(path)
    return doc, analyse_document(doc, path.read_bytes())


def _quoted(doc, answer) -> None:
    assert answer.route == "structure" and answer.confidence == 1.0
    for s in answer.spans:
        assert doc.text[s.char_start:s.char_end] == s.text


def test_where_a_figure_is_cited_quotes_its_sentences_not_another_works_figure(paper):
    doc, result = paper
    fig2 = next(t for t in result.targets if t.kind == "figure" and t.number == "2")
    internal = [m for m in result.mentions if fig2.id in m.targets and m.resolution == "internal"]
    a = structure_answer(result, doc, "Where in the paper is its own Figure 2 cited?")
    _quoted(doc, a)
    assert a.status == "answered" and f"cited {len(internal)} time" in a.text
    assert a.value is not None and a.value.char_start == internal[0].span.char_start
    for m in internal:  # every citation inside one of the quoted sentences
        assert any(s.char_start <= m.span.char_start and m.span.char_end <= s.char_end for s in a.spans)
    external = [m for m in result.mentions if m.resolution == "external"]
    for m in external:  # "Fig. 2 of Young et al." is not this paper's Figure 2
        assert not any(s.char_start <= m.span.char_start < s.char_end for s in a.spans) or any(
            x.span.char_start >= s.char_start and x.span.char_end <= s.char_end for x in internal for s in a.spans)


def test_caption_page_and_missing_label(paper):
    doc, result = paper
    fig = next(t for t in result.targets if t.kind == "figure")
    a = structure_answer(result, doc, f"What does Figure {fig.number} show?")
    _quoted(doc, a)
    assert a.value is not None and a.value.char_start == fig.span.char_start and a.text
    a = structure_answer(result, doc, f"On which page is Figure {fig.number}?")
    assert a.text == f"{fig.label} is on page {fig.page}."
    a = structure_answer(result, doc, "Where is Figure 97 cited?")
    assert a.status == "not_stated" and "no Figure 97" in a.text and not a.spans
    assert structure_answer(result, doc, "What is the diffusion coefficient?") is None


def test_chinese_table_caption():
    doc = load_document(FIX / "zh-sustechthesis-example.pdf")
    result = analyse_document(doc, (FIX / "zh-sustechthesis-example.pdf").read_bytes())
    a = structure_answer(result, doc, "表 2-3 的标题是什么？")
    _quoted(doc, a)
    assert a.status == "answered" and "实验数据" in a.text
