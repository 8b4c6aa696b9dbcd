"""ask_document with strategy "placement": progress moves while the document's KV is computed
(chunk by chunk, through LLM.generate_with_document_batch's on_step), and a cancel during that
prefill stops it within a chunk, with the batch's "cancelled" status rather than an error."""

from __future__ import annotations

import threading

from pipelines.documents import Document
from pipelines.llm import EngineSettings, ask_document, get_engine

TEXT = ("The supplier shall deliver the goods within 30 days. Payment is due on delivery. " * 6).strip()


def _engine(tiny_text_model):
    return get_engine(EngineSettings(model=str(tiny_text_model), device="cpu", dtype="float32",
                                     max_model_len=1024, max_prefill_chunk=32))


def test_progress_moves_during_the_document_prefill(tiny_text_model):
    llm = _engine(tiny_text_model)
    doc = Document.from_text(TEXT + " (progress)", doc_id="d1")
    seen, computed = [], []

    def progress(p):
        seen.append(p.tokens_done)
        computed.append(llm.doc_cache.computed)

    res = ask_document(llm, doc, ["Who delivers?"], max_tokens=3, strategy="placement", on_progress=progress)
    assert res.status == "ok" and res.reuse["documents_computed"] == 1
    doc_n = len(llm.encode(doc.text, add_special_tokens=False))
    assert doc_n > 3 * 32
    # several distinct progress values before the document's KV was stored (the document phase)
    during = [d for d, c in zip(seen, computed, strict=True) if c == computed[0] and d > 0]
    assert len(set(during)) >= doc_n // 32 - 1 and max(during) >= doc_n - 32


def test_cancel_during_the_document_prefill(tiny_text_model):
    llm = _engine(tiny_text_model)
    doc = Document.from_text(TEXT + " (cancel)", doc_id="d2")
    cancel = threading.Event()
    at = []

    def progress(p):
        if p.tokens_done > 0 and not cancel.is_set():
            cancel.set()
            at.append(p.tokens_done)

    before = llm.doc_cache.computed
    res = ask_document(llm, doc, ["Who delivers?", "When?"], max_tokens=3, strategy="placement",
                       on_progress=progress, cancel=cancel)
    assert res.status == "cancelled" and "cancelled" in res.message
    assert all(not it.ok and "cancelled" in it.error for it in res.items)
    doc_n = len(llm.encode(doc.text, add_special_tokens=False))
    assert at and at[0] < doc_n  # it was still inside the document when it stopped
    assert llm.doc_cache.computed == before  # nothing half-computed was stored
    assert not llm.core.has_unfinished()
    assert all(g.allocator.num_free == g.num_blocks for g in llm.kv.groups)
