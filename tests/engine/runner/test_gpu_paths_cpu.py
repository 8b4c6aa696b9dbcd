"""The GPU-side engine paths, checked where they can be on the CPU: batched sampling (the CUDA
path's algorithm runs on CPU tensors too), the CUDA-graph runner's bucketing and its fallback to
eager on the CPU, and the random-weight model helper behind the GPU benchmark."""

from __future__ import annotations

import pytest
import torch

from engine.core.sampling import SamplingParams, sample_batch, sample_rows, sample_token


def test_sample_batch_on_cpu_is_sample_token():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 50, generator=gen) * 3
    params = [SamplingParams(), SamplingParams(temperature=0.8, top_k=5, seed=1),
              SamplingParams(temperature=1.2, top_p=0.7), SamplingParams(repetition_penalty=1.5)]
    seen = [[1, 2], [3], [], [int(logits[3].argmax()), 7]]
    gens_a = [None] + [torch.Generator().manual_seed(9 + i) for i in range(2)] + [None]
    gens_b = [None] + [torch.Generator().manual_seed(9 + i) for i in range(2)] + [None]
    got = sample_batch(logits, params, seen, gens_a)
    want = [sample_token(logits[i], p, s, g) for i, (p, s, g) in enumerate(zip(params, seen, gens_b, strict=True))]
    assert got == want
    assert got[3] != int(logits[3].argmax())  # the penalty moved the greedy pick


def test_sample_rows_greedy_and_penalty_match_sample_token():
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(5, 40, generator=gen)
    params = [SamplingParams(repetition_penalty=1.0 + 0.5 * i) for i in range(5)]
    seen = [logits[i].topk(2).indices.tolist() for i in range(5)]
    got = sample_rows(logits, params, seen, [None] * 5)
    assert got == [sample_token(logits[i], params[i], seen[i], None) for i in range(5)]


def test_sample_rows_top_k_top_p_support():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    logits = probs.log().repeat(3, 1)
    params = [SamplingParams(temperature=1.0, top_k=2), SamplingParams(temperature=1.0, top_p=0.75),
              SamplingParams(temperature=1.0)]
    gens = [torch.Generator().manual_seed(i) for i in range(3)]
    counts = torch.zeros(3, 4)
    for _ in range(3000):
        for r, t in enumerate(sample_rows(logits, params, [[], [], []], gens)):
            counts[r, t] += 1
    freq = counts / counts.sum(1, keepdim=True)
    # top-k 2 and top-p 0.75 both keep {0, 1}, renormalised to 0.625 / 0.375
    for r in (0, 1):
        assert counts[r, 2:].sum() == 0
        assert abs(float(freq[r, 0]) - 0.625) < 0.04
    # no filter: the original distribution
    assert float((freq[2] - probs).abs().max()) < 0.04


def test_sample_rows_seeded_alone_or_batched():
    gen = torch.Generator().manual_seed(2)
    logits = torch.randn(3, 100, generator=gen)
    p = SamplingParams(temperature=0.9, top_p=0.9, seed=5)
    alone = [sample_rows(logits[1:2], [p], [[]], [torch.Generator().manual_seed(5)])[0]]
    g = torch.Generator().manual_seed(5)
    batched = [sample_rows(logits, [SamplingParams(), p, SamplingParams()], [[]] * 3,
                           [None, g, None])[1]]
    for _ in range(5):  # several steps: the sequence's generator advances the same way
        alone.append(sample_rows(logits[1:2], [p], [[]], [torch.Generator().manual_seed(5)])[0])
    assert alone[0] == batched[0]


def test_graph_buckets():
    from engine.runner.cuda_graph import bucket_of, len_bucket

    assert [bucket_of(n, (1, 2, 4, 8)) for n in (1, 2, 3, 5, 8, 9)] == [1, 2, 4, 8, 8, None]
    assert len_bucket(10, 32768) == 1024
    assert len_bucket(1025, 32768) == 2048
    assert len_bucket(20000, 32768) == 32768
    assert len_bucket(20000, 24000) == 24000


def test_random_llm_on_cpu_runs_eagerly():
    """A random-weight model wrapped in a full LLM: on the CPU the torch backend is the default and
    no graph runner is attached, even when asked for; generation works and is deterministic."""
    from engine.attention.backend import TorchAttentionBackend
    from engine.config import CacheConfig, SchedulerConfig
    from engine.model.config import ModelConfig
    from engine.model.loader.random_weights import llm_from_model, random_model
    from engine.model.rope import RopeConfig

    n = 3
    cfg = ModelConfig(
        architecture="llama", vocab_size=64, hidden_size=32, intermediate_size=64, num_layers=n, num_heads=4,
        num_kv_heads=2, head_dim=8, rms_norm_eps=1e-6, max_position_embeddings=256, layer_windows=[None, 8, None],
        layer_ropes=[RopeConfig()] * n, attn_scale=8**-0.5, tie_word_embeddings=False,
    )
    model = random_model(cfg, "cpu", torch.float32, seed=3, std=0.2)
    llm = llm_from_model(model, cfg, device="cpu", dtype="float32", cuda_graphs=True,
                         cache=CacheConfig(block_size=4, memory_budget=2**20), scheduler=SchedulerConfig(max_num_seqs=2))
    assert isinstance(llm.backend, TorchAttentionBackend)
    assert llm.runner.graphs is None
    outs = llm.generate([[1, 2, 3, 4, 5], [7, 8]], SamplingParams(max_tokens=6, ignore_eos=True))
    again = llm.generate([[1, 2, 3, 4, 5], [7, 8]], SamplingParams(max_tokens=6, ignore_eos=True))
    assert [o.token_ids for o in outs] == [o.token_ids for o in again]
    assert all(len(o.token_ids) == 6 for o in outs)
    assert len({t for o in outs for t in o.token_ids}) > 1  # random weights, not a constant output


