"""Document reuse at any position (engine/kv/document_cache.py) on tiny random-weight models (CPU, float32).

What must hold: re-rotating keys by d positions equals computing them d positions later (for every
RoPE type linear in the position; dynamic NTK is refused); a document placed right after BOS gives
the logits and tokens of a normal prefill (the only case where the approximation is exact);
computed or loaded (host memory, disk, a new process) a document gives the same tokens; a document
is computed once for any number of instructions and questions; a corrupted stored entry is
recomputed; the prefix cache never indexes the blocks of a placed document, and serves a document
request's instructions (never past the document's offset); a sequence holding one
is preempted by swap only; a warm tier and sliding windows work; too long is a ContextLengthError.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from engine import LLM, CacheConfig, SamplingParams, SchedulerConfig
from engine.errors import ContextLengthError, EngineError
from engine.kv.block_hash import chain_block_hashes
from engine.kv.document_cache import rerotate_keys
from engine.model.rope import RopeConfig, RotaryEmbedding, apply_rope
from tests.engine.tiny_models import VOCAB, tiny_hf_model

BOS = 1


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Tiny Gemma 3 (sliding window 8 on 5 of 6 layers) and Llama (llama3 RoPE), with a BOS id."""
    out = {}
    for fam in ("gemma3", "llama"):
        folder = tmp_path_factory.mktemp(f"doc-{fam}")
        tiny_hf_model(fam, seed=3, bos_token_id=BOS).save_pretrained(folder)
        out[fam] = folder
    return out


def make(folder, budget=2**24, chunk=16, sched=None, **kw) -> LLM:
    kw.setdefault("kv_dtype", "float32")  # reused keys held to a full prefill's within float32 rounding
    cache = CacheConfig(block_size=4, memory_budget=budget, **kw)
    sched = dataclasses.replace(sched or SchedulerConfig(), max_model_len=512, max_prefill_chunk=chunk)
    return LLM(model=folder, device="cpu", dtype="float32", cache=cache, scheduler=sched)


