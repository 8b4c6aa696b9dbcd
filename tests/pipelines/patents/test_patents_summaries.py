"""The LLM step patents.claim_summaries: the rules scaffold and its grounding measures (no model),
the step's plumbing with a tiny random-weight model (character tokenizer, so spans are exact),
--llm off byte-identical, a missing model, auto, cancellation, and the terminal tree showing the
summaries. One quick test with the real default model (marked `model`)."""

from __future__ import annotations

import threading

import pytest

from app.export import to_json
from pipelines.documents import Document
from pipelines.llm import EngineSettings, LLMRun, decision, get_engine
from pipelines.patents import PatentsPipeline, analyse_text, rules_summaries
from pipelines.patents.llm_steps import EXAMPLES, STEP, claim_prompt, grounding
from pipelines.patents.pipeline import analyse_document
from pipelines.patents.summaries import body, element_head, scaffold, supporting_spans
from tests.pipelines.llm.conftest import _one_torch_thread, tiny_llm, tiny_text_model  # noqa: F401
from tests.pipelines.patents.helpers import SAMPLES

THROTTLE = (SAMPLES / "US7156074.txt").read_text(encoding="utf-8")
SMALL = """1. A lamp, comprising: a base; a stem which rises from said base; and a bulb socket at the top of said stem.

2. The lamp according to claim 1, wherein said base is weighted with sand.

3. The lamp according to claim 2, further comprising a dimmer switch mounted on said base.
"""
ZH = """1. 一种水杯，其特征在于，包括杯体和杯盖，所述杯盖上设有吸管。

2. 根据权利要求1所述的水杯，其特征在于，所述杯体外侧套设有隔热套。
"""


@pytest.fixture(scope="module")
def roomy_llm(tiny_text_model):  # noqa: F811
    """The tiny model with room for the example and a claim (character tokens)."""
    return get_engine(EngineSettings(model=str(tiny_text_model), device="cpu", dtype="float32", max_model_len=2048))


# ---------------------------------------------------------------- rules side, no model

def test_element_heads_and_scaffold():
    assert element_head("a throttle valve which is disposed at an intake passage of an engine") == "a throttle valve"
    assert element_head("wherein said second drive means comprises a pulley which is fixed") == \
        "the second drive means comprises a pulley"
    assert element_head("所述杯盖上设有吸管，所述吸管可伸缩", zh=True) == "杯盖上设有吸管"
    r = analyse_text(THROTTLE)
    by = {c.number: c for c in r.claims}
    assert scaffold(by[1]) == ("Claim 1: A throttle apparatus with a throttle valve, a throttle shaft, "
                               "a first drive means and a second drive means.")
    # a clause keeps its list items without their relative clauses: claim 4's lever is what it adds
    assert scaffold(by[2]) == "Claim 2 adds to claim 1: the second drive means comprises a pulley, a wire, and an " \
        "electromagnetic solenoid."
    assert "a hand-driven operating lever" in scaffold(by[4])
    assert scaffold(by[5]).startswith("Claim 5 adds to claims 2, 3 and 4: the pulley is disposed")
    z = analyse_text(ZH)
    assert z.language == "zh"
    assert scaffold(z.claims[1], zh=True) == "权利要求2在权利要求1的基础上增加：杯体外侧套设有隔热套。"


def test_grounding_and_supporting_spans_point_at_the_claims_own_words():
    r = analyse_text(SMALL, doc_id="lamp")
    c3 = r.claims[2]
    assert body("Claim 3 adds that a dimmer is on the base.") == "a dimmer is on the base."
    assert grounding(c3, "Claim 3 adds that a dimmer switch sits on the base.") == pytest.approx(3 / 4)  # 'sits' is not
    assert grounding(c3, "Claim 3 adds that the lamp glows purple.") < 0.5
    spans = supporting_spans(c3, "Claim 3 adds that a dimmer switch sits on the base.")
    assert spans and spans[0][0].text == "a dimmer switch mounted on said base"
    assert supporting_spans(c3, "Claim 3 adds that it glows purple.") == []
    # the rules summaries are fully grounded and name what each dependent claim adds
    rs = rules_summaries(r)
    assert [s.claim for s in rs] == [1, 2, 3] and all(s.source == "rules" for s in rs)
    assert all(s.grounding == 1.0 for s in rs)
    assert "weighted with sand" in rs[1].text and "dimmer switch" in rs[2].text


