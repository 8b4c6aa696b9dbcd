"""The medical LLM steps (pipelines/medical/llm_steps.py) with the tiny random-weight model of the
LLM layer's tests (character tokenizer, so offsets and attribution are exact): the steps run and fill
their fields, every span points at exact characters of its own document, `off` exports exactly what
no `llm` argument does, a missing model leaves the rules-only result intact with one line, the
fused ranking is (1 - WEIGHT) * retrieval + WEIGHT * relative attention over the retrieval's own
candidates, and a patient longer than the context goes through the retrieval fallback and says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.export import to_json
from pipelines.documents import Document
from pipelines.llm import EngineSettings, LLMRun, get_engine
from pipelines.medical import MedicalPipeline
from pipelines.medical import llm_steps as ls

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "medical"
Q = "why was ceftriaxone started?"


def _docs() -> list[Document]:
    return [Document.from_text("Admission note 2024-03-01.\nChief complaint: fever and cough for 3 days.\n"
                               "Assessment: community acquired pneumonia.\nPlan: start ceftriaxone.", doc_id="a.txt"),
            Document.from_text("Discharge summary 2024-03-05.\nDischarge diagnosis: pneumonia.\n"
                               "The fever resolved on day 2. No cough at discharge.", doc_id="b.txt")]


@pytest.fixture(autouse=True)
def _random_answers_kept(monkeypatch, request):
    """The tiny model's answers are random characters: keep them whole (no stop, no usability filter)
    so the plumbing can be checked; the filter has its own test."""
    if "model" not in request.keywords and request.node.name != "test_unusable_answers_are_dropped":
        monkeypatch.setattr(ls, "ANSWER_STOP", ())
        monkeypatch.setattr(ls, "_usable", lambda text: bool(text.strip()))


def test_unusable_answers_are_dropped():
    assert not any(ls._usable(t) for t in ("1. 1. 1. 1", "1. 1.", "...", ""))
    assert all(ls._usable(t) for t in ("No.", "110/60", "174 pounds.", "患者", "1. 急性"))


def _run(llm=None, docs=None, questions=(Q,)):
    pipe = MedicalPipeline(use_embeddings=False)
    return pipe.run_documents(docs or _docs(), "x", questions=list(questions), llm=llm)


def _exact(span, docs) -> bool:
    d = {x.doc_id: x for x in docs}[span.doc_id]
    return d.text[span.char_start:span.char_end] == span.text and span.text.strip() != ""


def test_both_steps_run_fill_their_fields_and_point_at_exact_characters(tiny_llm):
    docs = _docs()
    r = _run(LLMRun("on", engine=tiny_llm), docs)
    assert [(s.step, s.ran, s.error) for s in r.llm.steps] == [(ls.STEP_ANSWER, True, None),
                                                               (ls.STEP_EVIDENCE, True, None)]
    ans = next(s for s in r.llm.steps if s.step == ls.STEP_ANSWER)
    assert ans.requests == 1
    assert r.llm_context.strategy == "whole patient" and r.llm_context.documents == 2
    assert r.llm_context.answer_note is None
    assert all(ev.method.endswith("+attention") for ev in r.evidence)
    for ev in r.evidence:
        for it in ev.supporting + ev.contradicting:
            assert _exact(it.span, docs) and 0.0 <= it.scores["attention"] <= 1.0
        assert ev.attention and all(_exact(it.span, docs) for it in ev.attention)
    [a] = r.answers
    assert a.question == Q and a.error is None and a.text and a.sentences
    assert " ".join(s.text for s in a.sentences).split() == a.text.split()
    for s in a.sentences:
        assert 1 <= len(s.evidence) <= ls.ANSWER_EVIDENCE
        assert all(_exact(it.span, docs) for it in s.evidence)
    # the terminal report shows the answer with its evidence, what the steps read and each step
    from rich.console import Console

    from app.render.medical import answer_lines, llm_lines, print_terminal

    con = Console(record=True, width=200)
    print_terminal(r, con)
    out = con.export_text()
    assert f"Answer to: {Q}" in out and "most attended:" in out
    assert any(line.startswith("    ← ") for line in answer_lines(r))
    assert any(ls.STEP_ANSWER in line and "requests" in line for line in llm_lines(r))
    assert "the whole patient (2 documents" in out


def test_off_and_no_llm_export_the_same_bytes_without_llm_fields():
    plain, off = to_json(_run()), to_json(_run(LLMRun.off()))
    assert plain == off
    from app.render.medical import answer_lines, llm_lines

    assert answer_lines(_run()) == [] and llm_lines(_run()) == []
    assert '"llm"' not in plain and '"answers"' not in plain and '"llm_context"' not in plain
    assert "attention" not in plain


def test_auto_runs_the_measured_evidence_step_only(tiny_llm):
    from pipelines.llm import decision

    assert decision(ls.STEP_EVIDENCE).in_auto and decision(ls.STEP_EVIDENCE).measurement.gain > 0
    assert not decision(ls.STEP_ANSWER).in_auto
    r = _run(LLMRun("auto", engine=tiny_llm))
    assert [(s.step, s.ran) for s in r.llm.steps] == [(ls.STEP_ANSWER, False), (ls.STEP_EVIDENCE, True)]
    assert r.llm.steps[0].reason.startswith("auto:")
    assert r.answers is None and r.llm_context.strategy == "whole patient"
    assert all(ev.method.endswith("+attention") for ev in r.evidence)


def test_auto_leaves_the_evidence_step_out_when_over_the_time_budget(tiny_llm):
    r = _run(LLMRun("auto", engine=tiny_llm, budget_s=0.001))
    assert [(s.step, s.ran) for s in r.llm.steps] == [(ls.STEP_ANSWER, False), (ls.STEP_EVIDENCE, False)]
    assert "budget" in r.llm.steps[1].reason
    assert r.answers is None and r.llm_context is None
    assert [e.model_dump() for e in r.evidence] == [e.model_dump() for e in _run().evidence]


def test_a_missing_model_says_so_in_one_line_and_the_rules_result_is_intact():
    run = LLMRun("on", EngineSettings(model="/nonexistent.gguf"))
    r = _run(run)
    assert r.llm.message and "\n" not in r.llm.message and "no model could be loaded" in r.llm.message
    assert all(not s.ran and s.reason == "no model" for s in r.llm.steps)
    assert r.answers is None
    plain = _run()
    assert [e.model_dump() for e in r.evidence] == [e.model_dump() for e in plain.evidence]
    assert r.entities == plain.entities and r.events == plain.events


def test_the_deprecated_engine_rerank_flag_runs_the_steps(monkeypatch):
    import pipelines.llm.run as run_mod
    from pipelines.llm import EngineUnavailable

    def no_model(settings=None):
        raise EngineUnavailable("no model in this test")

    monkeypatch.setattr(run_mod, "get_engine", no_model)
    pipe = MedicalPipeline(use_embeddings=False, engine_rerank=True)
    r = pipe.run_documents(_docs(), "x", question=Q)
    assert r.llm is not None and r.llm.mode == "on" and r.llm.message == "no model in this test"
    assert MedicalPipeline(use_embeddings=False).run_documents(_docs(), "x", question=Q).llm is None


def test_a_patient_longer_than_the_context_goes_through_the_retrieval_fallback(tiny_text_model):
    # the appendectomy patient is ~3,300 characters, one token each here: more than this engine's 1,024 tokens
    llm = get_engine(EngineSettings(model=str(tiny_text_model), device="cpu", dtype="float32", max_model_len=1024))
    pipe = MedicalPipeline(use_embeddings=False)
    docs = pipe.load(pipe.discover(FIX / "en-appendectomy")[0])
    r = pipe.run_documents(docs, "x", question="why was the antibiotic changed?", llm=LLMRun("on", engine=llm))
    ctx = r.llm_context
    assert ctx.strategy == "retrieval" and 0 < ctx.sentences < ctx.sentences_total
    assert ctx.tokens <= 1024 and "does not fit" in ctx.note and "retrieval fallback" in ctx.note
    assert any("retrieval fallback" in w for w in r.warnings)
    assert all(s.ran and s.error is None for s in r.llm.steps)
    for ev in r.evidence:
        assert all(_exact(it.span, docs) for it in ev.supporting + ev.contradicting)
    for a in r.answers:
        assert all(_exact(it.span, docs) for s in a.sentences for it in s.evidence)


def test_patient_text_maps_every_range_back_to_its_own_document():
    docs = _docs()
    pt = ls.patient_text([(docs[0], "[a]", None), (docs[1], "[b]", [(30, 61), (62, 90)])])
    for d, ranges in ((docs[0], [(0, 26), (27, 71)]), (docs[1], [(30, 61), (62, 90)])):
        for a, b in ranges:
            pa, pb = pt.to_joined(d.doc_id, a, b)
            assert pt.text[pa:pb] == d.text[a:b]
            src = pt.to_source(pa, pb, clip=False)
            assert (src.doc_id, src.char_start, src.char_end, src.text) == (d.doc_id, a, b, d.text[a:b])
    assert pt.to_joined("b.txt", 0, 10) is None  # left out of the kept ranges
    whole_a = pt.to_joined("a.txt", 0, len(docs[0].text))
    assert pt.to_source(whole_a[0], whole_a[1] + 5, clip=False) is None  # crosses into the next document's header


_D = Document.from_text("abcd", doc_id="d")


class _C:
    def __init__(self, name, order):
        self.doc, self.doc_id, self.start, self.end, self.doc_order, self.name = _D, "d", order, order + 1, 0, name
        self.section = None


def test_fusion_reorders_the_retrieval_candidates_and_adds_none():
    a, b, c, outsider = _C("a", 0), _C("b", 1), _C("c", 2), _C("x", 3)
    sup = [(a, 0.9, {}), (b, 0.5, {}), (c, 0.4, {})]
    plan = ls.Plan("claim", "diagnosis", lambda: (sup, [], "m"), lambda s, n, m, att=None: (s, m, att))
    mass = {("plan", 0): [0.0, 0.1, 1.0, 5.0]}  # the outsider gets the most attention
    [(fused, method, att)] = ls._fuse([plan], [plan.scored()], [a, b, c, outsider], [0, 1, 2, 3], mass)
    w = ls.WEIGHT
    expect = {"a": (1 - w) * 0.9 + w * 0.0, "b": (1 - w) * 0.5 + w * 0.02, "c": (1 - w) * 0.4 + w * 0.2}
    assert [x[0].name for x in fused] == sorted(expect, key=lambda k: -expect[k])
    assert all(x[1] == pytest.approx(expect[x[0].name], abs=1e-4) for x in fused)
    assert outsider not in [x[0] for x in fused] and method == "m+attention"
    # relative to the best attended sentence of the context, the outsider included
    assert {x[0].name: x[2]["attention"] for x in fused} == {"a": 0.0, "b": 0.02, "c": 0.2}
    # the context's most attended sentences are reported on their own, the outsider first
    assert [(it.span.char_start, it.score) for it in att] == [(3, round(5 / 6.1, 4)), (2, round(1 / 6.1, 4)),
                                                              (1, round(0.1 / 6.1, 4))]


@pytest.mark.model
def test_the_steps_with_the_default_model():
    llm = get_engine(EngineSettings(device="cpu", dtype="float32", max_model_len=4096))
    docs = _docs()
    r = _run(LLMRun("on", engine=llm), docs)
    assert all(s.ran and s.error is None for s in r.llm.steps)
    [a] = r.answers
    assert a.error is None and a.text and all(s.evidence for s in a.sentences)
    assert all(_exact(it.span, docs) for s in a.sentences for it in s.evidence)
    pneu = next(ev for ev in r.evidence if ev.kind == "diagnosis" and "pneumonia" in ev.claim)
    assert "pneumonia" in pneu.supporting[0].span.text


def second_prompt(result) -> int:
    return next(s for s in result.llm.steps if s.step == ls.STEP_ANSWER).prompt_tokens


def test_a_second_question_in_the_session_reuses_the_patients_kv(tiny_llm):
    first = _run(LLMRun("on", engine=tiny_llm), questions=("why was ceftriaxone started?",))
    second = _run(LLMRun("on", engine=tiny_llm), questions=("when did the fever resolve?",))
    reuse = [next(s for s in r.llm.steps if s.step == ls.STEP_ANSWER).reuse for r in (first, second)]
    # placed: loaded from the document cache; shared: most of the patient's prompt from the prefix cache
    assert reuse[1]["documents_computed"] == 0, reuse
    assert reuse[1]["documents_loaded"] == 1 or reuse[1]["prefix_hit_tokens"] >= 0.7 * second_prompt(second), reuse


def test_on_a_cpu_a_long_patient_is_answered_over_the_questions_retrieval_sentences(tiny_llm, monkeypatch):
    monkeypatch.setattr(ls, "ANSWER_WHOLE_MAX_TOKENS_CPU", 50)
    docs = _docs()
    r = _run(LLMRun("on", engine=tiny_llm), docs)
    ctx = r.llm_context
    assert ctx.strategy == "whole patient" and ctx.answer_note and "retrieval sentences" in ctx.answer_note
    ans = next(s for s in r.llm.steps if s.step == ls.STEP_ANSWER)
    assert ans.prompt_tokens < ctx.tokens  # the answer prompt is smaller than the patient
    assert all(_exact(it.span, docs) for a in r.answers for s in a.sentences for it in s.evidence)
