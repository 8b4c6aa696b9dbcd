"""Question kinds and value spans (pipelines.text.values): what a question asks for, in English and
Chinese, and the values of that kind in a passage, with offsets into the passage itself."""

from __future__ import annotations

import pytest

from pipelines.text.values import question_kind, value_spans


@pytest.mark.parametrize("question, kind", [
    ("Which antibiotics was the patient given?", "drug"),
    ("Which antibiotic was started when the patient was admitted?", "drug"),  # the first cue wins, not "when"
    ("When was the antibiotic started?", "date"),
    ("2022年修订版何时施行？", "date"),
    ("How long does the customer have to pay an invoice?", "period"),
    ("受害人已年满七十五岁的，残疾赔偿金的计算年限是多少？", "period"),
    ("Which law governs the agreement?", "law"),
    ("Which claims are independent?", "claim"),
    ("What claim does claim 21 depend on?", "claim"),
    ("What was the white blood cell count on admission?", "lab"),
    ("入院查体时体温多少？", "lab"),
    ("入院时计划给予什么抗菌药物？", "drug"),
    ("What is the diffusion parameter value?", "number"),
    ("Who was the editor of this article?", "party"),
    ("What does section 5 say about audits?", "text"),
])
def test_question_kind(question, kind):
    assert question_kind(question) == kind


def _values(text: str, kind: str) -> list[str]:
    return [text[a:b] for a, b in value_spans(text, kind)]


def test_value_spans_by_kind():
    text = ("He was started on cefazolin 2 g IV and vancomycin, then linezolid. ALLERGIES: Penicillin. "
            "Within thirty (30) days of notice. Governed by the laws of the State of California. "
            "本解释自2022年5月1日起施行。依照《中华人民共和国民法典》处理。See claims 1 to 4. Hb 10.2 g/dL, BP 120/80.")
    assert _values(text, "drug") == ["cefazolin", "vancomycin", "linezolid", "Penicillin"]
    assert _values(text, "law") == ["the laws of the State of California", "《中华人民共和国民法典》"]
    assert _values(text, "date") == ["2022年5月1日"]
    assert _values(text, "claim") == ["claims 1 to 4"]
    assert "10.2 g/dL" in _values(text, "lab") and "120/80" in _values(text, "lab")
    assert _values(text, "text") == []


def test_chinese_periods_are_not_dates():
    text = "本解释自2022年5月1日起施行。腹痛3天，加重2周。六个月内, 30日内, 起诉后15个工作日"
    assert _values(text, "period") == ["3天", "2周", "六个月内", "30日内", "15个工作日"]


def test_offsets_stay_those_of_the_text_after_nfkc():
    text = "费用为１２０元，期限３０天。"  # full-width digits: matched after NFKC, offsets into the text as given
    for a, b in value_spans(text, "period") + value_spans(text, "money"):
        assert text[a:b] in ("３０天", "１２０元")