def test_eager_decode_is_sized_for_the_context_bucket(monkeypatch):
    """Eager decode steps run under the same static context bound as a graph replay of the same
    sequences (the context bucket), so the decode kernel picks the same splits either way (the
    eager-vs-graph token mismatch of test_engine_gpu came from the two paths sizing the launch
    differently)."""
    from engine.config import CacheConfig, SchedulerConfig
    from engine.model.loader.random_weights import llm_from_model, random_model
    from engine.runner.cuda_graph import len_bucket
    from longdoc_kernels import dispatch

    cfg = _tiny(False)
    model = random_model(cfg, "cpu", torch.float32, seed=3, std=0.2)
    llm = llm_from_model(model, cfg, device="cpu", dtype="float32", cache=CacheConfig(block_size=4, memory_budget=2**20),
                         scheduler=SchedulerConfig(max_num_seqs=2, max_model_len=4096))
    seen: list[tuple[int, int | None]] = []
    decode = llm.backend.decode

    def spy(q, k_cache, v_cache, block_tables, kv_lens, **kw):
        seen.append((int(kv_lens.max()), dispatch._STATIC_MAX_KV_LEN[-1] if dispatch._STATIC_MAX_KV_LEN else None))
        return decode(q, k_cache, v_cache, block_tables, kv_lens, **kw)

    monkeypatch.setattr(llm.backend, "decode", spy)
    llm.generate([[1] * 1030, [7, 8]], SamplingParams(max_tokens=3, ignore_eos=True))
    assert seen
    assert all(bound == len_bucket(longest, 4096) for longest, bound in seen), seen
    assert any(bound == 2048 for _, bound in seen)


def _tiny(gemma: bool):
    from engine.model.config import ModelConfig
    from engine.model.rope import RopeConfig

    n = 3
    return ModelConfig(
        architecture="gemma3" if gemma else "llama", vocab_size=64, hidden_size=32, intermediate_size=48,
        num_layers=n, num_heads=4, num_kv_heads=2, head_dim=8, rms_norm_eps=1e-6, max_position_embeddings=256,
        layer_windows=[None, 8, None], layer_ropes=[RopeConfig()] * n, attn_scale=8**-0.5,
        tie_word_embeddings=gemma, qk_norm=gemma, sandwich_norms=gemma, gemma_norm=gemma,
        embed_scale=32**0.5 if gemma else None, hidden_act="gelu_tanh" if gemma else "silu",
    )



@pytest.mark.parametrize("gemma", [False, True])
def test_fused_layer_path_matches_unfused(gemma, monkeypatch):
    """The decoder layers' fused path (residual + norms, act * up, RoPE + KV write in decode),
    which runs on CUDA, switched on here under the Triton interpreter: the same greedy tokens as
    the torch path (float32; the two differ by rounding noise only), for Llama's pre-norm and
    Gemma's sandwich norms."""
    import os

    from longdoc_kernels import dispatch

    if os.environ.get("TRITON_INTERPRET") != "1" or not dispatch.triton_installed():
        pytest.skip("needs Triton's interpreter (the CPU test setup)")
    from engine.config import CacheConfig, SchedulerConfig
    from engine.model.loader.random_weights import llm_from_model, random_model

    cfg = _tiny(gemma)
    model = random_model(cfg, "cpu", torch.float32, seed=4, std=0.2)

    def run():
        """Logits of a prefill, then of 4 greedy decode steps driven through the runner."""
        llm = llm_from_model(model, cfg, device="cpu", dtype="float32",
                             cache=CacheConfig(block_size=4, memory_budget=2**20), scheduler=SchedulerConfig(max_num_seqs=2))
        ids = [1, 2, 3, 4, 5, 6, 7, 9, 11, 3, 5]
        seq, hidden, _ = llm.core.prefill_collect(ids, len(ids) - 1)
        logits = [llm.model.logits(hidden)[-1]]
        for _ in range(4):
            seq.output_ids.append(int(logits[-1].argmax()))
            logits.append(llm.model.logits(llm.runner.forward([], [seq]))[-1])
            seq.num_cached = seq.num_tokens
        llm.core.free(seq)
        return torch.stack(logits), llm.prompt_logits(ids)

    calls = {"n": 0}
    real = dispatch.fused_path

    def forced(x):
        calls["n"] += 1
        return True

    want_dec, want_pre = run()
    assert real(torch.zeros(2, 32)) is False  # CPU tensors take the torch path by default
    monkeypatch.setattr(dispatch, "fused_path", forced)
    rope_calls = {"prefill": 0, "decode": 0}
    real_rope = dispatch.rope_and_cache_write

    def counted(*a, return_k=False):
        rope_calls["prefill" if return_k else "decode"] += 1
        return real_rope(*a, return_k=return_k)

    monkeypatch.setattr(dispatch, "rope_and_cache_write", counted)
    from engine.model.layers import Attention

    monkeypatch.setattr(Attention, "cpu_joint", False)  # the CUDA layer path, not the CPU's own
    got_dec, got_pre = run()
    assert calls["n"] > 0
    assert rope_calls["prefill"] > 0 and rope_calls["decode"] > 0  # both steps rotate and write in one launch
    torch.testing.assert_close(got_pre, want_pre, atol=1e-4, rtol=0)
    torch.testing.assert_close(got_dec, want_dec, atol=1e-4, rtol=0)


