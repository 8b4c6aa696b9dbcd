"""Questions the clause alignment answers exactly (pipelines.contracts.answers): what changed in a
clause (English and Chinese numbering), which clauses were added, a clause neither version has;
every quote is the clause's own text in its own version; other questions go to evidence search."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.contracts import ContractsPipeline
from pipelines.contracts.answers import structure_answer
from pipelines.documents import load_document

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "contracts"


def _pair(name: str):
    docs = [load_document(FIX / name / f"v{i}.txt") for i in (1, 2)]
    return docs, ContractsPipeline().run_documents(docs)


def _quoted(docs, answer) -> None:
    texts = {d.doc_id: d.text for d in docs}
    assert answer.route == "structure" and answer.confidence == 1.0
    for s in answer.spans:
        assert texts[s.doc_id][s.char_start:s.char_end] == s.text


@pytest.fixture(scope="module")
def csa():
    return _pair("en-commonpaper-csa-1.0-to-1.1")


def test_what_changed_in_a_clause(csa):
    docs, result = csa
    a = structure_answer(result, docs, "What changed in section 12.3?")
    _quoted(docs, a)
    assert a.text == "Section 12.3: «Disclosing Party» → «Discloser»"
    assert [s.doc_id for s in a.spans] == ["v2.txt", "v1.txt"] and a.value.text == "Discloser"
    same = structure_answer(result, docs, "Was clause 5.1 amended?")
    assert same.text == "Clause 5.1 is the same in both versions."
    none = structure_answer(result, docs, "What changed in section 99?")
    assert none.status == "not_stated" and not none.spans
    assert structure_answer(result, docs, "Which law governs the agreement?") is None


def test_chinese_article_numbers_in_either_numeral():
    docs, result = _pair("zh-interpretation-personal-injury-2020-to-2022")
    for q in ("第二十四条有什么变化？", "第24条修改了什么？"):
        a = structure_answer(result, docs, q)
        _quoted(docs, a)
        assert "«2004» → «2022»" in a.text and a.spans[0].text.startswith("第二十四条")
    added = structure_answer(result, docs, "新增了哪些条款？")
    _quoted(docs, added)
    assert added.text.startswith("新增的条款：")
