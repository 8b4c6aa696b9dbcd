"""The LLM layer with the real default model (Gemma 3 270M): three questions over one contract
excerpt computed once, answers attributed to the exact characters, and choose() agreeing with
LLM.score."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.documents import Document
from pipelines.llm import EngineSettings, ask_document, choose, get_engine

DPA = Path(__file__).resolve().parents[2] / "fixtures/contracts/en-commonpaper-dpa-1.0-to-1.1/v2.txt"


@pytest.mark.model
def test_the_layer_with_the_default_model():
    llm = get_engine(EngineSettings(device="cpu", dtype="float32", max_model_len=4096))
    doc = Document.from_text(DPA.read_text(encoding="utf-8")[:2500], doc_id="dpa")
    computed = llm.doc_cache.computed
    res = ask_document(llm, doc, ["Who is the Processor?", "What law governs?", "What is personal data?"],
                       max_tokens=6, attribute=True, top_k=2)
    assert res.status == "ok" and all(it.ok and it.token_ids for it in res.items)
    assert llm.doc_cache.computed - computed <= 1
    if res.strategy == "prefix":  # the document computed once, every question took it from the cache
        doc_n = len(llm.encode(doc.text, add_special_tokens=False))
        assert res.reuse["documents_computed"] == 0 and res.reuse["prefix_hit_tokens"] >= 3 * (doc_n - 16)
    else:
        assert res.reuse["documents_computed"] + res.reuse["documents_loaded"] == 1
    for it in res.items:
        assert it.spans and all(doc.text[a.source.char_start:a.source.char_end] == a.source.text for a in it.spans)
    prompt = "Question: Is Paris the capital of France? Answer (yes or no):"
    c = choose(llm, prompt, {"yes": " yes", "no": " no"})
    for label, cont in {"yes": " yes", "no": " no"}.items():
        assert c.logprobs[label] == pytest.approx(llm.score(prompt, cont).total, abs=1e-3)
    assert c.label == max(c.logprobs, key=c.logprobs.get) and c.margin > 0
