"""The contracts pipeline's LLM steps (pipelines.contracts.llm_steps) with the tiny random-weight
model: the steps run and fill their fields, every span points at exact characters, `--llm off` is
the rules-only export byte for byte, a missing model leaves one line and the rules' result intact,
the fusion changes materiality only as documented, and the deterministic direction hints."""

from __future__ import annotations

import pytest

import pipelines.contracts.llm_steps as steps
from app.export import to_json
from pipelines.contracts import compare_texts
from pipelines.contracts.llm_steps import (
    ChangeView,
    StepSettings,
    flag_hint,
    fuse,
    rules_sentence,
    spans_ok,
    support,
)
from pipelines.contracts.model import Flag
from pipelines.documents import Document
from pipelines.llm import EngineSettings, LLMRun, get_engine

A = """1. Payment
Customer shall pay each invoice within 30 days of receipt.

2. Term
This Agreement lasts one year from the Effective Date.

3. Liability
Provider may limit its liability to the fees paid.

4. Notices
Notices are sent by email to the address on file.
"""
B = """1. Payment
Customer shall pay each invoice within 60 days of receipt.

2. Term
This agreement lasts one year from the Effective Date.

3. Liability
Provider must limit its liability to the fees paid.

4. Notices
Notices are sent by email or post to the address on file.

5. Audit
Provider may audit Customer once a year.
"""
SMALL = StepSettings(max_explain=3, side_chars=120, context=30, max_tokens=12, summary_tokens=24)


@pytest.fixture(scope="module")
def engine(tiny_text_model):
    # the tiny model with room for the steps' prompts (few-shot instructions + one change, per character)
    return get_engine(EngineSettings(model=str(tiny_text_model), device="cpu", dtype="float32", max_model_len=2048))


def _docs():
    return Document.from_text(A, doc_id="a", source_name="a"), Document.from_text(B, doc_id="b", source_name="b")


def test_off_is_the_rules_only_export_byte_for_byte():
    plain = to_json(compare_texts(A, B))
    off = to_json(compare_texts(A, B, llm=LLMRun("off")))
    assert off == plain
    for key in ('"explanation"', '"materiality"', '"amendment"', '"llm"'):
        assert key not in plain


def test_the_steps_run_fill_their_fields_and_point_at_exact_characters(engine):
    seen: list[tuple[str, float]] = []
    run = LLMRun("on", EngineSettings(), engine=engine, on_progress=lambda step, p: seen.append((step, p.fraction)))
    from pipelines.contracts.pipeline import compare_documents

    doc_a, doc_b = _docs()
    res = compare_documents(doc_a, doc_b, llm=run, llm_settings=SMALL)
    assert res.llm is not None and [s.step for s in res.llm.steps] == list(steps.STEPS)
    assert all(s.ran and s.error is None and s.requests > 0 for s in res.llm.steps), res.llm.steps
    # every change the rules call material judged (the others cannot change); explanations for the
    # first material ones (at most max_explain)
    assert all((it.materiality is not None) == it.materiality_rule for it in _with_rule(res))
    material = [it for it in res.summary if it.material]
    explained = [it for it in res.summary if it.explanation is not None]
    assert explained == material[:SMALL.max_explain] and explained
    for it in explained:
        e = it.explanation
        assert e.text and (e.a_spans or e.b_spans)
        assert 0.0 <= e.support <= 1.0
        if not e.kept:
            assert e.text == rules_sentence(steps.change_view(res, res.summary.index(it), SMALL))
    # the payment change points at the changed figure on both sides, and its hint has the direction
    pay = next(it for it in explained if it.a == "1")
    assert [s.text for s in pay.explanation.a_spans] == ["30"] and [s.text for s in pay.explanation.b_spans] == ["60"]
    assert pay.explanation.hint == "30 days → 60 days: longer" and "60 days" in pay.explanation.text
    # the added clause rests on the whole new clause
    audit = next((it for it in explained if it.change == "added"), None)
    if audit is not None:
        assert audit.explanation.b_spans[0].text.startswith("5. Audit") and not audit.explanation.a_spans
    assert res.amendment is not None and res.amendment.text and res.amendment.sentences
    assert all(s.rows for s in res.amendment.sentences)
    assert spans_ok(doc_a, doc_b, res)
    # progress from every step while it ran, ending at 1
    assert {s for s, _ in seen} == set(steps.STEPS)
    assert all(max(f for s, f in seen if s == name) == 1.0 for name in steps.STEPS)
    # the export round-trips and carries the new fields
    text = to_json(res)
    assert '"explanation"' in text and '"materiality"' in text and '"amendment"' in text and '"llm"' in text
    assert type(res).model_validate_json(text) == res


