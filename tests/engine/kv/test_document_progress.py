"""Progress and cancellation while a document's KV is computed (generate_with_document_batch's
on_step covers the document phase chunk by chunk; returning True stops it cleanly)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from engine import LLM, CacheConfig, RequestCancelled, SamplingParams, SchedulerConfig
from tests.engine.tiny_models import VOCAB

PARAMS = SamplingParams(max_tokens=6, ignore_eos=True)


def _llm(folder) -> LLM:
    sched = dataclasses.replace(SchedulerConfig(), max_model_len=512, max_prefill_chunk=16, max_num_seqs=4)
    return LLM(model=folder, device="cpu", dtype="float32", cache=CacheConfig(block_size=4, memory_budget=2**24),
               scheduler=sched)


def _ids(n, seed):
    return torch.randint(2, VOCAB, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


INSTR, DOC, QS = _ids(5, 1), _ids(100, 2), [_ids(4, 3), _ids(6, 4)]


def test_document_phase_reports_every_chunk(tiny_folders):
    llm = _llm(tiny_folders["gemma3"][0])
    seen = []
    outs = llm.generate_with_document_batch(INSTR, DOC, QS, PARAMS, on_step=lambda p: seen.append(p) and None)
    doc = [p for p in seen if p.phase == "document"]
    # ([BOS] +) 100 document tokens in chunks of 16, one callback per forward
    shift = 1 if llm.config.bos_token_id is not None else 0
    expect = [min(100, c - shift) for c in range(16, 100 + shift + 16, 16)]
    assert expect[-1] == 100 and len(expect) == 7
    assert [p.document_tokens_done for p in doc] == expect
    assert all(p.document_tokens_total == 100 and p.prompt_tokens_done == p.document_tokens_done for p in doc)
    assert doc[0].prompt_tokens_total == seen[-1].prompt_tokens_total == 2 * (5 + 100) + 4 + 6
    assert seen.index(doc[-1]) < len(seen) - 1 and seen[-1].phase == "generate"
    assert [len(o.token_ids) for o in outs] == [6, 6]
    # without a callback: the same tokens
    ref = _llm(tiny_folders["gemma3"][0]).generate_with_document_batch(INSTR, DOC, QS, PARAMS)
    assert [o.token_ids for o in outs] == [o.token_ids for o in ref]


def test_cancel_during_the_document_stops_cleanly_and_leaves_nothing(tiny_folders):
    llm = _llm(tiny_folders["gemma3"][0])
    calls = []

    def on_step(p):
        calls.append(p.document_tokens_done)
        return p.phase == "document" and len(calls) == 2  # stop after the second chunk

    with pytest.raises(RequestCancelled) as e:
        llm.generate_with_document_batch(INSTR, DOC, QS, PARAMS, on_step=on_step)
    assert f"{calls[1]} of 100" in str(e.value) and "\n" not in str(e.value)
    assert len(calls) == 2 and calls[1] < 100  # stopped at once: no third chunk computed
    assert all(g.allocator.num_free == g.num_blocks for g in llm.kv.groups)  # blocks freed
    assert llm.doc_cache.computed == 0 and not llm.core.has_unfinished()
    # the engine is fine afterwards, and the document was not stored half-done
    outs = llm.generate_with_document_batch(INSTR, DOC, QS, PARAMS)
    assert llm.doc_cache.computed == 1 and llm.doc_cache.loaded == 0 and len(outs[0].token_ids) == 6
