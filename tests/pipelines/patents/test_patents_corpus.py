"""Dependencies on real patents against hand-checked truth (USPTO <claim-ref> markup, and a person
for the Chinese): the share of claims whose dependencies are exactly right must be 100% here."""

from __future__ import annotations

import pytest

from pipelines.patents.pipeline import analyse_text
from tests.pipelines.patents.helpers import CORPUS_IDS, deps, load_text, load_truth


def _accepted(claim: dict) -> list[list[int]]:
    return [sorted(claim["depends_on"])] + [sorted(a) for a in claim.get("also_accept") or []]


def test_corpus_present():
    assert len(CORPUS_IDS) >= 10
    assert any(i.startswith("CN") for i in CORPUS_IDS) and any(i.startswith("US") for i in CORPUS_IDS)


@pytest.mark.parametrize("patent_id", CORPUS_IDS)
def test_dependencies_match_truth(patent_id):
    truth = load_truth(patent_id)
    result = analyse_text(load_text(patent_id), doc_id=patent_id)
    got = deps(result)
    assert sorted(got) == [c["number"] for c in truth["claims"]], "claim numbers differ"
    wrong = [(c["number"], c["depends_on"], got[c["number"]]) for c in truth["claims"] if got[c["number"]] not in _accepted(c)]
    assert not wrong
    for c in truth["claims"]:
        claim = next(x for x in result.claims if x.number == c["number"])
        assert claim.independent == (c["type"] == "independent")
    assert result.language == truth.get("language", "en")


def test_share_exactly_right_is_total():
    total = right = 0
    for patent_id in CORPUS_IDS:
        truth = load_truth(patent_id)
        got = deps(analyse_text(load_text(patent_id), doc_id=patent_id))
        for c in truth["claims"]:
            total += 1
            right += got.get(c["number"]) in _accepted(c)
    assert total > 200
    assert right / total == 1.0, f"{right}/{total} claims with exactly the right dependencies"


def test_whole_patent_with_description_mentions():
    """The claims of a corpus patent embedded in a whole patent whose description and abstract
    mention claims and numbers: the same dependencies, and nothing from outside the section."""
    truth = load_truth("US7156074")
    claims = load_text("US7156074")
    text = (
        "THROTTLE DEVICE\n\nBACKGROUND OF THE INVENTION\n\n1. Field of the Invention\n"
        "The device of claim 3 of an earlier patent is known. 2. The prior art uses claims 1 and 2.\n\n"
        "What is claimed is:\n\n" + claims + "\n\nABSTRACT\n\nA throttle apparatus as claimed in claim 1 of the parent.\n"
    )
    result = analyse_text(text)
    assert result.claims_section.method == "heading"
    assert result.claims_section.heading == "What is claimed is"
    assert deps(result) == {c["number"]: c["depends_on"] for c in truth["claims"]}
    assert "ABSTRACT" not in result.claims[-1].text