def _with_rule(res):
    for it in res.summary:
        it.__dict__["materiality_rule"] = it.materiality.rule_material if it.materiality is not None else it.material
        yield it


def test_a_missing_model_leaves_one_line_and_the_rules_result(tmp_path):
    plain = compare_texts(A, B)
    res = compare_texts(A, B, llm=LLMRun("on", EngineSettings(model=str(tmp_path / "nonexistent.gguf"))))
    assert res.llm is not None and res.llm.message and "\n" not in res.llm.message
    assert not any(s.ran for s in res.llm.steps) and [s.step for s in res.llm.steps] == list(steps.STEPS)
    assert res.llm.steps[0].reason == "no model" and res.llm.steps[0].error == res.llm.message
    assert res.model_copy(update={"llm": None}) == plain
    assert to_json(res.model_copy(update={"llm": None})) == to_json(plain)


def test_auto_runs_no_step_that_was_not_measured_to_help(engine):
    res = compare_texts(A, B, llm=LLMRun("auto", EngineSettings(), engine=engine), llm_settings=SMALL)
    for s in res.llm.steps:
        d = steps.decision_of(s.step)
        assert s.ran == bool(d and d.in_auto)
    if not any(s.ran for s in res.llm.steps):
        assert res.model_copy(update={"llm": None}) == compare_texts(A, B)


def test_the_fusion_changes_materiality_only_as_documented(engine, monkeypatch):
    plain = compare_texts(A, B)
    tiers = {(it.a, it.b): steps.tier(plain, it) for it in plain.summary}
    assert sorted(tiers.values()) == [0, 0, 1, 2, 3]

    from pipelines.llm.choose import Choice
    from pipelines.llm.run import StepContext

    def confident(label):
        def fake(st, prompts, options, done_before=0, total=None):
            assert set(options) == {"material", "cosmetic"}
            if done_before == 0:  # the content-free prompt: no bias
                return [Choice("material", {"material": -1.0, "cosmetic": -1.0}, 0.0)]
            lp = {"material": -0.1, "cosmetic": -9.0} if label == "material" else {"material": -9.0, "cosmetic": -0.1}
            return [Choice(label, lp, 8.9) for _ in prompts]
        return fake

    monkeypatch.setattr(StepContext, "choose", confident("cosmetic"))
    res = compare_texts(A, B, llm=LLMRun("on", EngineSettings(), engine=engine),
                        llm_settings=StepSettings(max_explain=0, demote_margin=1.0))
    after = {(it.a, it.b): it.material for it in res.summary}
    # tier 0 (duration, obligation) stays material; the added clause and the wording change are demoted
    assert after == {k: t == 0 for k, t in tiers.items()}
    assert res.stats["material"] == 2 and [it.material for it in res.summary] == [True, True, False, False, False]
    assert all(it.materiality.changed == (tiers[(it.a, it.b)] in (1, 2)) for it in res.summary
               if it.materiality is not None)
    assert [it.materiality is None for it in res.summary] == [False, False, True, False, False]
    # a margin wider than the model's confidence leaves the rules' decisions as they were
    res = compare_texts(A, B, llm=LLMRun("on", EngineSettings(), engine=engine),
                        llm_settings=StepSettings(max_explain=0, demote_margin=10.0))
    assert [it.material for it in res.summary] == [it.material for it in plain.summary]

    monkeypatch.setattr(StepContext, "choose", confident("material"))
    res = compare_texts(A, B, llm=LLMRun("on", EngineSettings(), engine=engine),
                        llm_settings=StepSettings(max_explain=0))
    # confident "material" never promotes what the rules found not material, nor reorders the tiers
    assert [(it.a, it.b) for it in res.summary] == [(it.a, it.b) for it in plain.summary]
    assert [it.material for it in res.summary] == [it.material for it in plain.summary]


def test_fuse():
    assert fuse(True, 0, -50.0) is True
    assert fuse(True, 1, -1.5, demote_margin=1.0) is False and fuse(True, 1, -0.5, demote_margin=1.0) is True
    assert fuse(True, 2, -2.0, demote_margin=1.0) is False and fuse(True, 2, 3.0) is True
    assert fuse(True, 2, -2.0) is True  # the default margin (3.0) needs a very confident "cosmetic"
    assert fuse(False, 3, 50.0) is False


