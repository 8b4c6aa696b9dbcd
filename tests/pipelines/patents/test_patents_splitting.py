"""Finding the claims section and splitting it into claims: numbering forms, status markers,
cancelled claims and ranges, numbered items inside a claim, page furniture in pasted text."""

from __future__ import annotations

import pytest

from pipelines.patents.pipeline import analyse_text
from tests.pipelines.patents.helpers import deps

CLAIMS = "1. A device comprising a lid.\n2. The device of claim 1, wherein the lid is red.\n"


@pytest.mark.parametrize(
    "heading",
    ["What is claimed is:", "I claim:", "We claim:", "Claims", "CLAIMS", "Claims (2)", "The invention claimed is:",
     "What is claimed is", "权利要求书", "权利要求"],
)
def test_section_headings(heading):
    text = f"A DEVICE\n\nDescription of a device. Claim 7 mentions 3. things.\n\n{heading}\n\n{CLAIMS}\nAbstract\nA lid.\n"
    result = analyse_text(text)
    assert result.claims_section.method == "heading"
    assert result.claims_section.heading == heading.rstrip(":")
    assert result.claims_section.heading_span.text == heading.rstrip(":")
    assert deps(result) == {1: [], 2: [1]}
    assert result.claims[-1].text.endswith("red.")


def test_heading_on_same_line_as_first_claim():
    result = analyse_text("Some title\nWe claim: 1. A device comprising a lid.\n2. The device of claim 1, wherein x.\n")
    assert deps(result) == {1: [], 2: [1]}


def test_whole_input_and_end_headings():
    text = CLAIMS + "\nDESCRIPTION\n\nBACKGROUND\n3. The device of claim 2 is old.\n"
    result = analyse_text(text)
    assert result.claims_section.method == "whole_input"
    assert deps(result) == {1: [], 2: [1]}


def test_no_claims():
    result = analyse_text("Just some words about a device, nothing numbered.")
    assert not result.claims_section.found
    assert result.claims == []
    assert [f.code for f in result.findings] == ["no_claims_found"]


@pytest.mark.parametrize(
    "fmt",
    ["{n}. ", "{n} . ", "Claim {n}. ", "Claim {n}: ", "[Claim {n}] ", "{n}、", "{n}．", "{fw}．", "  {n}.  "],
)
def test_numbering_forms(fmt):
    fw = "０１２３４５６７８９"
    lines = []
    for n, body in ((1, "A device comprising a lid."), (2, "The device of claim 1, wherein x."),
                    (3, "The device of claim 2, wherein y.")):
        lines.append(fmt.format(n=n, fw=fw[n]) + body)
    result = analyse_text("\n".join(lines) + "\n")
    assert deps(result) == {1: [], 2: [1], 3: [2]}


def test_chinese_claims_without_newlines_between():
    text = "1.一种装置，其特征在于，包括盖。2.根据权利要求1所述的装置，其特征在于，所述盖为红色。3.根据权利要求2所述的装置，其特征在于，所述盖为圆形。"
    assert deps(analyse_text(text)) == {1: [], 2: [1], 3: [2]}


def test_english_claims_on_one_line():
    text = "1. A device comprising a lid. 2. The device of claim 1, wherein the lid is red. 3. The device of claim 2, wherein x."
    assert deps(analyse_text(text)) == {1: [], 2: [1], 3: [2]}


def test_status_markers_and_cancelled_claims():
    text = (
        "1. (Original) A device comprising a lid.\n"
        "2. (Canceled)\n"
        "3-5. (Canceled)\n"
        "6.-7. (Cancelled)\n"
        "8. (Currently Amended) The device of claim 1, wherein the lid is red.\n"
        "9. (Previously Presented) The device of claim 8, wherein the lid is round.\n"
        "10. (Withdrawn) A method comprising opening the lid.\n"
        "11. (New) The device of claim 1, wherein x.\n"
        "12. (Withdrawn - Currently Amended) The method of claim 10, wherein y.\n"
        "13. Cancelled.\n"
    )
    result = analyse_text(text)
    status = {c.number: c.status for c in result.claims}
    assert status == {
        1: "original", 2: "canceled", 3: "canceled", 4: "canceled", 5: "canceled", 6: "canceled", 7: "canceled",
        8: "currently amended", 9: "previously presented", 10: "withdrawn", 11: "new",
        12: "withdrawn - currently amended", 13: "canceled",
    }
    cancelled = [c.number for c in result.claims if c.cancelled]
    assert cancelled == [2, 3, 4, 5, 6, 7, 13]
    assert deps(result)[8] == [1] and deps(result)[12] == [10]
    c3 = next(c for c in result.claims if c.number == 3)
    assert c3.status_span.text == "Canceled" and c3.span.text == "3-5. (Canceled)"
    assert not any(f.code == "numbering_gap" for f in result.findings)
    assert result.claims[0].status_span.text == "Original"


