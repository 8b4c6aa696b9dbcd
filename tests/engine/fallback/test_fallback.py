"""Fallback for requests that do not fit (engine.fallback): error, truncate head/tail/middle, retrieval
and map-reduce, on a tiny random-weight Llama with a word-level tokenizer saved in its folder (so
text requests work), and once on the real Gemma 3 270M with a 512-token context.

The test document is about twice the tiny model's 128-token context, with seven key entities at
known places: "Acme Corporation" and 1999 at the start, the key sentence "The vault access code of the
Harwick Archive is 4817 - 2209" in the middle, "Zurich Branch" and 75 at the end.
"""

from __future__ import annotations

import random
import shutil

import pytest

from engine import (
    LLM,
    CacheConfig,
    CacheFullError,
    ContextLengthError,
    EngineError,
    FallbackPolicy,
    LongRequest,
    SamplingParams,
    fit,
    run_with_fallback,
)
from pipelines.text.entities import extract_entities
from pipelines.text.fallback_tools import PipelineTextTools
from pipelines.text.retrieval import bm25_scores
from pipelines.text.script import cjk_share
from tests.engine.tiny_models import tiny_hf_model

FILLER = [
    "the river flooded the lower fields in spring .",
    "farmers planted barley and oats near the canal .",
    "the council met every second week to discuss roads .",
    "a new bridge was built across the canal .",
    "children walked to the school on the hill .",
    "traders brought salt and cloth from the coast .",
]
WORDS = sorted({w for s in FILLER for w in s.split()} | set(
    "Acme Corporation opened in 1999 The vault access code of the Harwick Archive is 4817 - 2209 "
    "Zurich Branch holds 75 boxes Read notes and answer question Question : What ? Answer [...]".split()
))
ENTITIES = ["Acme Corporation", "1999", "Harwick Archive", "4817", "2209", "Zurich Branch", "75"]
KEY = "The vault access code of the Harwick Archive is 4817 - 2209 ."
QUESTION = " Question : What is the vault access code of the Harwick Archive ? Answer :"
MAX_LEN = 128
TOOLS = PipelineTextTools()  # the text tools the app passes to the fallback


def make_document(paragraphs: int = 16, seed: int = 0) -> str:
    rng = random.Random(seed)
    paras = [" ".join(rng.choice(FILLER) for _ in range(2)) for _ in range(paragraphs)]
    paras[0] = "Acme Corporation opened in 1999 . " + paras[0]
    paras[paragraphs // 2] = KEY + " " + paras[paragraphs // 2]
    paras[-1] = paras[-1] + " Zurich Branch holds 75 boxes ."
    return "\n\n".join(paras)


def request() -> LongRequest:
    return LongRequest(document=make_document(), instructions="Read the notes and answer the question . ",
                       question=QUESTION, template="{instructions}{document}\n\n{question}")


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder = tmp_path_factory.mktemp("tiny-fallback")
    tiny_hf_model("llama").save_pretrained(folder, safe_serialization=True)
    bare = tmp_path_factory.mktemp("tiny-fallback-bare")
    for f in folder.iterdir():
        shutil.copy(f, bare / f.name)
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(WORDS)}}
    assert len(vocab) <= 128
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(folder / "tokenizer.json"))
    return folder, bare


@pytest.fixture(scope="module")
def llm(tiny_folder):
    return LLM(tiny_folder[0], device="cpu", max_model_len=MAX_LEN)


def words_in(llm, ids: list[int]) -> str:
    return " " + llm.tokenizer.decode(ids) + " "


def check_report(llm, rep, prompt_ids: list[int], params: SamplingParams) -> None:
    """Consistency of a report with the prompt the model saw."""
    assert rep.kept_tokens + rep.tokens_dropped == rep.document_tokens
    assert 0.0 <= rep.key_entity_retention <= 1.0
    assert rep.entities_total == len(ENTITIES)
    seen = words_in(llm, prompt_ids)
    head, tail = " Read the notes and answer the question .", QUESTION.strip() + " "
    assert seen.startswith(head) and seen.endswith(tail)  # instructions and question reach the model whole
    seen_doc = seen[len(head) - 1 : -len(tail)]
    present = [e for e in ENTITIES if f" {e} " in seen_doc]
    assert rep.entities_kept == len(present), (present, rep.lost_entities)
    assert rep.key_entity_retention == pytest.approx(len(present) / len(ENTITIES))
    assert len(prompt_ids) + params.max_tokens <= llm.max_model_len