def _flag(kind, old, new, detail=""):
    from pipelines.documents import SourceSpan

    def span(t):
        return None if t is None else SourceSpan(doc_id="x", char_start=0, char_end=len(t), page=1, text=t)

    return Flag(kind=kind, a_span=span(old), b_span=span(new), detail=detail)


@pytest.mark.parametrize(("kind", "old", "new", "want"), [
    ("duration", "30 days", "sixty (60) days", "30 days → sixty (60) days: longer"),
    ("duration", "two years", "18 months", "two years → 18 months: shorter"),
    ("amount", "$5,000", "$1 million", "$5,000 → $1 million: higher"),
    ("amount", "人民币十万元", "5万元", "人民币十万元 → 5万元: lower"),
    ("percentage", "10%", "5 percent", "10% → 5 percent: lower"),
    ("date", "October 11, 2017", "May 25, 2018", "October 11, 2017 → May 25, 2018: later"),
    ("date", "2004年5月1日", "2022年5月1日", "2004年5月1日 → 2022年5月1日: later"),
    ("date", None, "2022年2月15日", "2022年2月15日 added"),
    ("number", "3", None, "3 removed"),
])
def test_direction_hints(kind, old, new, want):
    assert flag_hint(_flag(kind, old, new)) == want


def test_obligation_and_disclaimer_hints():
    assert flag_hint(_flag("obligation", "may", "must", "may → must (stronger)")) == "may → must: stronger obligation"
    assert flag_hint(_flag("obligation", "shall", "may", "shall → may (weaker)")) == "shall → may: weaker obligation"
    assert flag_hint(_flag("disclaimer", "x", None, "deleted “x”")) == "disclaimer of liability removed"


def test_support_rejects_sentences_about_other_words():
    v = ChangeView(0, 0, "1 Payment", "modified", "… pay each invoice within 30 days …",
                   "… pay each invoice within 60 days …", ['"30" → "60"'], "30 days → 60 days: longer")
    assert support("The invoice payment period is longer: 60 days.", v) == 1.0
    assert not steps.copies("The invoice payment period is longer: 60 days.", v)
    assert support("The Provider's obligation to audit the Customer's records.", v) < 0.5
    assert rules_sentence(v) == "30 days → 60 days: longer."


def test_copies():
    v = ChangeView(0, 0, "12.3 Required Disclosures", "modified",
                   "… the Disclosing Party with reasonable advance notice of the required disclosure …",
                   "… the Discloser with reasonable advance notice of the required disclosure …", [], None)
    assert steps.copies("The Discloser with reasonable advance notice of the required disclosure and re …", v)
    assert not steps.copies("The Disclosing Party is now called the Discloser.", v)


def test_echoes():
    assert steps.echoes('The "or" is replaced by "or"') and steps.echoes("The “被扶养人” is now a “被扶养人”")
    assert not steps.echoes('The "30 days" are now "60 days".') and not steps.echoes("The period is longer.")


def test_the_report_and_the_redline_show_the_steps(engine):
    from app.render.contracts import redline_html, terminal_text

    res = compare_texts(A, B, llm=LLMRun("on", EngineSettings(), engine=engine), llm_settings=SMALL)
    text, page = terminal_text(res, width=200), redline_html(res)
    pay = next(it for it in res.summary if it.a == "1")
    for out in (text, page):
        assert "The amendment in one paragraph" in out and "contracts.explain" in out
        assert "30 days → 60 days: longer" in out and "rests on" in out
    assert res.amendment.sentences[0].text.split()[0] in text
    assert f'href="#row-{pay.row}"' in page
    plain = compare_texts(A, B)
    assert "The amendment in one paragraph" not in terminal_text(plain) and "LLM steps" not in redline_html(plain)


@pytest.mark.model
def test_the_steps_with_the_default_model():
    from pipelines.contracts.pipeline import compare_documents

    llm = get_engine(EngineSettings(device="cpu", dtype="float32", max_model_len=4096))
    doc_a, doc_b = _docs()
    res = compare_documents(doc_a, doc_b, llm=LLMRun("on", EngineSettings(), engine=llm),
                            llm_settings=StepSettings(max_explain=2, max_tokens=24, summary_tokens=24))
    assert all(s.ran and s.error is None for s in res.llm.steps), res.llm.steps
    assert spans_ok(doc_a, doc_b, res)
    pay = next(it for it in res.summary if it.a == "1")
    assert pay.material and pay.materiality is not None and "60 days" in pay.explanation.text
    assert res.amendment is not None and res.amendment.text
