"""The LLM layer on a tiny random-weight Gemma 3 with a character tokenizer: one document's KV
computed once for a batch, attribution to exact characters, choose() against LLM.score, progress,
cancellation, budgets, per-item errors and the fallback, settings and the step registry."""

from __future__ import annotations

import threading

import pytest

from pipelines.documents import Document
from pipelines.llm import (
    Budget,
    EngineSettings,
    EngineUnavailable,
    LLMMode,
    Measurement,
    StepDecision,
    ask_document,
    ask_documents,
    choose,
    decision,
    get_engine,
    register,
    sentence_spans,
    step_enabled,
)

TEXT = ("The supplier shall deliver the goods within 30 days. Payment is due on delivery.\n"
        "Either party may end this agreement with 60 days notice. The law of Ontario governs it.\n"
        "Liability is capped at the fees paid in the last 12 months.")
QUESTIONS = ["Who delivers?", "When is payment due?", "Which law governs?"]


@pytest.fixture
def doc() -> Document:
    return Document.from_text(TEXT, doc_id="contract")


@pytest.fixture
def chunked(tiny_text_model):
    """An engine with 32-token prefill steps, so a prompt takes several steps."""
    return get_engine(EngineSettings(model=str(tiny_text_model), device="cpu", dtype="float32",
                                     max_model_len=1024, max_prefill_chunk=32))


def test_one_handle_per_settings(tiny_text_model, tiny_llm):
    s = EngineSettings(model=str(tiny_text_model), device="cpu", dtype="float32", max_model_len=1024)
    assert get_engine(s) is tiny_llm
    assert get_engine(EngineSettings(model=str(tiny_text_model), device="cpu", dtype="float32",
                                     max_model_len=512)) is not tiny_llm


def test_settings_from_the_environment():
    env = {"LONGDOC_MODEL": "/m.gguf", "LONGDOC_DEVICE": "cpu", "LONGDOC_DTYPE": "bfloat16",
           "LONGDOC_MAX_MODEL_LEN": "4096"}
    s = EngineSettings.from_env(env)
    assert (s.model, s.device, s.dtype, s.max_model_len) == ("/m.gguf", "cpu", "bfloat16", 4096)
    assert EngineSettings.from_env(env, device="cuda", dtype=None).device == "cuda"
    assert EngineSettings.from_env({}) == EngineSettings()
    with pytest.raises(ValueError, match="LONGDOC_MAX_MODEL_LEN"):
        EngineSettings.from_env({"LONGDOC_MAX_MODEL_LEN": "lots"})


def test_a_tensor_parallel_engine_answers_as_one_process(tiny_text_model, tiny_llm, doc):
    """LONGDOC_TENSOR_PARALLEL_SIZE=2: the same engine handle API over two gloo ranks gives the same
    answers, log-probs and attributed spans as one process; forget_engines stops its worker."""
    from pipelines.llm import forget_engines

    settings = EngineSettings.from_env({"LONGDOC_TENSOR_PARALLEL_SIZE": "2"}, model=str(tiny_text_model),
                                       device="cpu", dtype="float32", max_model_len=1024)
    assert settings.tensor_parallel_size == 2
    one = ask_document(tiny_llm, doc, QUESTIONS, max_tokens=4, attribute=True, logprobs=True, top_k=2)
    llm = get_engine(settings)
    try:
        assert llm.tp is not None and llm.tp.world == 2
        two = ask_document(llm, doc, QUESTIONS, max_tokens=4, attribute=True, logprobs=True, top_k=2)
        worker = llm.core.runner.workers[0]
    finally:
        forget_engines()
    assert [i.text for i in two.items] == [i.text for i in one.items]
    for a, b in zip(one.items, two.items, strict=True):
        assert [(s.source.char_start, s.source.char_end) for s in a.spans] == \
            [(s.source.char_start, s.source.char_end) for s in b.spans]
        assert [round(s.score, 4) for s in a.spans] == [round(s.score, 4) for s in b.spans]
        assert a.logprobs and len(a.logprobs) == len(b.logprobs)
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-4
    worker.join(timeout=10)
    assert not worker.is_alive()
    with pytest.raises(ValueError, match="LONGDOC_TENSOR_PARALLEL_SIZE"):
        EngineSettings.from_env({"LONGDOC_TENSOR_PARALLEL_SIZE": "two"})


