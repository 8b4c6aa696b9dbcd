"""One or more hand-written claim sets per finding code; each asserts the code, the claims and
the span, and a clean claim set asserts the absence of findings."""

from __future__ import annotations

from pipelines.patents.pipeline import analyse_text
from tests.pipelines.patents.helpers import load_text


def codes(result, code):
    return [f for f in result.findings if f.code == code]


def test_clean_claim_set_has_no_findings():
    text = (
        "1. A device comprising a housing and a lid.\n"
        "2. The device of claim 1, wherein the lid is hinged to the housing.\n"
        "3. The device of claim 1 or 2, wherein the housing has a first wall (10).\n"
        "4. The device of claim 3, wherein the first wall (10) is thick.\n"
    )
    result = analyse_text(text)
    assert result.findings == []
    assert result.stats.is_dag


def test_missing_reference():
    result = analyse_text("1. A lid.\n2. The lid of claim 7, wherein x.\n")
    (f,) = codes(result, "missing_reference")
    assert f.claims == [2, 7] and f.severity == "error" and f.spans[0].text == "claim 7"
    assert result.unattached == [2]


def test_missing_reference_any_preceding_in_first_claim():
    result = analyse_text("1. A lid according to any preceding claim.\n")
    (f,) = codes(result, "missing_reference")
    assert f.claims == [1]


def test_forward_reference():
    result = analyse_text("1. A lid.\n2. The lid of claim 3, wherein x.\n3. The lid of claim 1, wherein y.\n")
    (f,) = codes(result, "forward_reference")
    assert f.claims == [2, 3] and f.spans[0].text == "claim 3"
    assert not codes(result, "cycle")


def test_self_reference():
    result = analyse_text("1. A lid.\n2. The lid of claim 2, wherein x.\n")
    (f,) = codes(result, "self_reference")
    assert f.claims == [2]
    assert result.claims[1].depends_on == []


def test_cycle():
    result = analyse_text(
        "1. A lid.\n2. The lid of claim 3, wherein x.\n3. The lid of claim 2, wherein y.\n4. The lid of claim 1, wherein z.\n"
    )
    (f,) = codes(result, "cycle")
    assert f.claims == [2, 3]
    assert {s.text for s in f.spans} == {"claim 3", "claim 2"}
    assert not result.stats.is_dag
    assert sorted(result.unattached) == [2, 3]


def test_multiple_dependent_on_multiple():
    result = analyse_text(
        "1. A lid.\n2. The lid of claim 1, wherein x.\n3. The lid of claim 1 or 2, wherein y.\n"
        "4. The lid of any one of claims 1 to 3, wherein z.\n5. The lid of claim 3, wherein w.\n"
    )
    (f,) = codes(result, "multiple_dependent_on_multiple")
    assert f.claims == [4, 3] and f.spans[0].text == "any one of claims 1 to 3"
    # claim 5 depends on a multiple dependent claim but is not itself multiple dependent: allowed
    assert all(x.claims[0] != 5 for x in result.findings)


def test_conjunctive_multiple_dependency_us_style():
    result = analyse_text("1. A lid.\n2. The lid of claim 1, wherein x.\n3. The lid of claims 1 and 2, wherein y.\n")
    (f,) = codes(result, "conjunctive_multiple_dependency")
    assert f.claims == [3, 1, 2] and f.severity == "error" and "1.75(c)" in f.message
    assert f.spans[0].text == "claims 1 and 2"


def test_alternative_wording_is_not_conjunctive():
    result = analyse_text("1. A lid.\n2. The lid of claim 1, wherein x.\n3. The lid of either of claims 1 and 2, wherein y.\n")
    assert not codes(result, "conjunctive_multiple_dependency")


def test_category_mismatch():
    result = analyse_text(
        "1. An apparatus comprising a pump.\n2. A method of operating the apparatus of claim 1, comprising starting the pump.\n"
        "3. The method of claim 2, wherein the pump is started twice.\n"
    )
    (f,) = codes(result, "category_mismatch")
    assert f.claims == [2, 1] and f.severity == "info"
    assert result.claims[1].category == "method" and result.claims[0].category == "apparatus"
    assert not result.claims[1].independent


def test_category_mismatch_chinese():
    result = analyse_text("1.一种装置，其特征在于，包括泵。\n2.一种使用权利要求1所述装置的方法，其特征在于，包括启动所述泵。\n")
    (f,) = codes(result, "category_mismatch")
    assert f.claims == [2, 1]


def test_reference_to_cancelled():
    result = analyse_text("1. A lid.\n2. (Canceled)\n3. The lid of claim 2, wherein x.\n")
    (f,) = codes(result, "reference_to_cancelled")
    assert f.claims == [3, 2] and f.spans[0].text == "claim 2"
    assert result.unattached == [3]


def test_antecedent_basis_english():
    result = analyse_text(
        "1. A device comprising a housing (10) and a first lid.\n"
        "2. The device of claim 1, wherein the housing (10) is red and said lid is blue.\n"
        "3. The device of claim 2, wherein the hinge is steel.\n"
        "4. The device of claim 1, wherein the first lid and the same housing are joined, the housings being thin.\n"
        "5. The device of claim 1, wherein the second lid is green.\n"
    )
    found = codes(result, "antecedent_basis")
    assert [(f.claims, f.spans[0].text) for f in found] == [([3], "the hinge"), ([5], "the second lid")]
    assert found[0].severity == "warning"


