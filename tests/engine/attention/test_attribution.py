"""Attribution against transformers' own attention probabilities (eager attention, output_attentions)
on a tiny Llama with a character-level tokenizer: the engine's log-sum-exp route gives the same mass."""

from __future__ import annotations

import pytest
import torch
from tokenizers import Regex, Tokenizer, models, pre_tokenizers

from engine import LLM, CacheConfig, EngineError, SchedulerConfig
from engine.model.tokenizer import Tokenizer as EngineTokenizer
from tests.engine.tiny_models import tiny_hf_model


def char_tokenizer() -> EngineTokenizer:
    vocab = {chr(i): i for i in range(32, 127)}
    vocab["<unk>"] = 0
    fast = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    fast.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    return EngineTokenizer(fast)


PROMPT, ANSWER = "Alpha beta gamma. Delta epsilon zeta! Eta theta", "beta zeta"


def tiny_llama(folder, chunk: int):
    """A tiny Llama (transformers model, and the engine over its saved folder) with the character tokenizer."""
    hf = tiny_hf_model("llama", seed=9)
    hf.save_pretrained(folder)
    llm = LLM(model=folder, device="cpu", dtype="float32",  # float32 pages: held to transformers' attention
              cache=CacheConfig(block_size=4, memory_budget=2**24, kv_dtype="float32"),
              scheduler=SchedulerConfig(max_model_len=256, max_prefill_chunk=chunk))
    llm.tokenizer = char_tokenizer()
    return hf, llm


@pytest.mark.parametrize("chunk", [1024, 5])
def test_attribution_equals_transformers_attention(tmp_path, chunk):
    hf, llm = tiny_llama(tmp_path, chunk)
    prompt, answer = PROMPT, ANSWER
    spans = [(0, 17), (18, 37), (38, len(prompt)), (6, 10)]
    res = llm.attribute(prompt, answer, spans)

    ids = [ord(c) for c in prompt + answer]
    p, a = len(prompt), len(answer)
    hf.set_attn_implementation("eager")
    with torch.no_grad():
        att = hf(torch.tensor([ids]), output_attentions=True).attentions  # per layer [1, H, T, T]
    rows = slice(p - 1, p + a - 1)  # the positions that predict each answer token
    mass = torch.stack([x[0, :, rows, :p].mean(0) for x in att]).mean(0)  # [A, P]
    expect = torch.stack([mass[:, s:e].sum(1) for s, e in spans], 1)
    torch.testing.assert_close(res.per_token, expect, rtol=1e-4, atol=1e-5)
    assert res.layers == list(range(hf.config.num_hidden_layers))
    assert [(s.token_start, s.token_end) for s in res.spans] == [(s, e) for s, e in spans]
    assert res.spans[0].mass == pytest.approx(float(expect[:, 0].mean()), rel=1e-4)
    assert sum(s.share for s in res.spans) == pytest.approx(1.0)
    assert all(g.allocator.num_free == g.num_blocks for g in llm.kv.groups)


def test_attribution_needs_global_layers(tmp_path):
    hf = tiny_hf_model("mistral", seed=9)  # every layer has a sliding window
    hf.save_pretrained(tmp_path)
    llm = LLM(model=tmp_path, device="cpu", cache=CacheConfig(block_size=4, memory_budget=2**22))
    llm.tokenizer = char_tokenizer()
    with pytest.raises(EngineError, match="global-attention"):
        llm.attribute("some text", "x", [(0, 4)])


@pytest.mark.parametrize("chunk", [1024, 8])
def test_attribution_over_a_cached_document_reads_it_from_the_cache(tmp_path, chunk):
    """After a batch over the prompt (generate_shared: its blocks cached, a cut registered), the
    attribution takes the prompt's KV from the prefix cache and still equals transformers' mass."""
    hf, llm = tiny_llama(tmp_path, chunk)
    prompt, answer = PROMPT, ANSWER
    llm.generate_shared(prompt, [" Q1", " Q2"])
    hits = llm.prefix.stats.hit_tokens
    res = llm.attribute(prompt, answer, [(0, 17), (18, 37), (38, len(prompt))])
    assert llm.prefix.stats.hit_tokens - hits == (len(prompt) - 1) // 4 * 4  # the head up to its cut
    ids = [ord(c) for c in prompt + answer]
    p = len(prompt)
    hf.set_attn_implementation("eager")
    with torch.no_grad():
        att = hf(torch.tensor([ids]), output_attentions=True).attentions
    mass = torch.stack([x[0, :, p - 1:p + len(answer) - 1, :p].mean(0) for x in att]).mean(0)
    expect = torch.stack([mass[:, s:e].sum(1) for s, e in [(0, 17), (18, 37), (38, p)]], 1)
    torch.testing.assert_close(res.per_token, expect, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("chunk", [1024, 8])
def test_attribute_many_equals_each_alone_in_fewer_forwards(tmp_path, chunk):
    """Several answers over two cached heads: attribute_many gives each the masses attribute gives
    it alone (the (head, suffix) form tokenized as generate_shared tokenizes it), in one forward
    for all of them when they fit one chunk, and leaves no block behind; with 8-token chunks the
    items' pieces share each forward's 8 tokens, cutting across items."""
    _, llm = tiny_llama(tmp_path, chunk)
    heads = [PROMPT, "Kappa lambda mu. Nu xi omicron? Pi rho"]
    suffixes = [" Q: which?", " Q: why not?"]
    for h in heads:
        llm.generate_shared(h, suffixes)
    items = [((h, s), ans, [(0, 5), (6, 17), (18, len(h) + len(s))])
             for h in heads for s in suffixes for ans in (" beta", " rho xi")]
    alone = [llm.attribute(*item) for item in items]
    free_before = [g.allocator.num_free for g in llm.kv.groups]
    calls = []
    real = llm.runner.forward
    llm.runner.forward = lambda *a, **k: calls.append(1) or real(*a, **k)
    try:
        together = llm.attribute_many(items)
    finally:
        del llm.runner.forward
    for one, many in zip(alone, together, strict=True):
        torch.testing.assert_close(many.per_token, one.per_token, rtol=1e-5, atol=1e-6)
        assert many.per_token.abs().sum() > 0
        assert [(s.token_start, s.token_end) for s in many.spans] == [(s.token_start, s.token_end) for s in one.spans]
    if chunk == 1024:
        assert len(calls) == 1  # eight answers' remainders in one forward
    # the (head, suffix) form is the concatenated prompt's tokenization here (characters)
    flat = llm.attribute(heads[0] + suffixes[0], " beta", items[0][2])
    torch.testing.assert_close(flat.per_token, alone[0].per_token, rtol=1e-5, atol=1e-6)
    assert [g.allocator.num_free for g in llm.kv.groups] == free_before  # every temporary sequence freed