def test_entities_english_and_chinese():
    text = ("The Acme Widget Corporation paid $5,000 on March 3, 2021 to the Bank of England; growth was "
            "12.5% (2020-01-04). In Paris, John Smith met Mary Jones. Section 3 lists 42 items. "
            "“Customer Data” means data. 合同于2021年3月4日签订，金额为500万元，增长百分之十五。"
            "“保密信息”指第12条所述信息，编号３４５６。")
    got = [(e.kind, e.text) for e in extract_entities(text)]
    assert got == [
        ("name", "Acme Widget Corporation"), ("money", "$5,000"), ("date", "March 3, 2021"),
        ("name", "Bank of England"), ("percent", "12.5%"), ("date", "2020-01-04"), ("name", "John Smith"),
        ("name", "Mary Jones"), ("number", "42"), ("quoted", "Customer Data"), ("date", "2021年3月4日"),
        ("money", "500万元"), ("percent", "百分之十五"), ("quoted", "保密信息"), ("article", "第12条"),
        ("number", "3456"),
    ]
    for e in extract_entities(text):  # spans point into the original text (full-width digits too)
        assert len(text[e.start : e.end]) == e.end - e.start > 0


def test_bm25_finds_chinese_clause_by_bigrams():
    chunks = ["今天天气很好，我们去公园散步。", "保险库的密码是4817，请妥善保管。", "公司年报显示收入增长了百分之五。"]
    scores = bm25_scores("保险库密码是多少？", chunks)
    assert max(range(3), key=scores.__getitem__) == 1 and scores[0] == 0.0
    assert cjk_share("".join(chunks)) > 0.9 and cjk_share("plain English") == 0.0


def test_request_that_fits_runs_unchanged(llm):
    req = LongRequest(document="Acme Corporation opened in 1999 .", question=QUESTION)
    params = SamplingParams(max_tokens=4)
    out, rep = run_with_fallback(llm, req, FallbackPolicy("error"), params, text_tools=TOOLS)
    assert not rep.fallback_triggered and rep.reason is None
    assert rep.tokens_dropped == 0 and rep.kept_tokens == rep.document_tokens
    assert rep.key_entity_retention == 1.0 and rep.entities_total == 2
    assert out.token_ids == llm.generate(req.render(), params)[0].token_ids
    assert out.prompt_token_ids == llm.encode(req.render())


def test_error_names_the_lengths(llm):
    req = request()
    n = len(llm.encode(req.render()))
    assert n > 2 * MAX_LEN - 20
    with pytest.raises(ContextLengthError) as exc:
        run_with_fallback(llm, req, FallbackPolicy("error"), SamplingParams(max_tokens=8), text_tools=TOOLS)
    msg = str(exc.value)
    assert f"prompt is {n} tokens" in msg and f"max_model_len {MAX_LEN}" in msg and f"at most {MAX_LEN - 8}" in msg


@pytest.mark.parametrize("side", ["head", "tail", "middle"])
def test_truncate_sides(llm, side):
    params = SamplingParams(max_tokens=4)
    out, rep = run_with_fallback(llm, request(), FallbackPolicy("truncate", truncate_side=side), params, text_tools=TOOLS)
    assert rep.fallback_triggered and rep.reason == "context" and rep.truncate_side == side
    assert rep.tokens_dropped > rep.document_tokens // 3
    check_report(llm, rep, out.prompt_token_ids, params)
    assert len(out.token_ids) == 4
    seen = words_in(llm, out.prompt_token_ids)
    has_start, has_end = " Acme Corporation " in seen, " Zurich Branch " in seen
    assert (has_start, has_end) == {"head": (False, True), "tail": (True, False), "middle": (True, True)}[side]
    assert "4817" not in seen  # the key sentence in the middle is lost by every truncation
    assert seen.count("[...]") == 1  # one marker where the text was removed
    # cuts at paragraph/sentence starts: every kept piece is made of whole sentences
    doc = request().document
    for a, b in rep.kept_spans:
        before = doc[:a].rstrip()
        assert before == "" or before.endswith("."), doc[a : a + 30]
        assert doc[a:b].rstrip().endswith("."), doc[b - 30 : b]