def toks(n: int, seed: int) -> list[int]:
    return torch.randint(2, VOCAB, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


DOC = toks(45, 1)  # longer than the sliding window (8) and than two prefill chunks (16)
INSTR = [BOS] + toks(10, 2)
QUESTION = toks(7, 3)
GREEDY = SamplingParams(max_tokens=12, ignore_eos=True)
SAMPLED = SamplingParams(max_tokens=12, temperature=1.0, seed=5, ignore_eos=True)


# ------------------------------------------------------------------------------------ rotation
ROPES = {
    "default": RopeConfig(theta=10000.0),
    "linear": RopeConfig(theta=10000.0, rope_type="linear", factor=4.0),
    "llama3": RopeConfig(theta=500000.0, rope_type="llama3", factor=8.0, original_max_position_embeddings=128),
    "yarn": RopeConfig(theta=10000.0, rope_type="yarn", factor=4.0, original_max_position_embeddings=128),
}


@pytest.mark.parametrize("name", list(ROPES))
def test_rerotated_key_equals_key_computed_later(name):
    rope = RotaryEmbedding(ROPES[name], 16, 512, torch.device("cpu"))
    if name == "yarn":
        assert rope.scale != 1.0  # the attention factor must not be applied twice
    k = torch.randn(40, 2, 16, generator=torch.Generator().manual_seed(0))
    p = torch.arange(1, 41)
    for d in (0, 1, 7, 300):
        at_p = apply_rope(k, *rope.cos_sin(p, torch.float32))
        at_pd = apply_rope(k, *rope.cos_sin(p + d, torch.float32))
        diff = (rerotate_keys(rope, at_p, d) - at_pd).abs().max().item()
        assert diff < 1e-4 * max(1.0, at_pd.abs().max().item()), (d, diff)
    assert (rerotate_keys(rope, at_p, 5) - at_p).abs().max() > 1e-2  # a real rotation


def test_engine_keys_rerotated_equal_keys_of_a_full_prefill(folders):
    """Layer 0's key depends only on the token and its position: the standalone document's layer-0
    keys (positions 1..L) re-rotated by offset - 1 equal those of a prefill of instructions + document."""
    llm = make(folders["llama"])
    doc = llm.doc_cache.get(DOC)
    offset = len(INSTR)
    seq, _, _ = llm.core.prefill_collect(INSTR + DOC, 0)
    try:
        k_full, _ = llm.doc_cache._read(0, seq.tables[0], offset, offset + len(DOC))
    finally:
        llm.core.free(seq)
    first, k_doc, _ = doc.groups[0]
    assert first == 0 and k_doc.shape[1] == len(DOC)
    moved = rerotate_keys(llm.model.ropes[llm.model.layer_rope[0]], k_doc[0], offset - 1)
    assert (moved - k_full[0]).abs().max() < 1e-4
    assert (k_doc[0] - k_full[0]).abs().max() > 1e-2  # without the re-rotation they differ
    # and placement writes exactly those keys into the sequence's cache (V unchanged)
    seq, _ = llm._document_seq(INSTR, DOC, QUESTION, GREEDY)
    seq.tables = llm.kv.new_tables()
    try:
        llm.runner.forward([(seq, offset)], [])
        llm.core.place_document(seq)
        assert seq.doc is None and seq.num_cached == offset + len(DOC)
        k_placed, v_placed = llm.doc_cache._read(0, seq.tables[0], offset, offset + len(DOC))
    finally:
        llm.core.free(seq)
    assert (k_placed[0] - k_full[0]).abs().max() < 1e-4
    assert torch.equal(v_placed, doc.groups[0][2])


def test_dynamic_ntk_is_refused(tmp_path):
    tiny_hf_model("llama", seed=3, bos_token_id=BOS,
                  rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}).save_pretrained(tmp_path)
    llm = make(tmp_path)
    with pytest.raises(EngineError, match="dynamic"):
        llm.generate_with_document(INSTR, DOC, QUESTION, GREEDY)


# ------------------------------------------------------------------------------------ exactness
@pytest.mark.parametrize("family", ["gemma3", "llama"])
def test_document_right_after_bos_equals_full_prefill(folders, family):
    llm = make(folders[family])
    ids = [BOS] + DOC + QUESTION
    placed = llm.document_logits([BOS], DOC, QUESTION)
    full = llm.prompt_logits(ids, last=len(QUESTION))
    assert placed.shape == full.shape == (len(QUESTION), VOCAB)
    assert (placed - full).abs().max() < 1e-4  # measured 4.5e-6 (gemma3), 1.2e-5 (llama)
    fresh = make(folders[family])
    out = fresh.generate_with_document([BOS], DOC, QUESTION, SAMPLED)
    assert out.token_ids == make(folders[family]).generate(ids, SAMPLED)[0].token_ids
    assert out.metrics["document_tokens"] == len(DOC) and out.metrics["document_offset"] == 1
    # behind real instructions it is an approximation: close to, not equal to, a full prefill
    approx = llm.document_logits(INSTR, DOC, QUESTION)
    assert (approx - llm.prompt_logits(INSTR + DOC + QUESTION, last=len(QUESTION))).abs().max() > 1e-3
    assert all(g.allocator.num_free == g.num_blocks for g in fresh.kv.groups)


def test_no_bos_model_places_at_offset_zero(tmp_path):
    tiny_hf_model("gemma3", seed=3).save_pretrained(tmp_path)  # bos_token_id None
    llm = make(tmp_path)
    assert llm.config.bos_token_id is None
    placed = llm.document_logits([], DOC, QUESTION)
    assert (placed - llm.prompt_logits(DOC + QUESTION, last=len(QUESTION))).abs().max() < 1e-4


