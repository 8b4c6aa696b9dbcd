"""Category, preamble, transitional phrase and body elements of claims, with their spans."""

from __future__ import annotations

import pytest

from pipelines.patents.pipeline import analyse_text


def first_claim(text):
    return analyse_text(text).claims[0]


@pytest.mark.parametrize(
    ("claim", "category"),
    [
        ("1. A method of milking an animal, comprising milking.", "method"),
        ("1. A computer-implemented method comprising: linearizing a model.", "method"),
        ("1. A process for making steel, comprising heating iron.", "method"),
        ("1. A throttle apparatus, comprising: a valve.", "apparatus"),
        ("1. Shoe structure comprising a first subset.", "apparatus"),
        ("1. A system for sorting mail, comprising a belt.", "apparatus"),
        ("1. A pharmaceutical composition comprising aspirin.", "composition"),
        ("1. A compound of formula (I), wherein R is methyl.", "composition"),
        ("1. A non-transitory computer-readable medium storing instructions that cause a processor to perform a method.",
         "medium"),
        ("1. A computer program product comprising a storage medium.", "medium"),
        ("1. Use of aspirin for treating headache.", "use"),
        ("1. The use of aspirin according to claim 3 for treating pain.", "use"),
        ("1. An apparatus for performing a method of sorting, comprising a belt.", "apparatus"),
        ("1. In an electronic device providing a modeling environment, a method for analyzing a model, comprising: x.",
         "method"),
        ("1.一种生物体签名系统，其特征在于，包括处理器。", "apparatus"),
        ("1.一种肢体检测放射影像装置，其特征在于，包括底板。", "apparatus"),
        ("1.一种用于制备催化剂的方法，其特征在于，包括以下步骤。", "method"),
        ("1.一种药物组合物，由A和B组成。", "composition"),
        ("1.一种计算机可读存储介质，其上存储有程序。", "medium"),
        ("1.化合物A在制备药物中的用途。", "use"),
    ],
)
def test_category(claim, category):
    assert first_claim(claim).category == category


@pytest.mark.parametrize(
    ("claim", "preamble", "transition", "kind"),
    [
        ("1. A throttle apparatus, comprising:\na valve; and\na shaft.", "A throttle apparatus", "comprising", "comprising"),
        ("1. A composition consisting of water and salt.", "A composition", "consisting of", "consisting_of"),
        ("1. A composition consisting essentially of water.", "A composition", "consisting essentially of",
         "consisting_essentially_of"),
        ("1. A device including a lid.", "A device", "including", "including"),
        ("1. Shoe structure comprising a sole, characterized in that the sole is soft.", "Shoe structure", "comprising",
         "comprising"),
        ("1. A device having a lid.", "A device", "having", "having"),
        ("1. A method of making an article including a widget, the method comprising: heating.",
         "A method of making an article including a widget, the method", "comprising", "comprising"),
        ("1.一种装置，其特征在于，包括底板。", "一种装置", "其特征在于", "characterized"),
        ("1.一种装置，包括底板和支架。", "一种装置", "包括", "comprising"),
        ("1.一种组合物，由水和盐组成。", "一种组合物", "由", "consisting_of"),
    ],
)
def test_preamble_and_transition(claim, preamble, transition, kind):
    c = first_claim(claim)
    assert c.preamble.text == preamble
    assert c.transition.text == transition
    assert c.transition_kind == kind


def test_dependent_claim_transition_after_reference():
    result = analyse_text(
        "1. A device comprising a lid.\n2. The device of claim 1, wherein the lid comprises: a hinge; and a latch.\n"
        "3. Shoe structure according to claim 1, characterized in that the lid is red.\n"
        "4. The device of claim 1, further comprising a base.\n"
    )
    c2, c3, c4 = result.claims[1:]
    assert (c2.preamble.text, c2.transition.text, c2.transition_kind) == ("The device of claim 1", "wherein", "wherein")
    assert c3.transition.text == "characterized in that" and c3.transition_kind == "characterized"
    assert c4.transition.text == "further comprising" and c4.transition_kind == "comprising"
    assert [e.text for e in c2.elements] == ["the lid comprises", "a hinge", "a latch"]


def test_elements_split_on_semicolons_lines_and_markers():
    c = first_claim(
        "1. A method comprising the steps of: (a) heating a bath; (b) cooling the bath, and\n"
        "c) draining the bath.\n"
    )
    assert [e.text for e in c.elements] == ["the steps of", "(a) heating a bath", "(b) cooling the bath, and",
                                            "c) draining the bath"]
    c = first_claim("1. A throttle apparatus, comprising:\na throttle valve;\na shaft which supports said valve; and\na motor.")
    assert [e.text for e in c.elements] == ["a throttle valve", "a shaft which supports said valve", "a motor"]


def test_chinese_elements_split_on_full_width_semicolons():
    c = first_claim("1.一种装置，其特征在于，包括：底板；支架；以及电机。")
    assert [e.text for e in c.elements] == ["包括", "底板", "支架", "以及电机"]


def test_reference_numerals_are_not_element_markers():
    c = first_claim("1. A shoe comprising a first subset (10), a second subset (20) and an insole (11).")
    assert [e.text for e in c.elements] == ["a first subset (10), a second subset (20) and an insole (11)"]


def test_claim_without_transition_has_body_as_element():
    result = analyse_text("1. A lid.\n2. A lid according to claim 1 being red.\n")
    c = result.claims[1]
    assert c.transition is None and c.preamble is None
    assert [e.text for e in c.elements] == ["A lid according to claim 1 being red"]


def test_chinese_elements_split_before_said_clauses_without_semicolons():
    c = first_claim("1.一种装置，其特征在于，包括底板(1)和支架(2)，所述底板(1)上固定有电机，所述支架(2)为钢制，其中电机为直流电机。")
    assert [e.text for e in c.elements] == ["包括底板(1)和支架(2)", "所述底板(1)上固定有电机", "所述支架(2)为钢制", "其中电机为直流电机"]
