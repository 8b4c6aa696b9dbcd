"""RoPE scaling against transformers, the paged KV cache (allocator, sliding-window freeing,
garbage-proof reads), and the API's limits and options (context length, stop, streaming, sampling)."""

from __future__ import annotations

import pytest
import torch

from engine import LLM, CacheConfig, CacheFullError, ContextLengthError, SamplingParams, SchedulerConfig
from engine.kv.block_pool import BlockAllocator
from engine.model.rope import RopeConfig, inv_freq_and_scale
from tests.engine.tiny_models import VOCAB, tiny_hf_model

ROPES = [
    {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
    {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0},
    {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 32},
    {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
     "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
]


@pytest.mark.parametrize("params", ROPES, ids=lambda p: p["rope_type"])
def test_inv_freq_matches_transformers(params):
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    cfg = LlamaConfig(hidden_size=64, num_attention_heads=4, max_position_embeddings=64, rope_parameters=dict(params))
    seq_len = 150 if params["rope_type"] == "dynamic" else None
    ref, ref_scale = ROPE_INIT_FUNCTIONS[params["rope_type"]](cfg, "cpu", seq_len=seq_len)
    mine, scale = inv_freq_and_scale(RopeConfig.from_hf(params, 1e4), 16, 64, seq_len)
    torch.testing.assert_close(mine, ref.float(), rtol=1e-6, atol=0)
    assert scale == pytest.approx(ref_scale)


@pytest.mark.parametrize("params", ROPES, ids=lambda p: p["rope_type"])
def test_scaled_rope_logits_past_the_trained_length(tmp_path, params):
    """A tiny Llama with max_position_embeddings 64 run on 100 tokens: logits equal transformers'
    one-shot forward, and a chunked prefill (chunk 7) equals the one-shot one."""
    hf = tiny_hf_model("llama", seed=6, max_position_embeddings=64, rope_parameters=dict(params))
    hf.save_pretrained(tmp_path)
    ids = torch.randint(0, VOCAB, (100,), generator=torch.Generator().manual_seed(0)).tolist()
    llm = LLM(model=tmp_path, device="cpu", dtype="float32",  # float32 pages: held to transformers' logits
              cache=CacheConfig(block_size=8, memory_budget=2**24, kv_dtype="float32"), max_model_len=256)
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0]
    one = llm.prompt_logits(ids)
    assert (one - ref).abs().max().item() < 2e-4
    assert (llm.prompt_logits(ids, chunk=7) - one).abs().max().item() < 1e-4


def test_allocator_reference_counts():
    a = BlockAllocator(3)
    b0, b1 = a.allocate(), a.allocate()
    assert a.num_free == 1
    a.incref(b0)  # shared by a second sequence
    a.decref(b0)
    assert a.num_free == 1
    a.decref(b0)
    a.decref(b1)
    assert a.num_free == 3
    with pytest.raises(ValueError):
        a.decref(b1)
    for _ in range(3):
        a.allocate()
    with pytest.raises(CacheFullError):
        a.allocate()


def test_allocate_many_is_allocate_n_times_or_nothing():
    """`allocate_many`: the blocks `allocate` would hand out one by one, in the same order, each
    reported to `on_reuse`; asking for more than are free raises and takes none."""
    a, b = BlockAllocator(6), BlockAllocator(6)
    seen_a: list[int] = []
    seen_b: list[int] = []
    a.on_reuse, b.on_reuse = seen_a.append, seen_b.append
    first = [a.allocate() for _ in range(2)]
    a.decref(first[0])  # back of the free list: reused last
    b_first = b.allocate_many(2)
    b.decref(b_first[0])
    assert b_first == first
    assert b.allocate_many(4) == [a.allocate() for _ in range(4)]
    assert seen_a == seen_b and b.ref_counts == a.ref_counts
    with pytest.raises(CacheFullError):
        b.allocate_many(2)
    assert b.num_free == 1  # nothing taken by the refused call


@pytest.mark.parametrize("start,count", [(0, 1), (0, 48), (5, 1), (13, 40), (16, 16), (31, 70)])
def test_allocate_slots_are_block_times_size_plus_offset(start, count):
    """A token at position p lands in slot table[p // bs] * bs + p % bs of every group, for chunks
    that start and end mid-block."""
    from engine.config import CacheConfig, SchedulerConfig
    from engine.kv.paged_cache import PagedKVCache
    from engine.model.loader.random_weights import hf_to_engine_config
    from tests.engine.tiny_models import tiny_hf_config

    cfg = hf_to_engine_config(tiny_hf_config("gemma3"))
    kv = PagedKVCache(cfg, CacheConfig(block_size=8, memory_budget=2**20), torch.device("cpu"), torch.float32,
                      SchedulerConfig(max_model_len=256, max_prefill_chunk=64))
    tables = kv.new_tables()
    if start:
        kv.allocate_slots(tables, 0, start)
    got = kv.allocate_slots(tables, start, count)
    assert len(got) == len(kv.groups) >= 2  # global and sliding-window layers
    for table, slots in zip(tables, got, strict=True):
        assert slots.tolist() == [table[p // 8] * 8 + p % 8 for p in range(start, start + count)]


@pytest.fixture(scope="module")
def gemma_tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("g3")
    tiny_hf_model("gemma3", seed=8).save_pretrained(folder)
    return folder


def test_sliding_layers_hold_only_their_window(gemma_tiny):
    llm = LLM(model=gemma_tiny, device="cpu", dtype="float32",
              cache=CacheConfig(block_size=4, memory_budget=2**24),
              scheduler=SchedulerConfig(max_model_len=512, max_prefill_chunk=8))
    glob, slide = llm.kv.groups  # global layers first
    assert glob.window is None and slide.window == 8
    held = []
    for delta in llm.stream([list(range(1, 60))], SamplingParams(max_tokens=40)):
        if not delta.finished:
            held.append((glob.num_blocks - glob.allocator.num_free, slide.num_blocks - slide.allocator.num_free))
    assert max(h[1] for h in held) <= (8 + 8) // 4 + 1 + 1  # window + chunk, in blocks, + partial
    assert max(h[0] for h in held) >= (59 + 39) // 4  # the global layers keep every block
    assert glob.allocator.num_free == glob.num_blocks and slide.allocator.num_free == slide.num_blocks


def test_unwritten_cache_slots_cannot_leak(gemma_tiny):
    """Pools start as torch.empty: fill them with NaN and the results must not change (the prefix
    cache is cleared: its blocks are now NaN, and reusing them is what it is for)."""
    cfg = CacheConfig(block_size=4, memory_budget=2**24)
    llm = LLM(model=gemma_tiny, device="cpu", dtype="float32", cache=cfg,
              scheduler=SchedulerConfig(max_model_len=512, max_prefill_chunk=8))
    prompts = [list(range(1, 12)), list(range(5, 40))]
    clean = [o.token_ids for o in llm.generate(prompts, SamplingParams(max_tokens=20))]
    for g in llm.kv.groups:
        g.k.fill_(float("nan"))
        g.v.fill_(float("nan"))
    llm.clear_prefix_cache()
    again = [o.token_ids for o in llm.generate(prompts, SamplingParams(max_tokens=20))]
    assert again == clean


def test_context_length_error_names_the_limit(gemma_tiny):
    llm = LLM(model=gemma_tiny, device="cpu", cache=CacheConfig(block_size=4, memory_budget=2**22), max_model_len=32)
    with pytest.raises(ContextLengthError, match="32 tokens") as e:
        llm.generate([list(range(1, 40))])
    assert "max_model_len" in str(e.value) and "\n" not in str(e.value)
    out = llm.generate([list(range(1, 20))], SamplingParams(max_tokens=100))[0]
    assert out.finish_reason == "length" and len(out.prompt_token_ids) + len(out.token_ids) == 32


def test_on_step_reports_progress_and_stops_the_unfinished(gemma_tiny):
    llm = LLM(model=gemma_tiny, device="cpu", cache=CacheConfig(block_size=4, memory_budget=2**22),
              scheduler=SchedulerConfig(max_prefill_chunk=8, max_num_seqs=2))
    prompts = [list(range(1, 20)), list(range(2, 30)), list(range(3, 12))]
    seen = []
    full = llm.generate(prompts, SamplingParams(max_tokens=5), on_step=lambda p: seen.append(p))
    assert [p.tokens_done for p in seen] == sorted(p.tokens_done for p in seen)
    last = seen[-1]
    assert last.tokens_done == last.tokens_total == 19 + 28 + 9 + 3 * 5 and last.finished == last.requests == 3
    steps = llm.sched_counters.steps
    calls = []
    outs = llm.generate(prompts, SamplingParams(max_tokens=5), on_step=lambda p: calls.append(p) or p.finished >= 1)
    assert calls[-1].finished == 1 and all(p.finished == 0 for p in calls[:-1])
    assert llm.sched_counters.steps - steps == len(calls)  # no step after the one that said stop
    assert [o.finish_reason for o in outs].count("abort") == 2 and not llm.core.has_unfinished()
    done = next(i for i, o in enumerate(outs) if o.finish_reason != "abort")
    assert outs[done].token_ids == full[done].token_ids  # the finished request is kept whole
    ids = list(range(5, 25))
    batch = llm.generate_with_document_batch([1, 2], ids, [[7, 8], [9, 10, 11]], SamplingParams(max_tokens=3))
    assert [o.token_ids for o in batch] == [llm.generate_with_document([1, 2], ids, q, SamplingParams(max_tokens=3)).token_ids
                                            for q in ([7, 8], [9, 10, 11])]
    assert llm.doc_cache.computed == 1 and batch[0].metrics["document_tokens"] == 20


def test_sampling_is_seeded_and_options_apply(gemma_tiny):
    llm = LLM(model=gemma_tiny, device="cpu", cache=CacheConfig(block_size=4, memory_budget=2**22))
    p = list(range(1, 10))
    a = llm.generate([p], SamplingParams(max_tokens=30, temperature=1.0, seed=5))[0].token_ids
    b = llm.generate([p], SamplingParams(max_tokens=30, temperature=1.0, seed=5))[0].token_ids
    c = llm.generate([p], SamplingParams(max_tokens=30, temperature=1.0, seed=6))[0].token_ids
    assert a == b and a != c
    k1 = llm.generate([p], SamplingParams(max_tokens=30, temperature=5.0, top_k=1, seed=1))[0].token_ids
    greedy = llm.generate([p], SamplingParams(max_tokens=30))[0].token_ids
    assert k1 == greedy  # top_k=1 is greedy whatever the temperature
    rep = llm.generate([p], SamplingParams(max_tokens=30, repetition_penalty=3.0))[0].token_ids
    assert len(set(rep)) > len(set(greedy))  # the tiny model repeats itself; the penalty breaks that
    stop = llm.generate([p], SamplingParams(max_tokens=30, stop_token_ids=[greedy[3]]))[0]
    assert stop.finish_reason == "stop" and stop.token_ids == greedy[: greedy.index(greedy[3]) + 1]
    with pytest.raises(ValueError):
        SamplingParams(top_p=0)


@pytest.mark.model
def test_real_streaming_and_stop_strings(gemma_llm):
    prompt = "Monday, Tuesday, Wednesday,"
    full = gemma_llm.generate(prompt, SamplingParams(max_tokens=12))[0]
    deltas = list(gemma_llm.stream(prompt, SamplingParams(max_tokens=12)))
    assert "".join(d.text for d in deltas) == full.text
    assert [t for d in deltas for t in d.token_ids] == full.token_ids
    assert deltas[-1].finished and sum(d.finished for d in deltas) == 1
    assert "Friday" in full.text
    cut = gemma_llm.generate(prompt, SamplingParams(max_tokens=12, stop=["Friday"]))[0]
    assert cut.finish_reason == "stop" and "Friday" not in cut.text
    assert full.text.startswith(cut.text)
    streamed = "".join(d.text for d in gemma_llm.stream(prompt, SamplingParams(max_tokens=12, stop="Friday")))
    assert streamed == cut.text


@pytest.mark.model
def test_real_chat_template_absent_is_a_clear_error(gemma_llm):
    from engine import EngineError

    if gemma_llm.tokenizer.chat_template:
        pytest.skip("this GGUF carries a chat template")
    with pytest.raises(EngineError, match="no chat template"):
        gemma_llm.chat([{"role": "user", "content": "hi"}])


def test_chat_template_renders_in_a_sandbox():
    from tokenizers import Tokenizer as Fast
    from tokenizers import models

    from engine import EngineError
    from engine.model.tokenizer import Tokenizer

    template = (
        "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n"
        "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
    )
    tok = Tokenizer(Fast(models.BPE()), bos_token="<bos>", chat_template=template)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}])
    assert text == "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n"
    evil = Tokenizer(Fast(models.BPE()), chat_template="{{ ''.__class__.__mro__[1].__subclasses__() }}")
    from jinja2.exceptions import SecurityError

    with pytest.raises(SecurityError):  # the sandbox refuses access to internals
        evil.apply_chat_template([])
    with pytest.raises(EngineError, match="no chat template"):
        Tokenizer(Fast(models.BPE())).apply_chat_template([])


def test_cache_is_sized_from_the_budget(gemma_tiny):
    from engine.kv.paged_cache import PagedKVCache
    from engine.model.loader.hf_folder import hf_config

    cfg = hf_config(gemma_tiny)
    cpu = torch.device("cpu")
    for budget in (2**20, 4 * 2**20):
        kv = PagedKVCache(cfg, CacheConfig(block_size=4, memory_budget=budget), cpu, torch.float32)
        assert budget * 0.9 < kv.bytes <= budget
    frac = PagedKVCache(cfg, CacheConfig(block_size=4, memory_budget=0.001), cpu, torch.float32)
    assert frac.bytes > 0 and frac.groups[1].window == 8
    with pytest.raises(CacheFullError, match="too small"):
        PagedKVCache(cfg, CacheConfig(block_size=4, memory_budget=1000), cpu, torch.float32)
