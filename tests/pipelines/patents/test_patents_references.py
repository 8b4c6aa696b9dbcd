"""Every reference phrase form, English and Chinese, with the span of the referring words; and
words that are not reference phrases making no dependency."""

from __future__ import annotations

import pytest

from pipelines.patents.pipeline import analyse_text

BASE_EN = "".join(f"{n}. A device comprising a part {n}.\n" for n in range(1, 6))
BASE_ZH = "".join(f"{n}.一种装置，其特征在于，包括部件{n}。\n" for n in range(1, 6))

EN_CASES = [
    # (phrase inside claim 6, expected depends_on, expected reference text, kind)
    ("The device of claim 1, wherein the part is red.", [1], "claim 1", "single"),
    ("The device of claims 1 and 2, wherein x.", [1, 2], "claims 1 and 2", "conjunctive"),
    ("The device of claim 1 or 2, wherein x.", [1, 2], "claim 1 or 2", "alternative"),
    ("The device of claims 1, 3 or 5, wherein x.", [1, 3, 5], "claims 1, 3 or 5", "alternative"),
    ("The device of any one of claims 1 to 5, wherein x.", [1, 2, 3, 4, 5], "any one of claims 1 to 5", "alternative"),
    ("The device of any of claims 1-5, wherein x.", [1, 2, 3, 4, 5], "any of claims 1-5", "alternative"),
    ("The device of any one of claims 2 through 4, wherein x.", [2, 3, 4], "any one of claims 2 through 4", "alternative"),
    ("The device of claims 2 through 4, wherein x.", [2, 3, 4], "claims 2 through 4", "range"),
    ("The device of any preceding claim, wherein x.", [1, 2, 3, 4, 5], "any preceding claim", "all_preceding"),
    ("The device of any one of the preceding claims, wherein x.", [1, 2, 3, 4, 5], "any one of the preceding claims", "all_preceding"),
    ("The device as claimed in claim 3, wherein x.", [3], "as claimed in claim 3", "single"),
    ("Device according to one or more of the previous claims, wherein x.", [1, 2, 3, 4, 5],
     "according to one or more of the previous claims", "all_preceding"),
    ("The device according to claim 2 or claim 4, wherein x.", [2, 4], "according to claim 2 or claim 4", "alternative"),
    ("The device of the preceding claim, wherein x.", [5], "the preceding claim", "preceding"),
    ("The device of claim 1, 2, or 3, wherein x.", [1, 2, 3], "claim 1, 2, or 3", "alternative"),
    ("The device as recited in any one of claims 1-3 or 5, wherein x.", [1, 2, 3, 5],
     "as recited in any one of claims 1-3 or 5", "alternative"),
    ("The device of Claim 4, wherein x.", [4], "Claim 4", "single"),
    ("The device of claim\n2, wherein x.", [2], "claim\n2", "single"),
]


@pytest.mark.parametrize(("body", "expected", "ref_text", "kind"), EN_CASES)
def test_english_reference_forms(body, expected, ref_text, kind):
    result = analyse_text(BASE_EN + "6. " + body + "\n")
    claim = result.claims[-1]
    assert claim.number == 6
    assert claim.depends_on == expected
    assert not claim.independent
    refs = [r for r in claim.references if r.kind != "external"]
    assert len(refs) == 1
    assert refs[0].text == ref_text
    assert refs[0].kind == kind
    assert refs[0].span.text == ref_text
    assert result.claims[0].independent


ZH_CASES = [
    ("如权利要求1所述的装置，其特征在于，x。", [1], "如权利要求1所述的", "single"),
    ("根据权利要求1或2所述的装置，其特征在于，x。", [1, 2], "根据权利要求1或2所述的", "alternative"),
    ("如权利要求1至5中任一项所述的装置，其特征在于，x。", [1, 2, 3, 4, 5], "如权利要求1至5中任一项所述的", "alternative"),
    ("权利要求1-3任一项所述的装置，其特征在于，x。", [1, 2, 3], "权利要求1-3任一项所述的", "alternative"),
    ("如权利要求2-4之一所述的装置，其特征在于，x。", [2, 3, 4], "如权利要求2-4之一所述的", "alternative"),
    ("根据权利要求1~3所述的装置，其特征在于，x。", [1, 2, 3], "根据权利要求1~3所述的", "range"),
    ("根据权利要求１或３所述的装置，其特征在于，x。", [1, 3], "根据权利要求１或３所述的", "alternative"),
    ("根据前述任一项权利要求所述的装置，其特征在于，x。", [1, 2, 3, 4, 5], "根据前述任一项权利要求所述的", "all_preceding"),
    ("根据权利要求1和2所述的装置，其特征在于，x。", [1, 2], "根据权利要求1和2所述的", "conjunctive"),
]


@pytest.mark.parametrize(("body", "expected", "ref_text", "kind"), ZH_CASES)
def test_chinese_reference_forms(body, expected, ref_text, kind):
    result = analyse_text(BASE_ZH + "6." + body + "\n")
    assert result.language == "zh"
    claim = result.claims[-1]
    assert claim.number == 6
    assert claim.depends_on == expected
    assert [r.text for r in claim.references] == [ref_text]
    assert claim.references[0].kind == kind