def test_a_model_that_cannot_load_is_one_line(tmp_path):
    with pytest.raises(EngineUnavailable) as err:
        get_engine(EngineSettings(model=str(tmp_path / "missing.gguf"), device="cpu"))
    assert "\n" not in str(err.value) and "no model could be loaded" in str(err.value)


@pytest.mark.parametrize("strategy", ["placement", "prefix"])
def test_a_batch_over_one_document_computes_it_once(chunked, doc, strategy):
    chunked.clear_prefix_cache()
    steps = chunked.sched_counters.steps
    res = ask_document(chunked, doc, QUESTIONS, max_tokens=4, strategy=strategy)
    assert res.status == "ok" and all(it.ok and it.finish_reason for it in res.items)
    if strategy == "placement":
        assert res.reuse["documents_computed"] + res.reuse["documents_loaded"] == 1
    else:  # the document is prefilled once, every question takes it from the prefix cache
        doc_tokens = len(chunked.encode(doc.text, add_special_tokens=False))
        assert all(it.metrics["cached_prompt_tokens"] >= doc_tokens - 32 for it in res.items)
        assert res.reuse["prefix_hit_tokens"] >= len(QUESTIONS) * (doc_tokens - 32)
    # the questions decode together: fewer steps than running them one after another
    batched = chunked.sched_counters.steps - steps
    again = ask_document(chunked, doc, QUESTIONS[:1], max_tokens=4, strategy=strategy)
    if strategy == "placement":  # the second call does not recompute the document
        assert again.reuse["documents_computed"] == 0 and again.reuse["documents_loaded"] == 1
    assert batched < len(QUESTIONS) * 4 + 40
    assert [it.text for it in res.items[:1]] == [again.items[0].text]


def test_several_documents_in_one_call_answer_as_each_alone(chunked, doc):
    other = Document.from_text("The tenant pays the rent monthly. The landlord repairs the roof.\n"
                               "This lease ends on 1 May 2027.", doc_id="lease")
    long_q = "Why " * 300
    alone = [ask_document(chunked, d, qs, max_tokens=5, attribute=True, top_k=2)
             for d, qs in ((doc, QUESTIONS), (other, ["Who repairs?", long_q]))]
    chunked.clear_prefix_cache()
    calls = []
    real = chunked.generate_shared_batch
    chunked.generate_shared_batch = lambda groups, *a, **k: calls.append(len(groups)) or real(groups, *a, **k)
    seen = []
    try:
        both = ask_documents(chunked, [(doc, QUESTIONS), (other, ["Who repairs?", long_q])], max_tokens=5,
                             attribute=True, top_k=2, on_progress=seen.append)
    finally:
        del chunked.generate_shared_batch
    assert calls == [2]  # every question that fits, of both documents, in one batch
    assert [len(r.items) for r in both] == [3, 2]
    for one, many in zip(alone, both, strict=True):
        assert [(it.text, it.error, it.token_ids) for it in many.items] == [
            (it.text, it.error, it.token_ids) for it in one.items]
        assert [[(a.source.doc_id, a.source.char_start) for a in it.spans] for it in many.items] == [
            [(a.source.doc_id, a.source.char_start) for a in it.spans] for it in one.items]
    assert not both[1].items[1].ok and "longer than the configured context" in both[1].items[1].error
    # the call's reuse counted once (on the first result), progress monotone to the end over both
    assert both[0].reuse["prefix_hit_tokens"] > 0 and set(both[1].reuse.values()) == {0}
    done = [p.tokens_done for p in seen]
    assert done == sorted(done) and done[-1] == seen[-1].tokens_total and seen[-1].items_total == 5


def test_attribution_points_at_the_exact_characters(tiny_llm, doc):
    res = ask_document(tiny_llm, doc, QUESTIONS[:2], max_tokens=4, attribute=True, top_k=2)
    for it in res.items:
        assert 1 <= len(it.spans) <= 2
        for a in it.spans:
            s = a.source
            assert doc.text[s.char_start:s.char_end] == s.text and s.doc_id == "contract"
            assert (s.char_start, s.char_end) in sentence_spans(doc)
        assert it.spans[0].score >= it.spans[-1].score
    own = [(0, 8), (60, 80)]
    res = ask_document(tiny_llm, doc, QUESTIONS[:1], max_tokens=4, attribute=True, candidates=own, top_k=5)
    assert sorted((a.source.char_start, a.source.char_end) for a in res.items[0].spans) == own
    assert abs(sum(a.score for a in res.items[0].spans) - 1.0) < 1e-4


