"""What a lawyer noticed on the real pairs: material ranking on the Chinese interpretation, words
(not characters) in a Chinese redline, misleading flags, reflow that is not material."""

from __future__ import annotations

import pytest

from benchmarks.eval.contracts_rank import ranks
from pipelines.contracts.pipeline import compare_texts
from pipelines.contracts.redline import tokenize
from tests.pipelines.contracts.data import load_pair
from tests.pipelines.contracts.test_alterations import renumber_section_1

ZH = "zh-interpretation-personal-injury-2020-to-2022"
AMENDED = ["第十二条", "第十五条", "第十七条", "第十八条", "第二十二条"]  # the rural-resident standard removed


@pytest.fixture(scope="module")
def zh_result():
    a, b, truth = load_pair(ZH)
    return compare_texts(a, b), truth


def test_chinese_amendments_are_material_and_first(zh_result) -> None:
    result, truth = zh_result
    items = {s.a: (k, s) for k, s in enumerate(result.summary) if s.a == s.b}
    reflow = [k for k, s in enumerate(result.summary) if s.change == "split" and "layout only" in s.text]
    assert reflow, "the reflowed title block is reported as layout only"
    for label in AMENDED:
        k, item = items[label]
        assert item.material and "standard" in item.kinds, item.text
        assert all(k < r for r in reflow), (label, item.text)
    assert not any(result.summary[r].material for r in reflow)
    r = ranks(truth, result)
    assert r["marked_material"] == r["true_material"] == 6
    assert r["worst_rank"] <= 8


def test_chinese_redline_is_by_words(zh_result) -> None:
    result, _ = zh_result
    row = next(r for r in result.alignment if r.a == "第十二条")
    deleted = [o.a_span.text for o in row.diff if o.op == "delete"]
    assert deleted == ["或者农村居民人均纯收入"]
    words = [t.norm for t in tokenize("城镇居民人均可支配收入或者农村居民人均纯收入标准", 0, 25, "zh", words=True)]
    assert "城镇居民" in words and "农村居民" in words


@pytest.mark.parametrize("heading,material", [("", False), ("Service Credits. ", True)])
def test_split_is_material_only_when_its_words_change(csa: str, heading: str, material: bool) -> None:
    """Clause 1.2 of the real CSA cut in two: the same words laid out again are not material; a
    split that also adds words (a new heading) is."""
    line = next(x for x in csa.splitlines() if x.startswith("1.2 "))
    cut = line.index(" Any credits earned")
    b = renumber_section_1(csa, 3).replace(line, line[:cut] + "\n\n1.3 " + heading + line[cut + 1:])
    result = compare_texts(csa, b)
    splits = [s for s in result.summary if s.change == "split"]
    assert len(splits) == 2
    assert any(s.material for s in splits) is material, [s.text for s in splits]


@pytest.fixture(scope="module")
def tos():
    a, b, _ = load_pair("en-github-tos-2017-10-to-2018-05")
    return compare_texts(a, b)


def test_flags_on_tos_e3_name_aligned_words_and_the_deleted_disclaimer(tos) -> None:
    """Clause E.3 of the GitHub ToS: a bullet with a liability disclaimer was deleted and an
    unrelated phrase inserted. The flags say so, and pair no words across the two changes."""
    row = next(r for r in tos.alignment if r.a == "E.3")
    details = [(f.kind, f.detail) for f in row.flags]
    assert any(k == "disclaimer" and d.startswith("deleted “") and "sole risk" in d for k, d in details)
    e3 = next(s for s in tos.summary if s.a == "E.3")
    assert e3.material and "disclaimer: deleted “Your use of third-party applications is at your sole risk" in e3.text
    assert not any(k == "negation" for k, _ in details), details  # the "not" belongs to the deleted disclaimer
    assert not any(k == "obligation" and "→" in d and "—" not in d for k, d in details), details  # no may → required
    assert not any(k == "defined_term" and "Your → Service" in d for k, d in details), details
    assert not any("required" in d for _, d in details), details  # "when access is required to maintain" binds no one
    dis = next(f for f in row.flags if f.kind == "disclaimer")
    assert dis.a_span is not None and "sole risk" in dis.a_span.text and dis.b_span is None


def test_capitalised_defined_term_is_flagged_alike_in_singular_and_plural(tos) -> None:
    caps = [f for r in tos.alignment for f in r.flags if f.kind == "defined_term" and "capitalised" in f.detail]
    singular = [f for f in caps if f.detail.startswith("account → Account")]
    plural = [f for f in caps if f.detail.startswith("accounts → Accounts")]
    assert singular and plural
    assert {f.material for f in caps} == {False}
    assert {f.a_span.text for f in singular} == {"account"} and {f.a_span.text for f in plural} == {"accounts"}
    # a clause whose only change is that capitalisation is not material
    e1 = next(s for s in tos.summary if s.a == "E.1")
    assert not e1.material


def _reuse_number(new_body: str) -> tuple[str, str]:
    """The real GitHub ToS with section B.4 ("Additional Terms") keeping its number "4." under a new
    Confidentiality text (taken from the real CSA)."""
    a, _, _ = load_pair("en-github-tos-2017-10-to-2018-05")
    start = a.index("4. Additional Terms")
    end = a.index("C. Acceptable Use", start)
    return a, a[:start] + "4. Confidentiality\n\n" + new_body + "\n\n" + a[end:]


def test_reused_number_with_new_text_is_deleted_and_added(csa: str) -> None:
    body = next(x for x in csa.splitlines() if x.startswith("12.1 ")).removeprefix("12.1 ")
    a, b = _reuse_number(body)
    rows = [(r.a, r.b, r.change) for r in compare_texts(a, b).alignment if "B.4" in (r.a, r.b)]
    assert sorted(rows, key=str) == sorted([("B.4", None, "deleted"), (None, "B.4", "added")], key=str), rows
    # the same number kept with its own text lightly edited is still one modified clause
    a2, _, _ = load_pair("en-github-tos-2017-10-to-2018-05")
    b2 = a2.replace("and you agree to its provisions.", "and you agree to all of its provisions.")
    rows = [(r.a, r.b, r.change) for r in compare_texts(a2, b2).alignment if "B.4" in (r.a, r.b)]
    assert rows == [("B.4", "B.4", "modified")]