def test_dependent_prompt_carries_the_parents_summary():
    r = analyse_text(SMALL)
    by = {c.number: c for c in r.claims}
    p = claim_prompt(by[3], by, zh=False)
    assert "Claim: 3. The lamp according to claim 2" in p
    assert "Builds on claim 2: the base is weighted with sand." in p
    assert p.endswith("Plain English: Claim 3 adds that")
    assert claim_prompt(by[1], by, zh=False).endswith("Plain English: Claim 1 covers")
    assert "New in claim" not in p
    guided = claim_prompt(by[3], by, zh=False, prompt="guided")
    assert guided.endswith("New in claim 3: a dimmer switch mounted on the base.\nPlain English: Claim 3 adds that")
    assert "Its elements: a base, a stem and a bulb socket" in claim_prompt(by[1], by, zh=False, prompt="guided")
    assert "New in claim 2: the backrest" in EXAMPLES["guided", False] and "New in" not in EXAMPLES["plain", False]


def test_the_step_is_registered_out_of_auto():
    d = decision(STEP)
    assert d is not None and d.step == STEP and d.in_auto is False
    # measured: the model's summaries were not better than the rules scaffold's
    assert d.measurement is not None and d.measurement.gain <= 0 and "patents_evaluate --llm on" in d.measurement.command


# ---------------------------------------------------------------- the step with a tiny model

def _check_spans(doc: Document, result) -> None:
    by = {c.number: c for c in result.claims}
    for s in result.claim_summaries:
        c = by[s.claim]
        for sp in s.spans:
            assert doc.text[sp.span.char_start : sp.span.char_end] == sp.span.text
            assert c.span.char_start <= sp.span.char_start and sp.span.char_end <= c.span.char_end
            assert 0 < sp.share <= 1


@pytest.mark.parametrize(("strategy", "prompt"), [("short", "plain"), ("claims", "plain"), ("short", "guided")])
def test_the_step_runs_in_one_batch_with_exact_spans(roomy_llm, strategy, prompt):
    doc = Document.from_text(SMALL, doc_id="lamp")
    run = LLMRun("on", EngineSettings(), engine=roomy_llm)
    seen = []
    run.on_progress = lambda step, p: seen.append((step, p.tokens_done, p.tokens_total))
    res = analyse_document(doc, llm=run, summary_strategy=strategy, summary_prompt=prompt)
    assert [s.claim for s in res.claim_summaries] == [1, 2, 3]
    rec = res.llm.steps[0]
    assert rec.step == STEP and rec.ran and rec.error is None and rec.requests == 3
    # the patent's context computed once: placed, or shared (each request took most of its prompt from the cache)
    assert rec.reuse.get("documents_computed", 0) + rec.reuse.get("documents_loaded", 0) == 1 \
        or rec.reuse.get("prefix_hit_tokens", 0) >= 0.5 * rec.prompt_tokens
    assert seen and all(step == STEP for step, _, _ in seen) and seen[-1][1] == seen[-1][2]
    for s in res.claim_summaries:
        assert s.text and s.scaffold == scaffold(next(c for c in res.claims if c.number == s.claim))
        if s.source == "model":
            assert s.grounding > 0 or not s.spans
            lead = "Claim 1 covers" if s.claim == 1 else f"Claim {s.claim} adds that"
            assert s.text.startswith(lead) and s.error is None
        else:
            assert s.error
    _check_spans(doc, res)
    # the deterministic part is the rules-only result
    plain = analyse_document(doc)
    assert res.model_dump(exclude={"claim_summaries", "llm"}) == plain.model_dump()


def test_a_claim_that_does_not_fit_falls_back_to_rules_and_the_batch_goes_on(tiny_llm):  # noqa: F811
    # context 1024 character tokens: the long claim 3 of the throttle does not fit with the example
    doc = Document.from_text(THROTTLE, doc_id="throttle")
    res = analyse_document(doc, llm=LLMRun("on", EngineSettings(), engine=tiny_llm))
    rec = res.llm.steps[0]
    assert rec.ran and rec.item_errors >= 1 and rec.requests == 5
    failed = [s for s in res.claim_summaries if s.source == "rules"]
    assert failed and all(s.error and s.text == s.scaffold for s in failed)
    assert any(s.spans for s in failed) and all(s.grounding == 1.0 for s in failed)
    assert len(res.claim_summaries) == 5
    _check_spans(doc, res)