def test_sentences_are_trimmed_and_cover_cjk():
    d = Document.from_text("  First one.  Second!\n第一句。第二句？\n\n")
    assert [d.text[s:e] for s, e in sentence_spans(d)] == ["First one.", "Second!", "第一句。", "第二句？"]


def test_logprobs_are_those_of_score(tiny_llm, doc):
    res = ask_document(tiny_llm, doc, QUESTIONS[:1], max_tokens=3, logprobs=True)
    it = res.items[0]
    from pipelines.llm import INSTRUCTIONS, QUESTION

    ref = tiny_llm.score(INSTRUCTIONS + doc.text + QUESTION.format(question=QUESTIONS[0]), it.token_ids)
    assert it.logprobs == pytest.approx(ref.logprobs, abs=1e-5) and len(it.logprobs) == len(it.token_ids)


def test_choose_picks_the_higher_log_probability_and_matches_score(tiny_llm):
    prompt = "Is the cap lowered? Answer:"
    c = choose(tiny_llm, prompt, {"yes": " y", "no": " n"})  # one token each: one forward
    for label, cont in {"yes": " y", "no": " n"}.items():
        assert c.logprobs[label] == pytest.approx(tiny_llm.score(prompt, cont).total, abs=1e-4)
    assert c.label == max(c.logprobs, key=c.logprobs.get)
    assert c.margin == pytest.approx(abs(c.logprobs["yes"] - c.logprobs["no"]))
    m = choose(tiny_llm, prompt, {"internal": " internal", "external": " external"})  # several tokens
    assert m.logprobs["internal"] == pytest.approx(tiny_llm.score(prompt, " internal").total, abs=1e-5)
    assert m.label == max(m.logprobs, key=m.logprobs.get)


def test_progress_is_monotone_and_reaches_the_total(chunked, doc):
    seen = []
    res = ask_document(chunked, doc, QUESTIONS, max_tokens=4, attribute=True, logprobs=True,
                       on_progress=seen.append)
    assert res.status == "ok" and len(seen) > 5
    done = [p.tokens_done for p in seen]
    assert done == sorted(done) and done[-1] == seen[-1].tokens_total and len(set(done)) > 4
    assert seen[-1].items_done == len(QUESTIONS) and seen[-1].fraction == 1.0
    assert all(p.eta_s is None or p.eta_s >= 0 for p in seen) and "tokens" in seen[-1].describe()


def test_cancellation_stops_within_a_step(chunked, doc):
    cancel = threading.Event()
    at = {}

    def progress(p):
        if p.tokens_done > 0 and not cancel.is_set():
            cancel.set()
            at["steps"] = chunked.sched_counters.steps

    res = ask_document(chunked, doc, QUESTIONS, max_tokens=8, strategy="prefix", on_progress=progress,
                       cancel=cancel)
    assert res.status == "cancelled" and "cancelled" in res.message
    assert chunked.sched_counters.steps == at["steps"]  # no engine step after the one that saw it
    assert all(not it.ok and "cancelled" in it.error for it in res.items)
    assert not chunked.core.has_unfinished()  # nothing left queued in the engine


def test_budget_exceeded_keeps_the_finished_items(tiny_text_model, doc):
    llm = get_engine(EngineSettings(model=str(tiny_text_model), device="cpu", dtype="float32",
                                    max_model_len=1024, max_num_seqs=2))
    from pipelines.llm import INSTRUCTIONS, QUESTION

    def work(q: str) -> int:  # prompt tokens + max_tokens: what a finished answer counts
        return (len(llm.encode(INSTRUCTIONS)) + len(llm.encode(doc.text, add_special_tokens=False))
                + len(llm.encode(QUESTION.format(question=q), add_special_tokens=False)) + 6)

    # two requests run at once: the first two finish within the budget, the next two go over it
    # (the default strategy computes the shared head first: its tokens count once more)
    first_two = work(QUESTIONS[0]) + work(QUESTIONS[1]) + len(llm.encode(INSTRUCTIONS + doc.text))
    res = ask_document(llm, doc, QUESTIONS + ["Who pays?"], max_tokens=6, budget=Budget(tokens=first_two + 5))
    assert res.strategy == "prefix"
    assert res.status == "budget_exceeded"
    assert res.message.startswith("token budget of") and "answers finished and kept" in res.message
    kept = [it for it in res.items if it.ok]
    assert res.items[0].ok and res.items[1].ok and len(kept) == 2 and all(it.finish_reason in ("length", "stop", "eos") for it in kept)
    assert all("budget" in it.error for it in res.items if not it.ok)
    timed = ask_document(llm, doc, QUESTIONS, max_tokens=6, budget=Budget(seconds=0.0))
    assert timed.status == "budget_exceeded" and timed.message.startswith("time budget of 0 s exceeded")


