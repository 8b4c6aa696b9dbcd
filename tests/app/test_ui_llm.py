"""The LLM side of the pipeline pages (app/ui/asking.py) under AppTest: the mode choice off/auto/on
reaches the run (the page shows the run's report), a model that cannot load is one line while the
pipeline's result stays whole, and "Ask about this document" on a tiny random-weight Gemma 3 with
a character tokenizer: the answer, its time to first token, the sentences it rests on marked in
excerpts of the document, and "document reused" for a second question."""

from __future__ import annotations

import html
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.pipelines.llm.conftest import _one_torch_thread  # noqa: F401 (autouse fixture)

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "data" / "samples"
PATENT = SAMPLES / "patents" / "US7156074.txt"
PAIR = SAMPLES / "contracts" / "en-commonpaper-csa-1.0-to-1.1"
REPORT = SAMPLES / "reports" / "en-paper-synthetic.pdf"
MEDICAL = ROOT / "tests" / "fixtures" / "medical" / "en-appendectomy"


def _pending(name: str):
    if name == "patents":
        return (PATENT.name, PATENT.read_bytes())
    if name == "contracts":
        return tuple((p.name, p.read_bytes()) for p in sorted(PAIR.glob("*.txt")))
    if name == "reports":
        return (REPORT.name, REPORT.read_bytes())
    return ([(p.name, p.read_bytes()) for p in sorted(MEDICAL.glob("*.txt"))], None)


def _page(name: str, **state) -> AppTest:
    """The `name` page run once on its sample (put in the page's PENDING slot)."""
    at = AppTest.from_string(f"from app.ui.{name}_page import page\npage()\n", default_timeout=120)
    at.session_state[f"{name}_pending_input"] = _pending(name)
    if name == "medical":
        at.session_state["medical_use_embeddings"] = False
    for k, v in state.items():
        at.session_state[k] = v
    return at.run()


def _ask(at: AppTest, name: str, question: str) -> AppTest:
    at.text_input(key=f"{name}_ask_question").input(question)
    next(b for b in at.button if b.label == "Ask").click()
    return at.run()


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from tests.engine.tiny_models import tiny_hf_model
    from tests.pipelines.llm.conftest import write_char_tokenizer

    folder = tmp_path_factory.mktemp("tiny-ui-model")
    tiny_hf_model("gemma3", seed=3, max_position_embeddings=4096).save_pretrained(folder)
    write_char_tokenizer(folder)
    return folder


def _use_model(monkeypatch, model: Path) -> None:
    for var, value in {"LONGDOC_MODEL": str(model), "LONGDOC_DEVICE": "cpu", "LONGDOC_DTYPE": "float32",
                       "LONGDOC_MAX_MODEL_LEN": "4096"}.items():
        monkeypatch.setenv(var, value)


# -------------------------------------------------------------------------------------------------

def test_excerpts_mark_the_spans_and_escape_the_text():
    from app.ui.asking import excerpt_html, excerpts
    from pipelines.documents import Document

    text = ("<b>Intro</b> " + "filler words here. " * 30 + "The cap is [10](http://x) days. "
            + "more filler text. " * 30 + "Payment is due on delivery.")
    doc = Document.from_text(text, doc_id="d")
    a0 = text.index("The cap")
    b0 = text.index("Payment")
    spans = [doc.span(a0, a0 + len("The cap is [10](http://x) days.")), doc.span(b0, len(text))]
    windows = excerpts(text, spans)
    assert len(windows) == 2  # far apart: two excerpts, neither the whole document
    (a, b, inside), (c, d, inside2) = windows
    assert inside == [spans[0]] and inside2 == [spans[1]] and a > 0 and b < c and d == len(text)
    out = excerpt_html(text, a, b, [(spans[0].char_start, spans[0].char_end, 1, 0.5)])
    assert out.count("<mark") == 1 and html.escape(spans[0].text) in out and "<sup>[1]</sup>" in out
    assert out.startswith('<div') and "… " in out and " …" in out  # cut on both sides
    assert "<b>" not in excerpt_html(text, 0, 40, [])  # document text is escaped
    near = excerpts(text, [spans[0], doc.span(a0 + 40, a0 + 60)])
    assert len(near) == 1 and len(near[0][2]) == 2  # overlapping windows merge


