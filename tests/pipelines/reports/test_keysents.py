"""Key-sentence candidates, centrality and fusion for the reports' deep summary (no model)."""

from __future__ import annotations

import math

from pipelines.documents import Document
from pipelines.reports.keysents import fuse, how_many, key_candidates, lexrank

TEXT = (
    "2 Methods\n"
    "We simulate particles that diffuse and reproduce in a closed box.\n"
    "Figure 3: The particles after one hundred steps of the simulation.\n"
    "Parameter Value 0.001 0.5 12 13 14 15 16 17\n"
    "The particles reproduce at a fixed rate and\n"
    "diffuse with a constant coefficient in every run.\n"
    "In the simulation the box is periodic and the particles never leave it.\n"
    "The diffusion coefficient is set to 0.001 for every particle in the box, as\n"
    "follows:\n"
    "\n"
    "表 2-1 模拟参数的取值\n"
    "本节的模拟在一个周期性的盒子中进行，粒子的扩散系数取为常数。\n"
)


def _quotes(doc, exclude=()):
    return [doc.text[a:b] for a, b in key_candidates(doc, 0, len(doc.text), exclude)]


def test_candidates_are_whole_prose_sentences():
    doc = Document.from_text(TEXT)
    got = _quotes(doc)
    assert "We simulate particles that diffuse and reproduce in a closed box." in got  # heading line cut off
    assert "The particles reproduce at a fixed rate and\ndiffuse with a constant coefficient in every run." in got
    assert "In the simulation the box is periodic and the particles never leave it." in got
    assert "本节的模拟在一个周期性的盒子中进行，粒子的扩散系数取为常数。" in got
    joined = " ".join(got)
    assert "Figure 3:" not in joined and "表 2-1" not in joined  # captions
    assert "Parameter Value" not in joined  # a table row: mostly digits
    assert not any(q.rstrip().endswith(":") for q in got)  # a lead-in to a list or a formula
    assert not any(q.startswith("diffuse with") for q in got)  # the tail of a wrapped sentence alone
    for q in got:  # every candidate is the document's own characters
        assert q in doc.text


def test_excluded_ranges_are_never_quoted():
    doc = Document.from_text(TEXT)
    a = TEXT.index("In the simulation")
    got = _quotes(doc, [(a, a + 10)])
    assert not any(q.startswith("In the simulation") for q in got)


def test_a_fragment_after_a_page_break_is_not_a_sentence():
    text = ("The code had been kept under a version control system that was popular at the time, and I converted\n"
            "RCS into Git using a small tool that keeps the whole history of the files.\n"
            "It ran without changes on a current version of the language.\n")
    got = _quotes(Document.from_text(text))
    assert not any(q.startswith("RCS into Git") for q in got)
    assert "It ran without changes on a current version of the language." in got


def test_lexrank_prefers_the_sentence_the_others_share_words_with():
    texts = ["Particles diffuse in the box and form clusters over time.",
             "Clusters form when particles reproduce faster than they diffuse.",
             "The clusters of particles grow while the particles diffuse slowly.",
             "The authors thank the funding agency for its generous support."]
    r = lexrank(texts)
    assert math.isclose(sum(r), 1.0, abs_tol=1e-9)
    assert min(r[:3]) > r[3]
    assert lexrank(["one sentence only here"]) == [1.0]
    assert lexrank([]) == []


def test_lexrank_reads_chinese_by_character_bigrams():
    texts = ["粒子在盒子中扩散并形成团簇。", "粒子繁殖快于扩散时形成团簇。", "作者感谢基金的资助。"]
    r = lexrank(texts)
    assert r[2] < min(r[:2])


def test_fuse_averages_the_z_scores_and_falls_back_to_centrality():
    cent = [1.0, 2.0, 0.5]
    only = fuse(cent, None)
    assert only.index(max(only)) == 1 and abs(sum(only)) < 1e-9
    both = fuse(cent, [4.0, 0.25, 1.0])  # the model votes for the first
    assert both.index(max(both)) == 0
    assert fuse([1.0], [1.0]) == [0.0]


def test_how_many_grows_with_the_section():
    assert [how_many(n) for n in (0, 1, 2, 5, 12, 24, 100)] == [0, 1, 2, 2, 3, 4, 4]