@pytest.mark.parametrize(
    "body",
    [
        "A device comprising a part, wherein the part is 2 mm thick and the claim holder is 1.",
        "A device for filing a claim 5 days after grant.",  # "claim 5 days": a number with a unit
        "A device as described in claim 3 of U.S. Pat. No. 5,123,456, comprising a lid.",  # another patent
        "A method to claim priority, comprising steps 1 and 2.",
        "A device in which each claim is honoured, comprising 3 parts.",
    ],
)
def test_words_that_are_not_references(body):
    result = analyse_text(BASE_EN + "6. " + body + "\n")
    claim = result.claims[-1]
    assert claim.depends_on == []
    assert claim.independent
    assert all(r.kind == "external" for r in claim.references)


def test_external_reference_kept_as_external():
    result = analyse_text(BASE_EN + "6. A device as described in claim 3 of U.S. Pat. No. 5,123,456.\n")
    (ref,) = result.claims[-1].references
    assert ref.kind == "external" and ref.text == "as described in claim 3"


def test_method_using_apparatus_of_claim_is_dependent():
    result = analyse_text("1. An apparatus comprising a lid.\n2. A method comprising using the apparatus of claim 1.\n")
    assert result.claims[1].depends_on == [1]
    assert not result.claims[1].independent
    assert any(f.code == "category_mismatch" and f.claims[0] == 2 for f in result.findings)


def test_reference_in_body_and_preamble_both_count():
    result = analyse_text(
        "1. A lid.\n2. A box.\n3. The box of claim 2, wherein the box holds the lid of claim 1.\n"
    )
    assert result.claims[2].depends_on == [1, 2]
    assert [r.text for r in result.claims[2].references] == ["claim 2", "claim 1"]


@pytest.mark.parametrize(
    ("body", "expected", "ref_text"),
    [
        ("如請求項1所述之裝置，其中x。", [1], "如請求項1所述"),
        ("根據請求項1或2所述之裝置，其中x。", [1, 2], "根據請求項1或2所述"),
        ("如請求項1至3中任一項所述之裝置，其中x。", [1, 2, 3], "如請求項1至3中任一項所述"),
        ("如申請專利範圍第2項所述之裝置，其中x。", [2], "如申請專利範圍第2項所述"),
        ("請求項1に記載の装置。", [1], "請求項1に記載の"),
    ],
)
def test_traditional_chinese_and_japanese_forms(body, expected, ref_text):
    result = analyse_text(BASE_ZH + "6." + body + "\n")
    claim = result.claims[-1]
    assert claim.depends_on == expected
    assert [r.text for r in claim.references] == [ref_text]


def test_ampersand_and_other_english_forms():
    result = analyse_text(
        BASE_EN
        + "6. The device of claims 1 & 2, wherein x.\n"
        + "7. The device according to at least one of claims 1 to 3, wherein x.\n"
        + "8. Device according to one of the claims 2 to 4, characterized in that x.\n"
        + "9. The device as set forth in claim 8 or any one of claims 1-2, wherein x.\n"
    )
    assert {c.number: c.depends_on for c in result.claims[5:]} == {6: [1, 2], 7: [1, 2, 3], 8: [2, 3, 4], 9: [1, 2, 8]}
    assert result.claims[5].references[0].kind == "conjunctive"


MIXED_CASES = [
    # lists and ranges mixed in one phrase: exactly the claims named, each once, ascending
    ("The device as claimed in any one of claims 1 and 2 to 3, wherein x.", [1, 2, 3],
     "as claimed in any one of claims 1 and 2 to 3"),
    ("The device of any of claims 1-2, 4, or 5, wherein x.", [1, 2, 4, 5], "any of claims 1-2, 4, or 5"),
    ("The device of any one of claims 1 to 2 or 4 to 5, wherein x.", [1, 2, 4, 5], "any one of claims 1 to 2 or 4 to 5"),
    ("The device of any one of claim 1 and claims 3 to 4, wherein x.", [1, 3, 4], "any one of claim 1 and claims 3 to 4"),
    ("The device of any one of claims 1 to 3 and 2, wherein x.", [1, 2, 3], "any one of claims 1 to 3 and 2"),
    ("The device of any one of claims 4 to 2, wherein x.", [2, 3, 4], "any one of claims 4 to 2"),
    ("如权利要求1或2至3中任一项所述的装置，其特征在于，x。", [1, 2, 3], "如权利要求1或2至3中任一项所述的"),
    ("根据权利要求1至2和4中任一项所述的装置，其特征在于，x。", [1, 2, 4], "根据权利要求1至2和4中任一项所述的"),
    ("如权利要求1、3-4或5所述的装置，其特征在于，x。", [1, 3, 4, 5], "如权利要求1、3-4或5所述的"),
    ("如权利要求１或第２至第３项中任一项所述的装置，其特征在于，x。", [1, 2, 3], "如权利要求１或第２至第３项中任一项所述的"),
    ("如权利要求1或权利要求3至4所述的装置，其特征在于，x。", [1, 3, 4], "如权利要求1或权利要求3至4所述的"),
]


@pytest.mark.parametrize(("body", "expected", "ref_text"), MIXED_CASES)
def test_mixed_lists_and_ranges_name_exactly_their_claims(body, expected, ref_text):
    zh = "权利要求" in body
    result = analyse_text((BASE_ZH + "6." if zh else BASE_EN + "6. ") + body + "\n")
    claim = result.claims[-1]
    assert claim.number == 6 and claim.depends_on == expected
    (ref,) = claim.references
    assert ref.text == ref_text and ref.claims == expected and ref.kind == "alternative"
    assert claim.multiple_dependent and result.stats.n_multiple_dependent == 1