@pytest.mark.parametrize("name", ["patents", "contracts", "reports", "medical"])
def test_no_model_is_one_line_and_the_result_is_whole(name, tmp_path, monkeypatch):
    missing = tmp_path / "no-such-model.gguf"
    monkeypatch.setenv("LONGDOC_MODEL", str(missing))
    monkeypatch.setenv("LONGDOC_DEVICE", "cpu")
    off = _page(name)
    assert not off.exception, off.exception
    rules = _metrics(off)
    assert rules and any("LLM steps off" in c.value for c in off.caption)
    monkeypatch.setenv("LONGDOC_LLM", "on")  # the page's default mode follows $LONGDOC_LLM
    at = _page(name)
    assert not at.exception, at.exception
    assert at.radio(key=f"{name}_llm").value == "on"
    assert _metrics(at) == rules  # every LLM step failed to load a model: the rules' result, whole
    (line,) = [w.value for w in at.warning if "no model could be loaded" in w.value]
    assert "no-such-model" in line and "\n" not in line and "result below is complete" in line
    assert any(e.label.startswith("LLM steps (on)") for e in at.expander)
    at = _ask(at, name, "What is this about?")
    assert not at.exception, at.exception
    answers = [w.value for w in at.warning if w.value.startswith("No answer")]
    assert len(answers) == 1 and "\n" not in answers[0] and "no model could be loaded" in answers[0]
    assert not at.info and _metrics(at) == rules


def test_the_mode_choice_reaches_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("LONGDOC_MODEL", str(tmp_path / "none.gguf"))
    at = _page("patents")
    assert at.radio(key="patents_llm").value == "off"  # the suite's LONGDOC_LLM=off
    for mode, why in (("auto", "auto: "), ("on", "no model")):
        at.radio(key="patents_llm").set_value(mode)
        at.session_state["patents_pending_input"] = _pending("patents")
        at.run()
        assert not at.exception, at.exception
        assert any(e.label.startswith(f"LLM steps ({mode})") for e in at.expander)
        (table,) = at.dataframe
        rows = table.value.to_dict("records")
        assert [r["step"] for r in rows] == ["patents.claim_summaries"]
        assert rows[0]["status"] == "left out" and rows[0]["why / error"].startswith(why)
    at.radio(key="patents_llm").set_value("off")
    at.session_state["patents_pending_input"] = _pending("patents")
    at.run()
    assert any("LLM steps off" in c.value for c in at.caption) and not at.dataframe