def test_capture_all_covers_every_bucket_a_step_can_use(monkeypatch):
    """`LLM.warmup` captures (and tunes) every (batch bucket, context bucket) a decode step of up to
    max_num_seqs sequences can replay, with one progress line each, so `run` never captures; on
    the CPU there are no graphs and warmup only runs its short request."""
    from types import SimpleNamespace

    from engine.runner.cuda_graph import CudaGraphRunner, bucket_of, len_bucket

    cache = SimpleNamespace(max_model_len=5000)
    runner = SimpleNamespace(cache=cache)
    g = CudaGraphRunner(runner)
    monkeypatch.setattr(g, "_capture", lambda b, n: ("graph", b, n))
    lines: list[str] = []
    assert g.capture_all(3, lines.append) == 3 * 4
    assert set(g.graphs) == {(b, n) for b in (1, 2, 4) for n in (1024, 2048, 4096, 5000)}
    assert lines[0] == "warm-up: decode graph 1/12 (batch 1, context 1024)"
    for b in range(1, 4):  # every step run() may key, for contexts up to max_model_len
        for longest in (1, 1500, 4097, 5000):
            assert (bucket_of(b, g.batch_buckets), len_bucket(longest, 5000)) in g.graphs
    assert g.capture_all(3) == 0  # nothing left to capture


def test_warmup_on_cpu_runs_one_request_and_captures_nothing():
    from engine.config import CacheConfig, SchedulerConfig
    from engine.model.loader.random_weights import llm_from_model, random_model

    cfg = _tiny(True)
    llm = llm_from_model(random_model(cfg, "cpu", torch.float32, seed=4, std=0.2), cfg, device="cpu",
                         dtype="float32", cache=CacheConfig(block_size=4, memory_budget=2**20),
                         scheduler=SchedulerConfig(max_num_seqs=2))
    lines: list[str] = []
    assert llm.warmup(lines.append) == 0
    assert lines == ["warm-up: compiling kernels"]


def test_warmup_on_cuda_runs_the_long_prompt_and_a_batch(monkeypatch):
    """The CUDA branch of warmup (device faked, generate recorded): a long prompt of two chunks and
    more, then a batch of three prompts admitted together (two longer than a chunk, their second
    chunks of 256 and 100 tokens, one short prompt), so a user's first batch compiles neither the
    varlen prefill (with and without a window) nor eager decode launches."""
    from types import SimpleNamespace

    from engine.config import CacheConfig, SchedulerConfig
    from engine.model.loader.random_weights import llm_from_model, random_model

    cfg = _tiny(True)
    llm = llm_from_model(random_model(cfg, "cpu", torch.float32, seed=4, std=0.2), cfg, device="cpu",
                         dtype="float32", cache=CacheConfig(block_size=4, memory_budget=2**22),
                         scheduler=SchedulerConfig(max_num_seqs=4, max_prefill_chunk=64, max_model_len=512))
    calls: list[list[int]] = []
    real = llm.generate

    def recording(prompts, params=None, on_step=None):
        calls.append([len(p) for p in prompts])
        return real(prompts, params, on_step)

    monkeypatch.setattr(llm, "generate", recording)
    monkeypatch.setattr(llm, "device", SimpleNamespace(type="cuda"))
    lines: list[str] = []
    assert llm.warmup(lines.append) == 0  # no graph runner on the CPU
    chunk = llm.core.chunk
    assert calls[0] == [32]
    assert calls[1][0] > 2 * chunk
    assert calls[2] == [32, chunk + 256, chunk + 100]  # a second chunk of 256 and a short one (global layers)
    assert lines[-1] == f"warm-up: a batch of 3 prompts ({chunk + 256:,}, {chunk + 100:,} and 32 tokens)"