def fake_embedder(texts: list[str]):
    """Two features: how often the key words occur, and a constant (so no vector is zero)."""
    return [[t.count("vault") + t.count("Harwick"), 0.1] for t in texts]


@pytest.mark.parametrize("retriever", ["fake", "bm25"])
def test_retrieval_keeps_the_key_chunk(llm, retriever):
    params = SamplingParams(max_tokens=4)
    policy = FallbackPolicy("retrieval", chunk_tokens=24, retriever="bm25" if retriever == "bm25" else "auto")
    tools = PipelineTextTools(embedder=fake_embedder if retriever == "fake" else None)
    out, rep = run_with_fallback(llm, request(), policy, params, text_tools=tools)
    assert rep.retrieval_method == ("embedding:custom" if retriever == "fake" else "bm25")
    check_report(llm, rep, out.prompt_token_ids, params)
    assert f" {KEY} " in words_in(llm, out.prompt_token_ids)
    best = max(rep.chunks, key=lambda c: c.score)
    assert best.used and "Harwick" in request().document[best.char_start : best.char_end]
    assert 1 < rep.chunks_used < rep.chunks_total == len(rep.chunks)
    assert rep.kept_tokens == sum(c.token_end - c.token_start for c in rep.chunks if c.used)
    used = [c.index for c in rep.chunks if c.used]
    assert rep.kept_token_spans[0][0] == rep.chunks[used[0]].token_start  # document order


def test_retrieval_on_chinese_document_uses_bm25(llm):
    rng = random.Random(1)
    filler = ["今天天气很好我们去公园散步。", "公司年报显示收入增长。", "河水在春天淹没了农田。", "孩子们走路去山上的学校。"]
    sents = [rng.choice(filler) for _ in range(140)]
    sents[70] = "保险库的密码是四八一七。"
    req = LongRequest(document=" ".join(sents), question="保险库的密码是多少？")
    out, rep = run_with_fallback(llm, req, FallbackPolicy("retrieval", chunk_tokens=16), SamplingParams(max_tokens=2), text_tools=TOOLS)
    assert rep.fallback_triggered and rep.retrieval_method == "bm25"
    kept = "".join(req.document[a:b] for a, b in rep.kept_spans)
    assert "保险库的密码是四八一七" in kept
    assert rep.kept_tokens + rep.tokens_dropped == rep.document_tokens


def test_map_reduce_one_batched_map_call(llm, monkeypatch):
    calls: list[int] = []
    generate = llm.generate

    def counting(prompts, params=None):
        calls.append(len(prompts))
        return generate(prompts, params)

    monkeypatch.setattr(llm, "generate", counting)
    params = SamplingParams(max_tokens=3)
    out, rep = run_with_fallback(llm, request(), FallbackPolicy("map_reduce"), params, text_tools=TOOLS)
    assert calls == [rep.chunks_total, 1] and rep.chunks_total >= 3  # map batch, then reduce
    assert rep.chunks_used == rep.chunks_total and rep.tokens_dropped == 0 and rep.key_entity_retention == 1.0
    assert all(c.answer is not None for c in rep.chunks)
    covered = sorted((c.token_start, c.token_end) for c in rep.chunks)
    assert covered[0][0] == 0 and covered[-1][1] == rep.document_tokens
    assert all(a[1] == b[0] for a, b in zip(covered, covered[1:], strict=False))
    assert all(n + 3 <= MAX_LEN for n in rep.prompt_tokens_sent)
    assert len(rep.prompt_tokens_sent) == rep.chunks_total + 1
    reduce_seen = words_in(llm, out.prompt_token_ids)
    assert reduce_seen.rstrip().endswith(QUESTION.strip()) and len(out.token_ids) == 3
    # as few chunks as the room allows, of about equal length (no sliver at the end)
    sizes = [b - a for a, b in covered]
    assert max(sizes) <= 1.6 * min(sizes), sizes


