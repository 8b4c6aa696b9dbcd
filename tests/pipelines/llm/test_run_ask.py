"""LLMRun.ask ("ask about this document"): runs under every mode, answers carry the spans they rest
on in their own source document, a second question over the same documents does not recompute
them, and a model that cannot load gives each question one line while nothing is raised."""

from __future__ import annotations

from pipelines.documents import Document
from pipelines.llm import EngineSettings, LLMRun
from pipelines.llm.run import join_documents

A = Document.from_text("The supplier shall deliver the goods within 30 days.\fPayment is due on delivery.",
                       doc_id="a", source_name="a.txt")
B = Document.from_text("The supplier shall deliver the goods within 14 days. Payment is due in 60 days.",
                       doc_id="b", source_name="b.txt")


def test_join_maps_every_part_back():
    joined = join_documents([A, B])
    assert joined.text == "[a.txt]\n" + A.text + "\n\n[b.txt]\n" + B.text  # the prompt the model has always read
    for seg, d in zip(joined.segments, (A, B), strict=True):
        assert seg.doc is d and joined.text[seg.start:seg.end] == d.text
    assert joined.ranges() == [(s.start, s.end) for s in joined.segments]
    one = join_documents([A])
    assert one.doc is A and one.ranges() == [(0, len(A.text))]
    # back and forth: a range of B, a passage that starts in B's heading (clipped to B's text), a heading alone
    b0 = joined.segments[1].start
    assert joined.to_source(b0 + 4, b0 + 12).text == B.text[4:12] and joined.to_source(b0 + 4, b0 + 12).doc_id == "b"
    assert joined.to_source(b0 - 5, b0 + 3).text == B.text[:3]
    assert joined.to_source(b0 - 5, b0 - 1) is None
    assert joined.to_source(b0 - 5, b0 + 3, clip=False) is None
    assert joined.to_joined("b", 4, 12) == (b0 + 4, b0 + 12) and joined.to_joined("c", 0, 1) is None
    # a page break of A keeps its page in the source span
    f = A.text.index("\f") + 1
    assert joined.to_source(joined.segments[0].start + f, joined.segments[0].start + f + 7).page == 2


def test_ask_under_off_answers_with_spans_in_the_source_documents(tiny_llm):
    run = LLMRun("off", EngineSettings(), engine=tiny_llm)
    answers = run.ask([A, B], ["How many days for delivery?"], max_tokens=6)
    (ans,) = answers
    rep = run.report()
    assert rep is not None and rep.mode == "off" and rep.answers == answers
    assert [s.step for s in rep.steps] == ["ask"] and rep.steps[0].ran
    assert ans.prompt_tokens > 0 and ans.seconds > 0
    if ans.error is None:
        assert ans.text
    assert ans.spans, "attribution names the sentences the answer rests on"
    # the tiny engine is not the model the confidence was fitted for: said, in the JSON too
    assert ans.calibrated is False and '"calibrated":false' in ans.model_dump_json()
    docs = {"a": A, "b": B}
    for sp in ans.spans:
        d = docs[sp.doc_id]
        assert d.text[sp.char_start:sp.char_end] == sp.text and sp.page == d.page_of(sp.char_start)
        assert 0 <= sp.score <= 1


def test_second_question_reuses_the_documents(tiny_llm):
    run = LLMRun("auto", EngineSettings(), engine=tiny_llm)
    doc = Document.from_text("A fresh document for reuse. " * 20, doc_id="reuse")
    run.ask(doc, ["What is it?"], max_tokens=3, evidence=False)
    run.ask(doc, ["Is it fresh?"], max_tokens=3, evidence=False)
    first, second = run.records
    # computed by the first question (placed, or prefilled and cut at its last block), taken from a
    # cache by the second
    assert first.reuse.get("documents_computed", 0) == 1 or first.reuse.get("prefix_hit_tokens", 0) == 0
    assert second.reuse.get("documents_computed", 0) == 0
    assert second.reuse.get("documents_loaded", 0) == 1 or run.answers[1].cached_prompt_tokens >= len(doc.text) - 16


def test_no_model_is_one_line_per_question(tmp_path):
    run = LLMRun("off", EngineSettings(model=str(tmp_path / "missing.gguf"), device="cpu"))
    answers = run.ask(A, ["Who delivers?", "When?"])
    assert [a.text for a in answers] == ["", ""]
    assert all(a.error and "\n" not in a.error and "missing.gguf" in a.error for a in answers)
    rep = run.report()
    assert rep.steps[0].step == "ask" and not rep.steps[0].ran
    assert "answers" in rep.model_dump(exclude_none=False)


def test_report_without_answers_leaves_the_field_out(tiny_llm):
    run = LLMRun("on", EngineSettings(), engine=tiny_llm)
    with run.step("x"):
        pass
    assert "answers" not in run.report().model_dump_json()