def test_an_answer_with_its_marked_spans_and_the_document_reused(tiny_model, monkeypatch):
    _use_model(monkeypatch, tiny_model)
    at = _page("patents")
    assert not at.exception, at.exception
    rules = _metrics(at)
    at = _ask(at, "patents", "What is claimed?")
    assert not at.exception, at.exception
    (asked,) = at.session_state["patents_answers"]
    answer = asked.answer
    if answer.status == "answered" and answer.confidence >= 0.5:  # evidence first: the shown answer
        assert len(at.info) == 1 and at.info[0].value
    elif answer.status == "answered":  # under LOW_CONFIDENCE: never in a finding's style
        assert not at.info and any(w.value.startswith("Low confidence") for w in at.warning)
    else:
        assert any("Not stated in the document" in w.value for w in at.warning)
    facts = [c.value for c in at.caption if c.value.startswith("first token")]
    assert len(facts) == 1 and "prompt" in facts[0] and "document reused" not in facts[0]
    text = PATENT.read_text(encoding="utf-8")
    quoted = answer.spans if answer.status == "answered" else answer.near_misses
    assert quoted and all(text[s.char_start:s.char_end] == s.text for s in quoted)
    marked = [h.proto.body for h in at.get("html") if "likely to hold the answer" in h.proto.body]
    body = "".join(marked)
    assert all(html.escape(s.text).replace("\n", "<br>") in body.replace('<b style="background:#fcd34d">', "")
               .replace("</b>", "") for s in quoted)
    assert body.count("<mark") == len(quoted)
    assert any(s.label.startswith("Answered in") for s in at.status)
    bars = [p.proto.text for p in at.get("progress")]  # the model load, tokens done of the total, the evidence
    assert bars[0].startswith("Loading the model: done in") and bars[-1].startswith("Reading the evidence: 1 of 1")
    answering = [b for b in bars if b.startswith("Answering: ")]
    assert answering and " tokens · 1 of 1 done · " in answering[-1]
    at = _ask(at, "patents", "What does the hinge connect?")  # the same document: its KV from the cache
    assert not at.exception, at.exception
    bars = [p.proto.text for p in at.get("progress")]
    assert bars and not any(b.startswith("Loading the model") for b in bars)  # one engine for the process
    facts = [c.value for c in at.caption if c.value.startswith("first token")]
    assert len(facts) == 2 and "document reused" in facts[0] and "document reused" not in facts[1]
    assert _metrics(at) == rules
    at = _ask(at, "patents", "Which claims depend on claim 1?")  # the claim tree answers: no model at all
    assert not at.exception, at.exception
    newest = at.session_state["patents_answers"][0].answer
    assert newest.route == "structure" and newest.status == "answered" and "depend on claim 1" in newest.text
    assert any("from the document's structure" in c.value for c in at.caption)
    assert not at.get("progress")


def test_the_ask_page_without_a_model_is_one_line(tmp_path, monkeypatch):
    from app.ui import ask_page

    monkeypatch.setenv("LONGDOC_MODEL", str(tmp_path / "none.gguf"))
    monkeypatch.setenv("LONGDOC_DEVICE", "cpu")
    at = AppTest.from_string("from app.ui.ask_page import page\npage()\n", default_timeout=60)
    at.session_state[ask_page.PENDING] = ("c.txt", b"Some text.", "why?", "retrieval", 16, None)
    at.run()
    assert not at.exception, at.exception
    (err,) = at.error
    assert "no model could be loaded" in err.value and "\n" not in err.value


def test_a_rerun_asked_for_while_the_engine_works_cancels_it_first():
    """A click while the engine works raises Streamlit's rerun inside the progress callback: the
    callback swallows it and sets the run's cancel event (the engine stops cleanly, the result is
    stored), and the rerun is raised when the block ends."""
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

    from app.ui.asking import RunProgress
    from pipelines.llm import Progress

    class Interrupted:
        def update(self, **kw):
            raise RerunException(None)

        def progress(self, *a, **kw):
            raise RerunException(None)

    stored = []
    with pytest.raises(RerunException):
        with RunProgress("Answering…") as prog:
            prog.status = Interrupted()
            prog("ask", Progress(10, 100, 1.0, 0, 1))
            assert prog.cancel.is_set() and prog.stopped
            prog("ask", Progress(20, 100, 2.0, 0, 1))  # nothing more is drawn, nothing raised here
            stored.append("result")
    assert stored == ["result"]
    import streamlit as st

    assert "stopped after" in st.session_state.pop("longdoc_llm_stopped")  # said on the next run


def test_what_a_stopped_run_keeps_reaches_the_next_run(monkeypatch):
    """With fast reruns a click starts the next run at once and every later session-state write of
    the stopped run raises: `keep` puts the value in the session's box, and the next run's
    `show_stopped_note` moves it into the session state."""
    import types

    import streamlit as st
    from streamlit.runtime.scriptrunner_utils.exceptions import StopException

    from app.ui import asking

    class Stopped(dict):
        def __setitem__(self, key, value):
            raise StopException()

    monkeypatch.setattr(asking, "st", types.SimpleNamespace(session_state=Stopped()))
    asking.keep("test_kept_result", 42)
    monkeypatch.undo()
    assert "test_kept_result" not in st.session_state
    asking.show_stopped_note()
    assert st.session_state.pop("test_kept_result") == 42