def test_fit_plan_for_map_reduce(llm):
    plan, rep = fit(llm, request(), FallbackPolicy("map_reduce", map_chunk_tokens=40), SamplingParams(max_tokens=5), text_tools=TOOLS)
    assert plan.stage == "map" and len(plan.prompts) == rep.chunks_total
    assert all(c.token_end - c.token_start <= 40 for c in rep.chunks)
    assert all(words_in(llm, p).rstrip().endswith(QUESTION.strip()) for p in plan.prompts)


def test_memory_limit_is_the_reason(tiny_folder):
    # fp32 llama tiny: 4 layers x 2 (K, V) x 16 tokens x 2 heads x 16 dims x 4 bytes = 16 KiB per block
    small = LLM(tiny_folder[0], device="cpu", max_model_len=MAX_LEN,
                cache=CacheConfig(memory_budget=4 * 16384, kv_dtype="float32"))
    assert small.kv.max_tokens_per_seq() == 64
    params = SamplingParams(max_tokens=4)
    out, rep = run_with_fallback(small, request(), FallbackPolicy("truncate"), params, text_tools=TOOLS)
    assert rep.reason == "memory" and rep.budget_tokens == 60 and len(out.prompt_token_ids) <= 60
    with pytest.raises(CacheFullError, match="KV cache 64 tokens per sequence"):
        fit(small, request(), FallbackPolicy("error"), params, text_tools=TOOLS)


def test_token_id_requests(llm, tiny_folder):
    ids = llm.encode(request().render())
    params = SamplingParams(max_tokens=4)
    out, rep = run_with_fallback(llm, ids, FallbackPolicy("truncate", truncate_side="head"), params, text_tools=TOOLS)
    gap = llm.encode("[...]", add_special_tokens=False)
    assert out.prompt_token_ids == gap + ids[-(MAX_LEN - 4 - len(gap)) :]  # no text offsets: exact token cut
    assert rep.kept_tokens + rep.tokens_dropped == len(ids) == rep.document_tokens
    # the whole prompt is the "document" here, so the question's "Harwick Archive" counts as seen
    seen = words_in(llm, out.prompt_token_ids)
    present = [e for e in ENTITIES if f" {e} " in seen]
    assert rep.entities_total == len(ENTITIES) and rep.entities_kept == len(present)
    assert 0 < len(present) < len(ENTITIES) and "Zurich Branch" in present and "Acme Corporation" not in present
    with pytest.raises(EngineError, match="needs a question"):
        fit(llm, ids, FallbackPolicy("retrieval"), params, text_tools=TOOLS)
    with pytest.raises(ContextLengthError):
        fit(llm, ids, FallbackPolicy("error"), params, text_tools=TOOLS)
    bare = LLM(tiny_folder[1], device="cpu", max_model_len=MAX_LEN)
    assert bare.tokenizer is None
    out, rep = run_with_fallback(bare, ids, FallbackPolicy("truncate", truncate_side="tail"), params, text_tools=TOOLS)
    assert out.prompt_token_ids == ids[: len(out.prompt_token_ids)] and len(out.prompt_token_ids) == MAX_LEN - 4
    assert rep.entities_total == 0 and rep.key_entity_retention == 1.0 and rep.tokens_dropped == len(ids) - 124
    with pytest.raises(EngineError, match="no tokenizer"):
        fit(bare, request(), FallbackPolicy("truncate"), params, text_tools=TOOLS)


def test_llm_generate_long(llm):
    params = SamplingParams(max_tokens=3)
    policy = FallbackPolicy("retrieval", chunk_tokens=24)
    tools = PipelineTextTools(embedder=fake_embedder)
    out, rep = llm.generate_long(request(), params, fallback=policy, text_tools=tools)
    ref, ref_rep = run_with_fallback(llm, request(), policy, params, text_tools=tools)
    assert out.token_ids == ref.token_ids and rep.to_dict()["kept_spans"] == ref_rep.to_dict()["kept_spans"]
    d = rep.to_dict()
    for key in ("fallback_triggered", "strategy", "reason", "prompt_tokens", "kept_tokens", "tokens_dropped",
                "chunks_total", "chunks_used", "key_entity_retention", "entities_total", "entities_kept"):
        assert key in d