# ------------------------------------------------------------------------------------ store
@pytest.mark.parametrize("family", ["gemma3", "llama"])
def test_computed_and_loaded_give_the_same_tokens(folders, family):
    llm = make(folders[family])
    first = llm.generate_with_document(INSTR, DOC, QUESTION, SAMPLED)
    again = llm.generate_with_document(INSTR, DOC, QUESTION, SAMPLED)
    assert (llm.doc_cache.computed, llm.doc_cache.loaded) == (1, 1)
    assert first.metrics["document_loaded"] is False and again.metrics["document_loaded"] is True
    assert again.token_ids == first.token_ids
    assert len(first.token_ids) == 12


SUBPROCESS = """
import json, sys
import torch
torch.set_num_threads(1)
from engine import LLM, CacheConfig, SamplingParams, SchedulerConfig
folder, disk, instr, doc, q = sys.argv[1], sys.argv[2], *(json.loads(a) for a in sys.argv[3:6])
cache = CacheConfig(block_size=4, memory_budget=2**24, disk_cache_dir=disk, kv_dtype="float32")  # as make()'s
llm = LLM(model=folder, device="cpu", dtype="float32", cache=cache,
          scheduler=SchedulerConfig(max_model_len=512, max_prefill_chunk=16))
out = llm.generate_with_document(instr, doc, q, SamplingParams(max_tokens=12, temperature=1.0, seed=5, ignore_eos=True))
print(json.dumps({"computed": llm.doc_cache.computed, "loaded": llm.doc_cache.loaded, "tokens": out.token_ids}))
"""


def run_in_new_process(folder, disk) -> dict:
    env_root = str(Path(__file__).resolve().parents[3])
    r = subprocess.run(
        [sys.executable, "-c", SUBPROCESS, str(folder), str(disk), json.dumps(INSTR), json.dumps(DOC), json.dumps(QUESTION)],
        capture_output=True, text=True, timeout=300, cwd=env_root,
        env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": env_root,
             "LONGDOC_KEY_DIR": os.environ["LONGDOC_KEY_DIR"]},  # the same user's keys: the suite's own folder
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_disk_store_is_reused_by_a_new_process(folders, tmp_path):
    disk = tmp_path / "kv"
    llm = make(folders["gemma3"], disk_cache_dir=str(disk))
    assert llm.doc_tier() is llm.prefix.cold  # the configured cold tier, not a store of its own
    out = llm.generate_with_document(INSTR, DOC, QUESTION, SAMPLED)
    assert llm.doc_cache.computed == 1
    assert any(disk.rglob("*")), "the document should be on disk"
    res = run_in_new_process(folders["gemma3"], disk)
    assert (res["computed"], res["loaded"]) == (0, 1)
    assert res["tokens"] == out.token_ids