def test_llm_off_export_is_byte_identical():
    doc = Document.from_text(THROTTLE, doc_id="throttle")
    plain = to_json(PatentsPipeline().run_documents([doc]))
    off = PatentsPipeline().run_documents([doc], llm=LLMRun.off())
    assert off.claim_summaries is None and off.llm is None
    assert to_json(off) == plain
    assert '"claim_summaries"' not in plain and '"llm"' not in plain


def test_a_missing_model_says_so_in_one_line_and_keeps_the_rules_result():
    doc = Document.from_text(SMALL, doc_id="lamp")
    run = LLMRun("on", EngineSettings(model="/nonexistent.gguf"))
    res = analyse_document(doc, llm=run)
    assert res.claim_summaries is None
    rec = res.llm.steps[0]
    assert not rec.ran and rec.reason == "no model" and rec.error and "\n" not in rec.error
    assert res.llm.message and "\n" not in res.llm.message
    assert res.model_dump(exclude={"claim_summaries", "llm"}) == analyse_document(doc).model_dump()
    assert '"claim_summaries"' not in to_json(res) and '"llm"' in to_json(res)


def test_auto_leaves_the_step_out_and_cancel_stops_it(roomy_llm):
    doc = Document.from_text(SMALL, doc_id="lamp")
    res = analyse_document(doc, llm=LLMRun("auto", EngineSettings(), engine=roomy_llm))
    assert res.claim_summaries is None and not res.llm.steps[0].ran and "auto" in res.llm.steps[0].reason
    cancel = threading.Event()
    cancel.set()
    res = analyse_document(doc, llm=LLMRun("on", EngineSettings(), engine=roomy_llm, cancel=cancel))
    assert res.claim_summaries is None and "cancelled" in res.llm.steps[0].reason


def test_the_terminal_tree_shows_the_summaries(roomy_llm):
    from app.render.patents import render_tree_text, summaries_markdown

    doc = Document.from_text(SMALL, doc_id="lamp")
    plain = analyse_document(doc)
    res = analyse_document(doc, llm=LLMRun("on", EngineSettings(), engine=roomy_llm))
    assert render_tree_text(plain) == render_tree_text(res.model_copy(update={"claim_summaries": None, "llm": None}))
    text = render_tree_text(res, width=200)
    for s in res.claim_summaries:
        assert " ".join(s.text.split())[:30] in " ".join(text.split())
    s3 = next(s for s in res.claim_summaries if s.claim == 3)
    md = summaries_markdown(res, 3)
    assert s3.text.split()[0] in md and s3.scaffold.replace("*", "\\*") in md
    for sp in s3.spans:
        assert f"{sp.span.char_start}–{sp.span.char_end}" in md
    assert summaries_markdown(plain, 3) == ""


def test_chinese_claims_get_chinese_prompts(roomy_llm):
    r = analyse_text(ZH)
    by = {c.number: c for c in r.claims}
    p = claim_prompt(by[2], by, zh=True)
    assert p.endswith("通俗解释：权利要求2增加了") and "基于权利要求1：" in p
    res = analyse_text(ZH, llm=LLMRun("on", EngineSettings(), engine=roomy_llm))
    assert [s.claim for s in res.claim_summaries] == [1, 2]


# ---------------------------------------------------------------- the real default model

@pytest.mark.model
def test_claim_summaries_with_the_default_model():
    doc = Document.from_text(SMALL, doc_id="lamp")
    res = analyse_document(doc, llm=LLMRun("on", EngineSettings(device="cpu", dtype="float32")))
    assert res.llm.steps[0].ran and res.llm.steps[0].error is None
    assert [s.claim for s in res.claim_summaries] == [1, 2, 3]
    assert all(s.text for s in res.claim_summaries)
    _check_spans(doc, res)


def test_the_page_shows_the_chosen_claims_summary(roomy_llm):
    from streamlit.testing.v1 import AppTest

    def script():
        from app.ui.patents_page import page

        page()

    doc = Document.from_text(SMALL, doc_id="lamp")
    res = analyse_document(doc, llm=LLMRun("on", EngineSettings(), engine=roomy_llm))
    at = AppTest.from_function(script, default_timeout=60)
    at.session_state["patents_result"] = (res, doc)
    at.run()
    assert not at.exception, at.exception
    s1 = res.claim_summaries[0]
    md = "\n".join(m.value for m in at.markdown)
    assert "In plain words" in md and s1.text.split()[0] in md
    assert any("Plain-language summaries" in e.label for e in at.expander)