def test_antecedent_basis_ordinals():
    result = analyse_text(
        "1. A device comprising first and second housing portions, and a first lid.\n"
        "2. The device of claim 1, wherein the second housing portion is red and the first lid is blue.\n"
        "3. The device of claim 2, wherein the third housing portion is green.\n"
    )
    found = codes(result, "antecedent_basis")
    assert [(f.claims, f.spans[0].text) for f in found] == [([3], "the third housing portion")]


def test_antecedent_basis_found_in_grandparent_only():
    result = analyse_text(
        "1. A device comprising a spring.\n2. The device of claim 1, further comprising a lid.\n"
        "3. The device of claim 2, wherein the spring is steel and the lid is red.\n"
    )
    assert not codes(result, "antecedent_basis")


def test_antecedent_basis_chinese():
    result = analyse_text(
        "1.一种装置，其特征在于，包括底板(1)和支架。\n2.根据权利要求1所述的装置，其特征在于，所述底板(1)为圆形，所述电机为直流电机。\n"
    )
    found = codes(result, "antecedent_basis")
    assert [f.spans[0].text for f in found] == ["所述电机"]


def test_findings_sorted_and_spans_match():
    result = analyse_text("1. A lid.\n2. The lid of claim 9, wherein x.\n3. The lid of claim 3 and the cap.\n")
    keys = [(f.claims[0], f.code) for f in result.findings]
    assert keys == sorted(keys, key=lambda k: (k[0],))
    assert {f.code for f in result.findings} >= {"missing_reference", "self_reference"}


def test_multiple_dependent_on_multiple_indirectly():
    result = analyse_text(
        "1. A lid.\n2. The lid of claim 1, wherein x.\n3. The lid of claim 1 or 2, wherein y.\n"
        "4. The lid of claim 3, wherein z.\n5. The lid of claim 1 or 4, wherein w.\n6. The lid of claim 1 or 2, wherein v.\n"
    )
    (f,) = codes(result, "multiple_dependent_on_multiple")
    assert f.claims == [5, 4] and "through claim 4" in f.message and f.spans[0].text == "claim 1 or 4"


def test_antecedent_basis_through_the_chain_us7472552():
    """US7472552: claim 5 (chain 5 -> 4 -> 1) says "the housing cover", introduced only in claim 3;
    claim 7 (chain 7 -> 6 -> 5 -> 4 -> 1) says "the inlet", also introduced in claim 3."""
    result = analyse_text(load_text("US7472552"))
    found = {f.claims[0]: f for f in codes(result, "antecedent_basis")}
    assert found[5].spans[0].text == "the housing cover" and found[5].severity == "warning"
    assert "claims it depends on (1, 4)" in found[5].message and "introduced in claim 3" in found[5].message
    assert found[7].spans[0].text == "the inlet" and "introduced in claim 3" in found[7].message
    assert 3 not in found and 4 not in found  # claim 3 introduces its cover itself


def test_antecedent_basis_term_introduced_outside_the_chain():
    result = analyse_text(
        "1. A device comprising a housing and a lid.\n"
        "2. The device of claim 1, further comprising a housing cover.\n"
        "3. The device of claim 1, wherein the housing cover is red.\n"
        "4. The device of claim 2, wherein the housing cover is blue.\n"
        "5. The device of claim 1, wherein the housing lid is green.\n"
    )
    found = codes(result, "antecedent_basis")
    assert [(f.claims, f.spans[0].text) for f in found] == [([3], "the housing cover")]
    assert "introduced in claim 2" in found[0].message


def test_inherent_part_is_info_not_warning_us6981466():
    """US6981466 claim 1: "the udder of the animal", the animal introduced by "milking an animal"."""
    result = analyse_text(load_text("US6981466"))
    claim1 = [f for f in result.findings if f.claims == [1]]
    udder = [f for f in claim1 if "udder" in f.spans[0].text]
    assert [(f.code, f.severity, f.spans[0].text) for f in udder] == [
        ("antecedent_basis_inherent", "info", "the udder of the animal")
    ]
    assert not [f for f in codes(result, "antecedent_basis") if "udder" in f.spans[0].text]


def test_inherent_part_needs_an_owner_with_basis():
    result = analyse_text(
        "1. A device comprising a frame.\n"
        "2. The device of claim 1, wherein the cross plate of the frame is red and the base of a column is blue.\n"
        "3. The device of claim 1, wherein the hinge of the door is steel.\n"
    )
    inherent = [(f.claims, f.spans[0].text) for f in codes(result, "antecedent_basis_inherent")]
    assert inherent == [([2], "the cross plate of the frame"), ([2], "the base of a column")]
    assert [(f.claims, f.spans[0].text) for f in codes(result, "antecedent_basis")] == [([3], "the hinge"), ([3], "the door")]


def test_antecedent_basis_chinese_term_introduced_outside_the_chain():
    text = (
        "1.一种风扇组件，包括壳体和风扇。\n"
        "2.根据权利要求1所述的风扇组件，其特征在于，所述壳体上设有壳体盖，所述壳体盖上开设有进风口。\n"
        "3.根据权利要求1所述的风扇组件，其特征在于，所述壳体的两侧设有安装筋。\n"
        "4.根据权利要求3所述的风扇组件，其特征在于，所述壳体盖上设有紧固筋，所述风扇固定于所述安装筋。\n"
        "5.根据权利要求2所述的风扇组件，其特征在于，所述壳体盖为塑料。\n"
    )
    found = codes(analyse_text(text), "antecedent_basis")
    assert [(f.claims, f.spans[0].text) for f in found] == [([4], "所述壳体盖")]
    assert "introduced in claim 2" in found[0].message and "(1, 3)" in found[0].message