def test_corrupted_disk_entry_is_ignored_and_recomputed(folders, tmp_path):
    disk = tmp_path / "kv"
    out = make(folders["gemma3"], disk_cache_dir=str(disk)).generate_with_document(INSTR, DOC, QUESTION, SAMPLED)
    files = [f for f in disk.rglob("*") if f.is_file() and not f.name.startswith(".")]
    assert files
    for f in files:  # flip a byte in the second half of every entry (the tensors' payload)
        data = bytearray(f.read_bytes())
        data[len(data) * 3 // 4] ^= 0xFF
        f.write_bytes(bytes(data))
    llm = make(folders["gemma3"], disk_cache_dir=str(disk))  # a new LLM: nothing in host memory
    again = llm.generate_with_document(INSTR, DOC, QUESTION, SAMPLED)
    assert (llm.doc_cache.computed, llm.doc_cache.loaded) == (1, 0)
    assert again.token_ids == out.token_ids
    third = make(folders["gemma3"], disk_cache_dir=str(disk))  # the recomputed entries were rewritten
    assert third.generate_with_document(INSTR, DOC, QUESTION, SAMPLED).token_ids == out.token_ids
    assert (third.doc_cache.computed, third.doc_cache.loaded) == (0, 1)


def test_one_document_many_instructions_and_questions_computed_once(folders):
    llm = make(folders["gemma3"])
    instrs = [INSTR, [BOS] + toks(23, 7)]
    questions = [QUESTION, toks(4, 8)]
    outs = {(i, q): llm.generate_with_document(instrs[i], DOC, questions[q], GREEDY).token_ids
            for i in range(2) for q in range(2)}
    assert (llm.doc_cache.computed, llm.doc_cache.loaded) == (1, 3)
    for (i, q), got in outs.items():  # each equals what a fresh engine (computing the document) gives
        assert make(folders["gemma3"]).generate_with_document(instrs[i], DOC, questions[q], GREEDY).token_ids == got
    other = llm.generate_with_document(INSTR, DOC[:-1], QUESTION, GREEDY)  # another document: computed
    assert llm.doc_cache.computed == 2 and other.metrics["document_loaded"] is False
    streamed = [t for d in llm.stream_with_document(INSTR, DOC, QUESTION, GREEDY) for t in d.token_ids]
    assert streamed == outs[(0, 0)] and llm.doc_cache.computed == 2


# ------------------------------------------------------------------------------------ prefix cache
@pytest.mark.parametrize("family", ["gemma3", "llama"])
def test_prefix_cache_never_serves_a_placed_document(folders, family):
    llm = make(folders[family], host_cache_bytes=2**24)
    ids = INSTR + DOC + QUESTION
    llm.generate_with_document(INSTR, DOC, QUESTION, GREEDY)
    hashes = chain_block_hashes(ids[: len(ids) // 4 * 4], 4, llm.fingerprint)
    indexed = {h for m in llm.prefix.maps for h in m}
    assert not indexed & set(hashes[len(INSTR) // 4 :]), "a block holding the placed document was indexed"
    out = llm.generate(ids, GREEDY)[0]
    assert out.cached_tokens == 0  # the instructions (11 tokens) are shorter than a chunk
    assert out.token_ids == make(folders[family]).generate(ids, GREEDY)[0].token_ids
    assert llm.prefix.stats.cold_hit_tokens == 0


# ------------------------------------------------------------------------------------ edge cases
def test_preempted_document_sequence_is_swapped_and_exact(folders):
    params = SamplingParams(max_tokens=40, ignore_eos=True)
    instr, doc, q = [BOS] + toks(4, 30), toks(20, 31), toks(5, 32)
    alone = make(folders["llama"]).generate_with_document(instr, doc, q, params).token_ids
    per_block = 4 * 2 * 4 * 2 * 16 * 4  # layers * (K+V) * block * kv_heads * head_dim * fp32
    llm = make(folders["llama"], budget=per_block * 28,
               sched=SchedulerConfig(preemption="recompute", watermark=0.95))
    assert llm.kv.groups[0].num_blocks == 28
    others = llm._make_seqs([toks(30, 20 + i) for i in range(3)], params)
    seq, _ = llm._document_seq(instr, doc, q, params)  # admitted last: the first victim
    for _ in llm._run(others + [seq]):
        pass
    c = llm.sched_counters
    assert seq.preemptions > 0 and c.preempted_swap > 0  # recompute is configured, the document swaps
    assert seq.output_ids == alone
    assert all(g.allocator.num_free == g.num_blocks for g in llm.kv.groups)


@pytest.mark.parametrize("family", ["gemma3", "llama"])
def test_warm_tier_document_computed_hot_placed_then_demoted(folders, family):
    llm = make(folders[family], warm_budget=2**20, sink_tokens=4, hot_window=8)
    assert llm.kv.groups[0].window is None and llm.kv.groups[0].warm is not None
    moved = []
    demote = llm.kv.demote
    llm.kv.demote = lambda tables, n, **k: moved.append(demote(tables, n, **k)) or moved[-1]
    doc = llm.doc_cache.get(DOC)  # computed without demotion: every block read was hot (_read asserts it)
    assert sum(moved) == 0 and doc.groups[0][1].shape[1] == len(DOC)
    first = llm.generate_with_document(INSTR, DOC, QUESTION, GREEDY)
    assert sum(moved) > 0, "the placed document should be demoted like a prefilled one"
    again = llm.generate_with_document(INSTR, DOC, QUESTION, GREEDY)
    assert (llm.doc_cache.computed, llm.doc_cache.loaded) == (1, 2)
    assert again.token_ids == first.token_ids and len(first.token_ids) == 12
    tiers = llm.kv.blocks_per_tier()
    assert tiers["hot_used"] == [0] * len(llm.kv.groups) and tiers["warm_used"] == [0] * len(llm.kv.groups)
    # the warm tier changes only how the placed document is held: close to the all-hot result
    hot = make(folders[family])
    a = llm.document_logits(INSTR, DOC, QUESTION)
    b = hot.document_logits(INSTR, DOC, QUESTION)
    assert (a - b).abs().max() < {"gemma3": 0.05, "llama": 1.0}[family]  # bounds of test_warm_tier


def test_too_long_is_a_context_length_error(folders):
    llm = LLM(model=folders["gemma3"], device="cpu", dtype="float32",
              cache=CacheConfig(block_size=4, memory_budget=2**24),
              scheduler=SchedulerConfig(max_model_len=64, max_prefill_chunk=16))
    with pytest.raises(ContextLengthError):
        llm.generate_with_document([BOS], toks(70, 50), QUESTION, GREEDY)  # the document alone
    with pytest.raises(ContextLengthError):
        llm.generate_with_document(INSTR, DOC, toks(10, 51), GREEDY)  # 11 + 45 + 10 > 64
    with pytest.raises(ContextLengthError):
        llm.doc_cache.get(toks(64, 52))  # [BOS] + 64 tokens
    with pytest.raises(EngineError, match="non-empty"):
        llm.generate_with_document(INSTR, DOC, [], GREEDY)
    assert llm.doc_cache.computed == 0


@pytest.mark.parametrize("family", ["gemma3", "llama"])
def test_long_instructions_come_from_the_prefix_cache(folders, family):
    """Instructions longer than a prefill chunk are looked up in the prefix cache like any prompt
    prefix (up to the document's offset, chunk-aligned) and registered after they are computed, so
    a second document request behind the same instructions reuses them; the tokens equal those of
    a fresh engine that computes everything."""
    instr = [BOS] + toks(40, 40)  # 41 tokens: two whole chunks of 16 can be cached
    docs = [toks(30, 41), toks(26, 42)]
    llm = make(folders[family])
    first = llm.generate_with_document(instr, docs[0], QUESTION, GREEDY)
    assert first.cached_tokens == 0
    second = llm.generate_with_document(instr, docs[1], QUESTION, GREEDY)
    assert second.cached_tokens == 32  # chunk-aligned, never past the document's offset (41)
    fresh = make(folders[family]).generate_with_document(instr, docs[1], QUESTION, GREEDY)
    assert second.token_ids == fresh.token_ids
    hashes = chain_block_hashes((instr + docs[1] + QUESTION)[:96], 4, llm.fingerprint)
    indexed = {h for m in llm.prefix.maps for h in m}
    assert not indexed & set(hashes[len(instr) // 4 + 1 :]), "a block holding a placed document was indexed"
    # the same tokens prefilled as a plain prompt first index blocks past the offset: a document
    # request still stops at its offset (and places its document there)
    plain = make(folders[family])
    plain.generate(instr + docs[1] + QUESTION, GREEDY)
    again = plain.generate_with_document(instr, docs[1], QUESTION, GREEDY)
    assert again.cached_tokens == 32 and again.token_ids == fresh.token_ids
    short = make(folders[family])  # instructions shorter than a chunk: nothing to reuse
    short.generate_with_document(INSTR, docs[0], QUESTION, GREEDY)
    assert short.generate_with_document(INSTR, docs[1], QUESTION, GREEDY).cached_tokens == 0
