"""The reports pipeline's LLM steps (reports.scope, reports.deep_summary) with the tiny random-weight
model (character tokenizer): the plumbing — the steps run and fill their fields, every span points at
exact characters, off is byte-identical to no llm, a missing model leaves the rules' result intact,
the fusion changes a mention only as documented — and one quick test with the real default model."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

import tests.pipelines.reports.helpers as H
from app.export import to_json
from pipelines.documents import Document, load_document
from pipelines.llm import EngineSettings, LLMRun
from pipelines.llm.modes import decision
from pipelines.reports import ReportResult, analyse_document
from pipelines.reports import llm_steps as L
from tests.pipelines.llm.conftest import _one_torch_thread, tiny_llm, tiny_text_model  # noqa: F401

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "reports"


@cache
def en_paper(tmp: str) -> tuple[Document, bytes]:
    path = Path(tmp) / "en.pdf"
    H.make_en_paper(path)
    return load_document(path), path.read_bytes()


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    return en_paper(str(tmp_path_factory.mktemp("reports-llm")))


def _check_span(doc: Document, sp) -> None:
    assert doc.text[sp.char_start:sp.char_end] == sp.text
    assert sp.page == doc.page_of(sp.char_start)


def test_off_is_byte_identical_and_loads_nothing(paper):
    doc, data = paper
    plain = to_json(analyse_document(doc, data))
    off = analyse_document(doc, data, llm=LLMRun("off", EngineSettings(model="/nonexistent.gguf")))
    assert to_json(off) == plain
    assert '"llm"' not in plain and '"scope"' not in plain and '"deep_summary"' not in plain


def test_missing_model_one_line_and_rules_intact(paper):
    doc, data = paper
    plain = analyse_document(doc, data)
    res = analyse_document(doc, data, llm=LLMRun("on", EngineSettings(model="/nonexistent.gguf")))
    assert res.mentions == plain.mentions and res.targets == plain.targets
    assert res.scope is None and res.deep_summary is None
    assert res.llm is not None and res.llm.message and "\n" not in res.llm.message
    recs = {r.step: r for r in res.llm.steps}
    assert recs[L.STEP_SUMMARY].ran is False and recs[L.STEP_SUMMARY].reason == "no model"


def test_auto_runs_neither_step_without_a_measured_gain(paper, tiny_llm):  # noqa: F811
    doc, data = paper
    assert not (decision(L.STEP_SCOPE) and decision(L.STEP_SCOPE).in_auto)
    res = analyse_document(doc, data, llm=LLMRun("auto", engine=tiny_llm))
    assert res.scope is None and res.deep_summary is None
    assert res.llm is not None and not any(s.ran for s in res.llm.steps)


# one mention of each uncertain case (see pipelines.reports.llm_steps), and an explicit external
SCOPE_TEXT = """1 Introduction
We study how sites differ across the survey region.
Figure 1: Sites sampled in the survey.
We follow Lee et al. (2019), and Figure 1 shows the sites.
We reproduced Figure 5 exactly.
2 Results
Table 1: Rates per site.
Site Rate
A 0.5
The rates were measured every week at every site of the region.
Table 7 lists the weekly rates.
Table 2 in [3] and Table 1 list rates.
References
[3] A. Lee. Rates of things. Journal, 2019.
"""
SCOPE_CASES = {"Figure 1": "internal_near_other_work", "Figure 5": "external_inferred", "Table 7": "no_such_number",
               "Table 1": "external_by_sentence"}


def test_scope_cases_and_decisions(tiny_llm):  # noqa: F811
    """The rules' uncertain mentions are asked (the explicit 'Table 2 in [3]' is not); each
    decision points at its mention and sentence; a changed mention changed as its case says."""
    doc = Document.from_text(SCOPE_TEXT, doc_id="scope")
    plain = analyse_document(doc)
    res = analyse_document(doc, llm=LLMRun("on", engine=tiny_llm))
    assert res.llm.ran(L.STEP_SCOPE)
    assert {d.text: d.case for d in res.scope} == SCOPE_CASES
    assert {r.step: r for r in res.llm.steps}[L.STEP_SCOPE].requests >= len(SCOPE_CASES) + 2  # + calibration
    asked = {d.mention for d in res.scope}
    for i, (a, b) in enumerate(zip(plain.mentions, res.mentions, strict=True)):
        if i not in asked:
            assert a == b
    for d in res.scope:
        m, before = res.mentions[d.mention], plain.mentions[d.mention]
        assert m.span == d.span == before.span
        _check_span(doc, d.span)
        _check_span(doc, d.context)
        assert d.context.char_start <= d.span.char_start and d.span.char_end <= d.context.char_end
        assert d.rule_resolution == before.resolution and d.rule_p_external == L.PRIORS[d.case]
        assert d.p_external == pytest.approx(L._sigmoid(L._logit(d.rule_p_external) + d.model_margin), abs=1e-3)
        assert d.decision == ("external" if d.p_external > 0.5 else "internal")
        assert d.changed == (m.resolution != before.resolution or m.targets != before.targets)
        if d.changed and d.case == "external_by_sentence":
            assert m.targets == ["table-1"] and m.resolution == "internal"
        if d.changed and d.case == "internal_near_other_work":
            assert m.targets == [] and m.resolution == "external"
        if not d.changed:
            assert "reports.scope agrees" in m.reason
    # the unresolved list and the stats follow the changed mentions
    assert res.stats["external"] == sum(m.resolution == "external" for m in res.mentions)
    assert len(res.unresolved) == sum(m.resolution in ("unresolved", "ambiguous") for m in res.mentions)
    from app.render.reports import scope_rows

    rows = scope_rows(res)
    assert [r["mention"] for r in rows] == [d.text for d in res.scope]
    assert [r["changed"] for r in rows] == [d.changed for d in res.scope]


def test_steps_run_and_every_span_is_exact(paper, tiny_llm):  # noqa: F811
    doc, data = paper
    res = analyse_document(doc, data, llm=LLMRun("on", engine=tiny_llm))
    assert res.llm is not None and res.llm.ran(L.STEP_SUMMARY)
    rec = {r.step: r for r in res.llm.steps}
    assert rec[L.STEP_SUMMARY].requests >= 2 and rec[L.STEP_SUMMARY].generated_tokens == 0
    assert L.STEP_SCOPE not in rec
    assert res.scope is None  # the paper's mentions are all settled by explicit words
    # deep summary: sections, key sentences quoted exactly, callouts with the first description
    ds = res.deep_summary
    assert ds is not None and ds.strategy == "key sentences" and ds.sections
    assert [s.title for s in ds.sections][:3] == ["1 Introduction", "2 Methods", "3 Results"]
    captions = [(t.span.char_start, t.span.char_end) for t in res.targets if t.kind in ("figure", "table")]
    n_sent = 0
    for sec in ds.sections:
        assert sec.error or sec.sentences
        starts = [s.spans[0].char_start for s in sec.sentences]
        assert starts == sorted(starts) and len(sec.sentences) <= 4  # reading order
        for s in sec.sentences:
            n_sent += 1
            assert len(s.spans) == 1 and s.text == s.spans[0].text and s.grounding == "quoted"
            _check_span(doc, s.spans[0])
            assert sec.char_start <= s.spans[0].char_start and s.spans[0].char_end <= sec.char_end
            assert not any(a < s.spans[0].char_end and s.spans[0].char_start < b for a, b in captions)
            assert s.attention is not None and s.centrality > 0
        for c in sec.callouts:
            _check_span(doc, c.mention)
    assert n_sent
    assert 1 <= len(ds.whole) <= L.WHOLE_KEYS
    shown = {(s.spans[0].char_start, s.spans[0].char_end) for sec in ds.sections for s in sec.sentences}
    for s in ds.whole:
        assert s.text == s.spans[0].text and doc.text[s.spans[0].char_start:s.spans[0].char_end] == s.text
        assert any(sec.char_start <= s.spans[0].char_start < sec.char_end for sec in ds.sections)
    assert shown
    callouts = [c for sec in ds.sections for c in sec.callouts]
    firsts = [c.target for c in callouts if c.first]
    assert len(firsts) == len(set(firsts)) and {"figure-2", "figure-3", "table-1"} <= set(firsts)
    for c in callouts:
        if c.first:
            assert c.description.startswith(c.label) and 0 < c.description_tokens <= L.DESCRIPTION_TOKENS
        else:
            assert c.description == ""
    # chain: 'The figures mentioned earlier' reaches figures 2 and 3 via the mention
    chain = [c for c in callouts if c.via == ["The figures mentioned earlier"]]
    assert {c.target for c in chain} == {"figure-2", "figure-3"} and all(c.hops >= 1 for c in chain)
    # the export round-trips and is deterministic
    text = to_json(res)
    assert ReportResult.model_validate_json(text) == res
    again = analyse_document(doc, data, llm=LLMRun("on", engine=tiny_llm))
    assert again.deep_summary == res.deep_summary
    # rendered: the terminal report and the page's Markdown show the quotes and the first descriptions
    from rich.console import Console

    from app.render.reports import _md, deep_summary_markdown, render_terminal

    console = Console(record=True, width=200)
    console.print(render_terminal(res))
    shown_text = console.export_text()
    assert "Deep summary: key sentences quoted from the report\n" in shown_text
    assert "3 Results" in shown_text
    md = deep_summary_markdown(res)
    for c in callouts:
        if c.first:
            assert _md(c.description) in md  # escaped: document text is never read as Markdown
    for sec in ds.sections:
        for s in sec.sentences:
            assert "“" + _md(s.text) + "”" in md
    assert "<" not in md.replace("\\<", "")
    assert plain_render(doc, data) not in ("",) and "Deep summary" not in plain_render(doc, data)


def plain_render(doc, data) -> str:
    from rich.console import Console

    from app.render.reports import render_terminal

    console = Console(record=True, width=200)
    console.print(render_terminal(analyse_document(doc, data)))
    return console.export_text()


def test_sections_longer_than_the_context_are_read_in_parts(paper, tiny_llm, monkeypatch):  # noqa: F811
    """The tiny model's context is 1,024 characters; the paper is longer: each section is read in
    runs of whole candidate sentences that fit, so there are more reads than sections, and the
    quotes are the same kind of exact spans."""
    doc, data = paper
    assert len(doc.text) > tiny_llm.max_model_len
    monkeypatch.setattr(L, "SECTION_TOKENS", 150)  # characters, with the tiny model's tokenizer
    res = analyse_document(doc, data, llm=LLMRun("on", engine=tiny_llm), llm_steps=[L.STEP_SUMMARY])
    ds = res.deep_summary
    rec = {r.step: r for r in res.llm.steps}[L.STEP_SUMMARY]
    assert rec.requests > sum(1 for s in ds.sections if s.sentences)
    assert ds.strategy == "key sentences"
    for sec in ds.sections:
        for x in sec.sentences:
            assert x.attention is not None and x.text == doc.text[x.spans[0].char_start:x.spans[0].char_end]


def test_without_the_models_attention_the_quotes_rest_on_centrality(paper, tiny_llm, monkeypatch):  # noqa: F811
    """An engine error while reading the attention leaves a summary by centrality alone, and says so."""
    from engine import EngineError
    from pipelines.llm import spans as S

    def broken(*a, **k):
        raise EngineError("the engine is down")

    monkeypatch.setattr(S, "attention_shares", broken)
    doc, data = paper
    res = analyse_document(doc, data, llm=LLMRun("on", engine=tiny_llm), llm_steps=[L.STEP_SUMMARY])
    ds = res.deep_summary
    assert ds.strategy == "key sentences (centrality only)"
    assert any("could not be read" in d and "the engine is down" in d for d in ds.dropped)
    quoted = [x for sec in ds.sections for x in sec.sentences]
    assert quoted and all(x.attention is None for x in quoted)


def test_fusion_changes_only_as_documented():
    """p(external) = sigmoid(logit(prior) + margin): a zero margin keeps the rules' reading, and
    the margin needed to overturn a prior is its logit."""
    from pipelines.documents import Span
    from pipelines.reports.mentions import Found

    doc = Document.from_text("Our Figure 2 repeats Figure 2 of [1].")
    for case, prior in L.PRIORS.items():
        for margin, flips in ((0.0, False), (-L._logit(prior) * 1.5, True)):
            f = Found(Span(doc, 4, 12), "figure", targets=["figure-2"], resolution="internal", confidence=0.95,
                      reason="number match")
            if case in ("external_inferred", "external_by_sentence"):
                f.resolution, f.targets, f.dropped_targets = "external", [], ["figure-2"]
            if case == "no_such_number":
                f.resolution, f.targets, f.why = "unresolved", [], "no_such_number"
            before = (f.resolution, list(f.targets))
            p = L._sigmoid(L._logit(prior) + margin)
            pd = L._Pending(f, case, (0, len(doc.text)), f.resolution, {}, margin, p,
                            "external" if p > 0.5 else "internal", False)
            L._apply(pd)
            assert pd.changed == flips, (case, margin)
            if not flips:
                assert (f.resolution, f.targets) == before and "agrees" in f.reason
            elif case == "external_by_sentence":
                assert f.resolution == "internal" and f.targets == ["figure-2"]
            elif case == "internal_near_other_work":
                assert f.resolution == "external" and f.targets == [] and f.dropped_targets == ["figure-2"]
            elif case == "external_inferred":
                assert f.resolution == "unresolved" and not f.targets
            else:
                assert f.resolution == "external"


@pytest.mark.model
def test_scope_with_the_default_model():
    """eglen: the eight 'Figure n'/'Table 2' mentions of the original paper the rules infer external."""
    pdf = FIX / "eglen.pdf"
    doc = load_document(pdf)
    run = LLMRun("on", EngineSettings(device="cpu", dtype="float32", max_model_len=4096))
    res = analyse_document(doc, pdf.read_bytes(), llm=run, llm_steps=[L.STEP_SCOPE])  # scope only: quick
    assert res.llm.ran(L.STEP_SCOPE), res.llm
    assert res.scope and all(d.case == "external_inferred" for d in res.scope if d.text.lower().startswith("fig"))
    for d in res.scope:
        assert set(d.logprobs) == {"internal", "external"} and all(v < 0 for v in d.logprobs.values())
    assert res.deep_summary is None and L.STEP_SUMMARY not in {s.step for s in res.llm.steps}
