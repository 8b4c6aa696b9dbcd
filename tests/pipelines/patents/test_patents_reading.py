"""What the attorney reads: each dependent claim shown by what it adds, an element ending in a
colon holding its items, and the claim counts a USPTO fee calculation needs."""

from __future__ import annotations

from pipelines.patents import PatentResult, analyse_text
from pipelines.patents.model import SCHEMA_VERSION
from tests.pipelines.patents.helpers import iter_spans, load_text


def _nodes(result: PatentResult):
    stack = list(result.trees)
    while stack:
        t = stack.pop()
        yield t
        stack.extend(t.children)


def test_dependent_claims_show_their_limitation_us7472552():
    result = analyse_text(load_text("US7472552"))
    claim2 = result.claims[1]
    assert claim2.limitation.text.startswith("wherein the first and second housing portions have concavo-convex")
    assert claim2.limitation.text.endswith("provisionally assembling the housing portions")
    labels = {t.number: t.label for t in _nodes(result)}
    assert labels[1] == "A method of controlling an ice maker, the method"
    assert labels[5].startswith("wherein one of the housing portions of the housing is formed") and labels[5].endswith("…")
    assert len(labels[5].split()) <= 13
    assert not any(label.startswith("The method of claim") for label in labels.values())
    assert result.claims[0].limitation is None  # an independent claim adds nothing to a parent


def test_chinese_dependent_claims_show_what_follows_the_characterising_phrase():
    result = analyse_text(load_text("CN110326254A"))
    labels = {t.number: t.label for t in _nodes(result)}
    assert labels[2].startswith("其特征在于") and "所述处理器" in labels[2]
    assert labels[1].startswith("一种生物体签名系统")
    assert result.claims[1].limitation.text.startswith("其特征在于")


def test_sub_elements_are_nested_us7472552():
    claim1 = analyse_text(load_text("US7472552")).claims[0]
    tops = [p.span.text.split()[0] for p in claim1.parts]
    assert tops == ["operating", "monitoring", "stopping", "performing", "detecting", "wherein"]
    holder = claim1.parts[-1]
    assert holder.span.text == "wherein the fan assembly comprises"
    assert [" ".join(p.span.text.split()[:3]) for p in holder.parts] == [
        "a housing including", "a box fan", "mounting hooks for"
    ]
    assert len(claim1.elements) == 9  # the flat list keeps every element


def test_a_group_ends_at_its_and_item():
    result = analyse_text(
        "1. A device comprising:\na frame comprising:\na first rail;\na second rail; and\na cross bar; and\na lid.\n"
    )
    parts = result.claims[0].parts
    assert [p.span.text for p in parts] == ["a frame comprising", "a lid"]
    assert [p.span.text for p in parts[0].parts] == ["a first rail", "a second rail", "a cross bar"]


def test_claim_counts_by_the_uspto_rule():
    text = (
        "1. A lid.\n2. The lid of claim 1, wherein x.\n3. The lid of claim 1 or 2, wherein y.\n"
        "4. The lid of claim 3, wherein z.\n5. The lid of claims 1 and 2, wherein w.\n6. A cap.\n"
    )
    k = analyse_text(text).stats.claim_counts
    assert "37 CFR 1.75(c)" in k.rule and "USPTO" in k.rule
    assert (k.independent, k.total, k.multiple_dependent) == (2, 6, 2)
    # 1, 2, 6: one each; 3 refers to two claims; 4 depends on 3; 5 is improper ("and"): one
    assert k.counted_as == {3: 2, 4: 2} and k.total_for_fees == 8
    assert k.multiple_dependent_fee and k.excess_total == 0 and k.excess_independent == 0


def test_claim_counts_patent_bar_example():
    """15 claims (claim 1 independent, 2-15 on claim 1) and 16-27 each "any of claims 5-15":
    each of 16-27 counts as 11, 147 claims for fees (MPEP 608.01(n))."""
    text = "1. A lid.\n" + "".join(f"{n}. The lid of claim 1, wherein x{n}.\n" for n in range(2, 16))
    text += "".join(f"{n}. The lid of any of claims 5-15, wherein y{n}.\n" for n in range(16, 28))
    k = analyse_text(text).stats.claim_counts
    assert k.total == 27 and k.total_for_fees == 147 and k.excess_total == 127
    assert k.counted_as == {n: 11 for n in range(16, 28)}


def test_claim_counts_on_the_corpus_us7156074():
    result = analyse_text(load_text("US7156074"))
    k = result.stats.claim_counts
    claim5 = result.claims[4]
    assert claim5.multiple_dependent and k.counted_as == {5: len(claim5.depends_on)}
    assert k.total_for_fees == 4 + len(claim5.depends_on) and k.multiple_dependent_fee


def test_export_carries_the_new_fields_and_version():
    result = analyse_text(load_text("US7472552"))
    assert SCHEMA_VERSION == "patents/1.4" and result.schema_version == "patents/1.4"
    again = PatentResult.model_validate_json(result.model_dump_json())
    assert again == result
    for s in iter_spans(result):
        assert s.text
    parts = [p for c in result.claims for p in c.parts]
    assert all(p.span.char_start < p.span.char_end for p in parts)