def test_an_item_too_long_keeps_the_rest_of_the_batch(tiny_llm, doc):
    long_q = "Why " * 300
    res = ask_document(tiny_llm, doc, [QUESTIONS[0], long_q, QUESTIONS[1]], max_tokens=4)
    assert res.status == "ok"
    assert res.items[0].ok and res.items[2].ok and res.items[0].text is not None
    assert not res.items[1].ok and "longer than the configured context" in res.items[1].error


def test_a_long_item_goes_through_the_fallback_with_its_report(tiny_llm):
    from engine import FallbackPolicy

    big = Document.from_text("The notice period is 60 days. " * 40)
    res = ask_document(tiny_llm, big, ["How long is the notice?"], max_tokens=4,
                       fallback=FallbackPolicy(strategy="truncate", truncate_side="middle"))
    it = res.items[0]
    assert it.ok and it.fallback is not None and it.fallback.fallback_triggered
    assert it.fallback.tokens_dropped > 0 and it.to_dict()["fallback"]["strategy"] == "truncate"


def test_llm_modes_and_the_registry(monkeypatch):
    import pipelines.llm.modes as modes

    monkeypatch.setattr(modes, "REGISTRY", {k: dict(v) for k, v in modes.REGISTRY.items()})  # registered below
    assert LLMMode.parse("auto") is LLMMode.AUTO
    with pytest.raises(ValueError, match="off, auto or on"):
        LLMMode.parse("sometimes")
    assert not step_enabled("x.never", "auto") and step_enabled("x.never", "on")  # never measured
    assert not step_enabled("x.never", "off")
    assert decision("x.never") is None
    with pytest.raises(ValueError, match="measured gain"):
        register(StepDecision("x.step", "fp", in_auto=True, measurement=None))
    register(StepDecision("x.step", "fp", True, Measurement("f1", 0.5, 0.6, "python bench.py", "2026-12-03")))
    assert step_enabled("x.step", "auto", "fp") and not step_enabled("x.step", "auto")
    assert not step_enabled("x.step", "auto", "fp", estimated_s=300, budget_s=120)  # too slow on this device
    assert step_enabled("x.step", "on", "fp", estimated_s=300, budget_s=120)


def test_an_item_the_cache_cannot_hold_keeps_the_rest_of_the_batch(tiny_text_model):
    from engine import LLM, CacheConfig

    llm = LLM(model=tiny_text_model, device="cpu", dtype="float32", max_model_len=1024,
              cache=CacheConfig(memory_budget=1_400_000, kv_dtype="float32"))  # ~336 tokens a sequence in float32 pages
    short = Document.from_text("The law of Ontario governs it.")
    res = ask_document(llm, short, [QUESTIONS[2], "Why " * 80, QUESTIONS[0]], max_tokens=4)
    assert res.status == "ok" and res.items[0].ok and res.items[2].ok
    assert not res.items[1].ok and "KV cache" in res.items[1].error


def test_callers_on_two_threads_take_turns_on_one_engine(tiny_llm, doc):
    alone = ask_document(tiny_llm, doc, QUESTIONS[:2], max_tokens=4)
    results = {}

    def run(name, qs):
        results[name] = ask_document(tiny_llm, doc, qs, max_tokens=4)

    threads = [threading.Thread(target=run, args=(i, QUESTIONS[:2])) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [[it.text for it in r.items] for r in results.values()] == [[it.text for it in alone.items]] * 2


def test_a_cache_folder_that_is_a_file_is_one_line_naming_the_folder(tiny_text_model, tmp_path):
    """--cache-dir pointing at a file: one line that names the folder, not 'no model could be
    loaded' (the model is fine)."""
    f = tmp_path / "cachefile"
    f.write_text("not a folder")
    with pytest.raises(EngineUnavailable) as err:
        get_engine(EngineSettings(model=str(tiny_text_model), device="cpu", dtype="float32", max_model_len=256,
                                  disk_cache_dir=str(f)))
    line = str(err.value)
    assert "\n" not in line and "no model could be loaded" not in line
    assert line.startswith("the engine cannot start") and "is a file" in line and str(f) in line