def test_numbered_items_inside_a_claim_do_not_split():
    text = (
        "1. A device comprising:\n1. a housing;\n2. a lid; and\n3. a base.\n"
        "2. The device of claim 1, wherein the housing is red.\n"
        "3. A method comprising: 1. opening; 2. closing.\n4. The method of claim 3, wherein x.\n"
    )
    result = analyse_text(text)
    assert deps(result) == {1: [], 2: [1], 3: [], 4: [3]}
    assert "3. a base." in result.claims[0].text


def test_capitalised_list_items_after_semicolons_do_not_split():
    text = "1. A kit comprising:\n1. A housing;\n2. A lid;\n3. A base.\n2. The kit of claim 1, wherein x.\n"
    assert deps(analyse_text(text)) == {1: [], 2: [1]}


def test_decimal_numbers_and_line_wrapped_references_do_not_split():
    text = (
        "1. A device having a length of\n2.5 mm and a width of\n3. mm.\n"
        "2. The device according to\nclaim 1, wherein x.\n"
    )
    assert deps(analyse_text(text)) == {1: [], 2: [1]}


def test_numbering_gap_is_reported_and_claims_still_found():
    result = analyse_text("1. A lid.\n2. The lid of claim 1, wherein x.\n4. The lid of claim 2, wherein y.\n")
    assert deps(result) == {1: [], 2: [1], 4: [2]}
    gap = [f for f in result.findings if f.code == "numbering_gap"]
    assert len(gap) == 1 and gap[0].claims == [4]


def test_page_furniture_inside_pasted_text():
    text = (
        "US 7,156,074 B2\nWhat is claimed is:\n"
        "1. A throttle apparatus, comprising:\na throttle valve; and\na throttle shaft.\n"
        "5\n"
        "2. The throttle apparatus according to claim 1, wherein said\n"
        "10\n"
        "throttle shaft is\n\n- 3 -\nUS 7,156,074 B2\nlong.\n"
        "Page 4 of 9\n"
        "3. The throttle apparatus of claim 2, wherein the valve is metal.\n"
        "第 2 页 共 3 页\n"
        "4. The throttle apparatus of claim 3, wherein the shaft is steel.\n"
    )
    result = analyse_text(text)
    assert deps(result) == {1: [], 2: [1], 3: [2], 4: [3]}
    c2 = result.claims[1]
    assert "US 7,156,074" not in c2.text and "- 3 -" not in c2.text and "long." in c2.text
    assert "Page 4" not in c2.text
    assert not any(f.code == "antecedent_basis" for f in result.findings)


def test_repeated_running_header_is_furniture():
    header = "Patent Application Publication   Jan. 5, 2006   Sheet 1 of 3"
    text = (
        f"1. A device comprising a lid.\n{header}\n2. The device of claim 1, wherein the lid\n"
        f"{header.replace('1 of 3', '2 of 3')}\nis red.\n"
    )
    result = analyse_text(text)
    assert deps(result) == {1: [], 2: [1]}
    assert "Sheet" not in result.claims[1].text


@pytest.mark.parametrize("tail", ["Patentansprüche\n\n1. Vorrichtung nach Anspruch 2.\n", "Revendications\n1. Dispositif.\n",
                                  "Description\n\n1. Field\nThe device of claim 2.\n", "* * * * *\n",
                                  "Priority And Related Applications (3)\n", "Cited By (12)\n"])
def test_section_ends_at_other_parts(tail):
    result = analyse_text("Claims\n\n" + CLAIMS + "\n" + tail)
    assert deps(result) == {1: [], 2: [1]}
    assert result.claims[-1].text.rstrip().endswith("red.")


def test_status_markers_without_period_after_the_number():
    result = analyse_text(
        "1. (Original) A lid.\n2 (Canceled)\n3-5 (Canceled)\n6 (Currently Amended) The lid of claim 1, wherein x.\n"
        "Claims 7-9 (Withdrawn)\nClaim 10 (New): The lid of claim 6.\n"
    )
    assert [(c.number, c.status) for c in result.claims] == [
        (1, "original"), (2, "canceled"), (3, "canceled"), (4, "canceled"), (5, "canceled"), (6, "currently amended"),
        (7, "withdrawn"), (8, "withdrawn"), (9, "withdrawn"), (10, "new")]
    assert deps(result)[6] == [1] and deps(result)[10] == [6]
    assert not any(f.code == "numbering_gap" for f in result.findings)


def test_description_with_numbered_headings_before_the_claims():
    text = (
        "1. Field of the Invention\nThe invention relates to lids.\n2. Description of the Related Art\n"
        "A lid of claim 3 of an old patent is known.\n\nWhat is claimed is:\n" + CLAIMS
    )
    result = analyse_text(text)
    assert result.claims_section.method == "heading"
    assert deps(result) == {1: [], 2: [1]}
