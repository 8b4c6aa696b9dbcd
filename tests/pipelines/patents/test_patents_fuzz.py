"""Property tests: random and adversarial text never crashes the parser and every span it exports
points at its own text; generated claim sets with known dependencies, written in the reference
phrase forms and numbering styles the parser supports, come back with exactly those dependencies."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.patents.model import PatentResult
from pipelines.patents.pipeline import analyse_text
from tests.pipelines.patents.helpers import iter_spans

FRAGMENTS = [
    "1.", "2.", "3 .", "10.", "Claim 2", "[Claim 3]", "claims 1 and 2", "claim 1 or 2", "any one of claims 1 to 5",
    "any preceding claim", "the preceding claim", "(Canceled)", "(Currently Amended)", "3-5. (Canceled)", "2.-4. (Cancelled)",
    "What is claimed is:", "CLAIMS", "Abstract", "权利要求书", "如权利要求1所述", "根据权利要求1或2所述", "权利要求1-3任一项",
    "１．", "2、", "所述", "the", "said", "a", "comprising:", "wherein", "characterized in that", "其特征在于", "包括", ";", "；",
    "。", ",", "\n", "\n\n", " ", "(a)", "b)", "(10)", "US 7,000,000 B2", "- 3 -", "Page 2 of 5", "5", "\f", "claim", "999.",
    "0.", "claim 0", "claims 5-1", "claims 1 to 999", "A device", "The device of claim", "lid", "一种装置", "\t", ":", "~",
]

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check(text: str) -> PatentResult:
    result = analyse_text(text)
    for s in iter_spans(result):
        assert text[s.char_start : s.char_end] == s.text
    numbers = [c.number for c in result.claims]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    assert PatentResult.model_validate_json(result.model_dump_json()) == result
    return result


@SETTINGS
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400))
def test_random_text_never_crashes(text):
    _check(text)


@SETTINGS
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=80).map("".join))
def test_adversarial_fragments_never_crash(text):
    _check(text)


@SETTINGS
@given(st.lists(st.sampled_from(FRAGMENTS) | st.integers(0, 300).map(str), max_size=60).map(" ".join))
def test_adversarial_words_never_crash(text):
    _check(text)


EN_FORMS = [
    lambda ds: f"claim {ds[0]}" if len(ds) == 1 else None,
    lambda ds: f"claim {ds[0]} or {ds[1]}" if len(ds) == 2 else None,
    lambda ds: f"claim {ds[0]} or claim {ds[1]}" if len(ds) == 2 else None,
    lambda ds: (", ".join(map(str, ds[:-1])) and f"claims {', '.join(map(str, ds[:-1]))} or {ds[-1]}") if len(ds) >= 2 else None,
    lambda ds: f"any one of claims {ds[0]} to {ds[-1]}" if len(ds) >= 2 and ds == list(range(ds[0], ds[-1] + 1)) else None,
    lambda ds: f"any of claims {ds[0]}-{ds[-1]}" if len(ds) >= 2 and ds == list(range(ds[0], ds[-1] + 1)) else None,
    lambda ds: f"any one of claims {ds[0]} through {ds[-1]}" if len(ds) >= 2 and ds == list(range(ds[0], ds[-1] + 1)) else None,
]
EN_LEADS = ["The device of {ref}, wherein", "The device according to {ref}, wherein", "The device as claimed in {ref}, wherein",
            "A method of using the device of {ref}, comprising", "The device as recited in {ref}, further comprising"]
ZH_FORMS = [
    lambda ds: f"如权利要求{ds[0]}所述的" if len(ds) == 1 else None,
    lambda ds: f"根据权利要求{ds[0]}或{ds[1]}所述的" if len(ds) == 2 else None,
    lambda ds: f"如权利要求{ds[0]}至{ds[-1]}中任一项所述的" if len(ds) >= 2 and ds == list(range(ds[0], ds[-1] + 1)) else None,
    lambda ds: f"根据权利要求{ds[0]}-{ds[-1]}任一项所述的" if len(ds) >= 2 and ds == list(range(ds[0], ds[-1] + 1)) else None,
    lambda ds: f"如权利要求{ds[0]}~{ds[-1]}之一所述的" if len(ds) >= 2 and ds == list(range(ds[0], ds[-1] + 1)) else None,
]
NUMBERING = ["{n}. ", "{n}.", "{n} . ", "Claim {n}. ", "{n}、"]
BODY_EN = ["a housing (10) having 2 walls", "the lid is 1.5 mm thick; and\n1. a hinge;\n2. a latch",
           "said housing comprises:\n(a) a base;\nb) a cover", "the lid is red"]
BODY_ZH = ["所述壳体(10)包括2个壁", "所述盖为圆形；以及铰链", "包括：1.底座；2.盖板"]


@st.composite
def claim_sets(draw):
    zh = draw(st.booleans())
    n = draw(st.integers(1, 25))
    numbering = draw(st.sampled_from(NUMBERING if not zh else ["{n}.", "{n}、", "{n}. "]))
    lines = []
    truth = {}
    for i in range(1, n + 1):
        deps: list[int] = []
        if i > 1 and draw(st.integers(0, 3)) > 0:
            lo = draw(st.integers(1, i - 1))
            hi = draw(st.integers(lo, min(i - 1, lo + draw(st.integers(0, 3)))))
            deps = list(range(lo, hi + 1))
            if len(deps) == 2 and draw(st.booleans()):
                deps = sorted({deps[0], draw(st.integers(1, i - 1))})
        forms = ZH_FORMS if zh else EN_FORMS
        rendered = [f(deps) for f in forms] if deps else []
        rendered = [r for r in rendered if r]
        if deps and not rendered:
            deps = deps[:1]
            rendered = [forms[0](deps)]
        body = draw(st.sampled_from(BODY_ZH if zh else BODY_EN))
        if zh:
            text = (draw(st.sampled_from(rendered)) + "装置，其特征在于，" if deps else "一种装置，其特征在于，包括壳体，") + body + "。"
        else:
            if deps:
                text = draw(st.sampled_from(EN_LEADS)).format(ref=draw(st.sampled_from(rendered))) + " " + body + "."
            else:
                text = "A device comprising: " + body + "."
        lines.append(numbering.format(n=i) + text)
        truth[i] = deps
    sep = draw(st.sampled_from(["\n", "\n\n", "\n \n"]))
    heading = draw(st.sampled_from(["", "What is claimed is:\n", "Claims\n\n", "权利要求书\n"]))
    return heading + sep.join(lines) + "\n", truth


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(claim_sets())
def test_generated_claim_sets_parse_exactly(case):
    text, truth = case
    result = _check(text)
    assert {c.number: c.depends_on for c in result.claims} == truth
