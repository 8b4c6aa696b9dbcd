"""The Review table page (app/ui/review_page.py) under streamlit.testing's AppTest with the tiny
char-tokenizer Gemma: the table fills in (one row per input, one column per question), a cell shows
its answer with the spans marked in the document, the downloads hold the table, a second build
with one more question computes only that column, and a bad upload is a row with its error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
PATENTS = [ROOT / "data/samples/patents/US7156074.txt", ROOT / "data/samples/patents/US6836979.txt"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from tests.engine.tiny_models import tiny_hf_model
    from tests.pipelines.llm.conftest import write_char_tokenizer

    folder = tmp_path_factory.mktemp("tiny-review-ui-model")
    tiny_hf_model("gemma3", seed=3, max_position_embeddings=4096).save_pretrained(folder)
    write_char_tokenizer(folder)
    return folder


@pytest.fixture(autouse=True)
def _engine_env(tiny_model, monkeypatch):
    import torch

    for k, v in {"LONGDOC_MODEL": str(tiny_model), "LONGDOC_DEVICE": "cpu", "LONGDOC_DTYPE": "float32",
                 "LONGDOC_MAX_MODEL_LEN": "4096"}.items():
        monkeypatch.setenv(k, v)
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _page_script() -> None:
    from app.ui.review_page import page

    page()


def _frames(at):
    return [e for e in at.main if type(e).__name__ == "Dataframe"]


def test_table_fills_in_and_a_cell_shows_its_spans(tmp_path):
    from app.ui import review_page

    uploads = [(p.name, p.read_text(encoding="utf-8")[:2000].encode("utf-8")) for p in PATENTS]
    uploads.append(("broken.pdf", b"%PDF-1.4 not a pdf"))
    at = AppTest.from_function(_page_script, default_timeout=120)
    at.session_state[review_page.PENDING] = ("patents", None, uploads, "claimed: What is claimed?\nWhat is the first element?")
    at.run()
    assert not at.exception, at.exception
    frame = _frames(at)[-1].value
    assert list(frame.columns) == ["document", "files", "error", "claimed", "Q2"]
    assert sorted(frame["document"]) == ["US6836979.txt", "US7156074.txt", "broken.pdf"]
    bad = frame[frame["document"] == "broken.pdf"].iloc[0]
    assert "broken.pdf: broken PDF" in bad["error"]
    state = at.session_state[review_page.STATE]
    row = state["rows"]["US7156074.txt"]
    assert [c.name for c in row.cells] == ["claimed", "Q2"]

    at.selectbox(key="review_row").set_value("US7156074.txt")
    at.selectbox(key="review_question").set_value("claimed")
    at.run()
    assert not at.exception, at.exception
    cell = row.cells[0]
    from app.ui.common import md_line, md_text

    shown = [i.value for i in at.info] + [e.value for e in at.error] + [w.value for w in at.warning]
    if cell.error is not None:
        assert md_line(cell.error) in shown
    elif cell.status == "answered":
        assert any(md_text(" ".join(cell.answer.split())) in v for v in shown) and cell.spans
    else:
        assert any("Not stated in the document" in v for v in shown) and cell.near_misses
    # the quoted passages (or the nearest ones), marked in the document
    htmls = [e.proto.body for e in at.main if type(e).__name__ == "Html"]
    assert any("<mark" in h for h in htmls)
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Table (CSV)", "Sources (CSV)", "JSON", "Excel"]

    # one more question: only its column is computed for the two readable patents
    at.session_state[review_page.PENDING] = ("patents", None, uploads,
                                           "claimed: What is claimed?\nWhat is the first element?\nWho invented it?")
    at.run()
    assert not at.exception, at.exception
    state = at.session_state[review_page.STATE]
    again = state["rows"]["US7156074.txt"]
    assert [c.question for c in again.cells][:3] == ["What is claimed?", "What is the first element?", "Who invented it?"]
    assert again.cells[:2] == row.cells  # kept, not recomputed
    texts = [m.proto.text if hasattr(m.proto, "text") else "" for m in at.main if type(m).__name__ == "Progress"]
    assert texts == [] or all("inputs" in t or ":" in t for t in texts)
    table = json.loads(review_page.review.build_table(
        [again], state["questions"], "m").model_dump_json())
    assert [q["name"] for q in table["questions"]] == ["claimed", "Q2", "Q3"]


def test_an_unpaired_contract_upload_is_named_not_dropped():
    """Two versions of one contract and a lone third file: the pair is one row, and the lone file is
    listed above the table with why it is not in it."""
    from app.ui import review_page

    text = "1. Term. This agreement runs for one year.\n2. Fees. Customer pays monthly.\n"
    uploads = [("deal.v1.txt", text.encode()), ("deal.v2.txt", text.replace("one year", "two years").encode()),
               ("orphan.v1.txt", text.encode())]
    at = AppTest.from_function(_page_script, default_timeout=120)
    at.session_state[review_page.PENDING] = ("contracts", None, uploads, "term: How long does it run?")
    at.run()
    assert not at.exception, at.exception
    warnings = [w.value for w in at.warning]
    assert any("orphan.v1.txt" in w and "no other version to pair with" in w for w in warnings), warnings
    assert list(at.session_state[review_page.STATE]["inputs"]) == ["deal"]


def test_inputs_in_groups_fill_the_same_table(monkeypatch):
    """With a group of 2 (a GPU's default is 8) the two readable patents' questions go to the engine
    together and the rows equal those computed one input at a time."""
    from app.ui import review_page
    from engine import LLM

    uploads = [(p.name, p.read_text(encoding="utf-8")[:1500].encode("utf-8")) for p in PATENTS]
    rows = {}
    for size in (1, 2):
        calls = []
        real = LLM.generate_shared_batch
        monkeypatch.setattr(LLM, "generate_shared_batch",
                            lambda self, groups, *a, _real=real, _calls=calls, **k: _calls.append(len(groups))
                            or _real(self, groups, *a, **k))
        monkeypatch.setitem(review_page.review.DEFAULT_GROUP, "cpu", size)
        at = AppTest.from_function(_page_script, default_timeout=120)
        at.session_state[review_page.PENDING] = ("patents", None, uploads, "What is claimed?")
        at.run()
        assert not at.exception, at.exception
        state = at.session_state[review_page.STATE]
        rows[size] = {k: [(c.answer, c.error) for c in r.cells] for k, r in state["rows"].items()}
        assert calls == ([1, 1] if size == 1 else [2])
        monkeypatch.setattr(LLM, "generate_shared_batch", real)
    assert rows[1] == rows[2] and len(rows[2]) == 2