def test_policy_validation():
    with pytest.raises(EngineError):
        FallbackPolicy("summarise")
    with pytest.raises(EngineError):
        FallbackPolicy("truncate", truncate_side="left")
    with pytest.raises(EngineError):
        LongRequest(document="x", template="{instructions}{question}").parts()


@pytest.mark.model
def test_real_gemma_double_context_every_strategy():
    """Gemma 3 270M with a 512-token context and a ~1.2K-token document: every strategy is served, the
    question survives, and retrieval (MiniLM when installed, else BM25) keeps the planted fact."""
    gemma = LLM(device="cpu", cache=CacheConfig(memory_budget=64 * 2**20), max_model_len=512)
    rng = random.Random(0)
    topics = ["The river flooded the lower fields in spring.", "Farmers planted barley and oats.",
              "The council met every second Tuesday to discuss roads.", "A new bridge was built across the canal.",
              "Children walked to the school on the hill.", "Traders brought salt and cloth from the coast."]
    paras = [" ".join(rng.choice(topics) for _ in range(4)) for _ in range(30)]
    paras[15] = "The vault access code of the Harwick Archive is 4817-2209. " + paras[15]
    req = LongRequest(document="\n\n".join(paras), instructions="Read the notes and answer the question.\n\n",
                      question="\n\nQuestion: What is the vault access code of the Harwick Archive?\nAnswer:")
    params = SamplingParams(max_tokens=12, stop=["\n"])
    with pytest.raises(ContextLengthError, match="max_model_len 512"):
        fit(gemma, req, FallbackPolicy("error"), params, text_tools=TOOLS)
    for policy in (FallbackPolicy("truncate"), FallbackPolicy("retrieval", chunk_tokens=128),
                   FallbackPolicy("map_reduce")):
        out, rep = run_with_fallback(gemma, req, policy, params, text_tools=TOOLS)
        assert rep.fallback_triggered and rep.document_tokens > 1000
        assert rep.kept_tokens + rep.tokens_dropped == rep.document_tokens
        assert max(rep.prompt_tokens_sent) + 12 <= 512
        assert out.prompt.endswith(req.question) and out.finish_reason in ("stop", "length", "eos")
        if policy.strategy == "truncate":
            assert "4817-2209" not in out.prompt and rep.key_entity_retention == 0.0
        if policy.strategy == "retrieval":
            assert "4817-2209" in out.prompt and rep.key_entity_retention == 1.0
            assert "4817-2209" in out.text  # greedy answer copied from the kept chunk
        if policy.strategy == "map_reduce":
            assert rep.chunks_total >= 2 and any("4817" in (c.answer or "") for c in rep.chunks)


def test_chinese_legal_quantities_and_article_references_are_entities():
    text = "依照第二十三条，赔偿义务人应在六个月内支付五万元；超过二十年的，不予保护；第5款另有规定。七十五周岁以上的，按五年计算。"
    got = [(e.kind, e.text) for e in extract_entities(text)]
    assert got == [
        ("article", "第二十三条"), ("number", "六个月"), ("number", "五万元"), ("number", "二十年"),
        ("article", "第5款"), ("number", "七十五周岁"), ("number", "五年"),
    ]


def test_without_text_tools_retrieval_is_an_error_and_retention_not_measured(llm):
    params = SamplingParams(max_tokens=4)
    with pytest.raises(EngineError, match="text_tools"):
        run_with_fallback(llm, request(), FallbackPolicy("retrieval", chunk_tokens=24), params)
    out, rep = run_with_fallback(llm, request(), FallbackPolicy("truncate"), params)
    assert rep.fallback_triggered and rep.tokens_dropped > 0
    assert rep.key_entity_retention is None and rep.entities_total is None and rep.entities_kept is None
    assert rep.to_dict()["key_entity_retention"] is None
    _, measured = run_with_fallback(llm, request(), FallbackPolicy("truncate"), params, text_tools=TOOLS)
    assert measured.key_entity_retention is not None and measured.kept_spans == rep.kept_spans
