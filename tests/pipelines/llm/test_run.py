"""LLMRun: which steps run under off/auto/on, what a step records, and that an engine failure or a
missing model ends the step with one line while the caller's deterministic work goes on."""

from __future__ import annotations

import pytest

from pipelines.documents import Document
from pipelines.llm import (
    EngineSettings,
    LLMRun,
    Measurement,
    StepDecision,
    ask_document,
    register,
)
from pipelines.llm.modes import REGISTRY

DOC = Document.from_text("The supplier shall deliver the goods within 30 days. Payment is due on delivery.",
                         doc_id="c")


@pytest.fixture
def measured_step():
    name = "test.measured"
    register(StepDecision(name, "default", in_auto=True,
                          measurement=Measurement("accuracy", 0.5, 0.7, "python bench.py", "2026-12-03")))
    yield name
    REGISTRY.pop(name, None)


def test_off_runs_nothing_and_reports_nothing():
    run = LLMRun("off")
    with run.step("anything") as st:
        assert st is None
    assert run.report() is None


def test_auto_runs_only_measured_steps_within_the_budget(tiny_llm, measured_step):
    run = LLMRun("auto", EngineSettings(), engine=tiny_llm, budget_s=10)
    with run.step("test.unmeasured") as st:
        assert st is None
    with run.step(measured_step, estimated_s=60) as st:
        assert st is None
    with run.step(measured_step, estimated_s=1) as st:
        assert st is not None and st.llm is tiny_llm
    rep = run.report()
    assert [(s.step, s.ran) for s in rep.steps] == [("test.unmeasured", False), (measured_step, False),
                                                     (measured_step, True)]
    assert "not measured" in rep.steps[0].reason
    assert "over the 10 s budget" in rep.steps[1].reason


def test_a_step_records_requests_tokens_and_reuse(tiny_llm):
    seen = []
    run = LLMRun("on", EngineSettings(), engine=tiny_llm, on_progress=lambda step, p: seen.append(step))
    with run.step("test.ask") as st:
        res = ask_document(st.llm, DOC, ["Who delivers?", "When is payment due?"], max_tokens=4,
                           on_progress=st.progress)
        st.add(res)
    rec = run.report().steps[0]
    assert rec.ran and rec.requests == 2 and rec.item_errors == 0
    assert rec.prompt_tokens > 2 * len(DOC.text)  # character tokenizer: each prompt holds the document
    assert 0 < rec.generated_tokens <= 8
    assert rec.reuse["documents_computed"] + rec.reuse["documents_loaded"] >= 1 or rec.reuse["prefix_hit_tokens"] >= len(DOC.text)
    assert rec.seconds > 0 and seen and set(seen) == {"test.ask"}


def test_no_model_is_one_line_and_the_caller_goes_on(tmp_path):
    run = LLMRun("on", EngineSettings(model=str(tmp_path / "missing.gguf"), device="cpu"))
    after = []
    with run.step("test.a") as st:
        assert st is None
    with run.step("test.b") as st:
        assert st is None
    after.append("deterministic work")
    rep = run.report()
    assert after == ["deterministic work"]
    assert rep.message and "\n" not in rep.message and "no model could be loaded" in rep.message
    assert [s.reason for s in rep.steps] == ["no model", "no model"]


def test_an_engine_error_inside_a_step_is_recorded_not_raised(tiny_llm):
    from engine import ContextLengthError

    run = LLMRun("on", EngineSettings(), engine=tiny_llm)
    with run.step("test.fails") as st:
        raise ContextLengthError("prompt of 5,000 tokens is over the 1,024-token context")
    rec = run.report().steps[0]
    assert rec.ran and rec.error.startswith("prompt of 5,000 tokens")
    with pytest.raises(KeyError):  # a bug in the pipeline is not swallowed
        with run.step("test.bug") as st:
            assert st is not None
            raise KeyError("x")


def test_the_step_verbs_lock_count_report_progress_and_stop_on_cancel(tiny_llm):
    """StepContext's verbs (the one door to the engine): each counts its requests and tokens on the
    step's record and reports progress; `choose` stops at a cancel with the choices made before it."""
    import threading

    from pipelines.llm.spans import sentence_spans

    seen: list = []
    cancel = threading.Event()
    run = LLMRun("on", EngineSettings(), engine=tiny_llm, cancel=cancel, on_progress=lambda step, p: seen.append((step, p)))
    with run.step("test.verbs") as st:
        got = st.choose(["The goods are ", "Payment is "], {"yes": " yes", "no": " no"})
        assert len(got) == 2 and all(set(c.logprobs) == {"yes", "no"} for c in got)
        assert st.record.requests == 2 and st.record.prompt_tokens == sum(st.tokens(p, True) for p in
                                                                        ["The goods are ", "Payment is "])
        assert [p.items_done for s, p in seen if s == "test.verbs"][-2:] == [1, 2]
        outs = st.generate(["The supplier shall"], max_tokens=3)
        assert len(outs) == 1 and st.record.generated_tokens == len(outs[0].token_ids) > 0
        shares = st.attention([(DOC, "Doc: ", "\nQ:", " When is payment due?", sentence_spans(DOC))])
        assert len(shares[0]) == 2 and abs(sum(s for s, _ in shares[0]) - 1.0) < 1e-4
        att = st.attribute("Doc: " + DOC.text, " due on delivery", [(5, 57), (58, 86)])
        assert len(att.spans) == 2
        before = st.record.requests
        assert before == 5
        cancel.set()
        assert st.choose(["a", "b"], {"yes": " yes", "no": " no"}) == []
        assert st.record.requests == before
