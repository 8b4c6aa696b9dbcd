"""Graceful fallback when a request cannot fit: longer than the model's context, or than what the KV
cache can hold for one sequence.

    from engine import LLM, LongRequest, FallbackPolicy, SamplingParams
    req = LongRequest(document=text, question="\\n\\nQuestion: Who signed?\\nAnswer:")
    from pipelines.text.fallback_tools import PipelineTextTools   # the caller's text tools
    out, report = llm.generate_long(req, SamplingParams(max_tokens=32), FallbackPolicy("retrieval"),
                                    text_tools=PipelineTextTools())
    report.to_dict()   # fallback_triggered, strategy, tokens dropped, key-entity retention, chunks

The budget of one prompt is min(llm.max_model_len, llm.kv.max_tokens_per_seq()) minus the tokens
reserved for the answer (`policy.answer_reserve`, default `params.max_tokens`). A request within it
runs unchanged (`fallback_triggered` False). Otherwise the policy decides; only the document is ever
cut — the instructions and the question always reach the model whole:

- "error": raise ContextLengthError (the context is the limit) or CacheFullError (the KV cache is),
  naming the lengths.
- "truncate": `truncate_side` names the part of the document that is DROPPED, as in Hugging Face's
  `truncation_side`: "tail" keeps the beginning, "head" keeps the end, "middle" keeps the beginning
  and the end. Cuts are made on token ids, moved to a paragraph or sentence start when one lies within
  `snap_tokens` tokens (giving up at most that many tokens).
- "retrieval": the document is split into chunks of about `chunk_tokens` tokens on paragraph and
  sentence starts; the caller's `text_tools` (a `TextTools`, engine/fallback/tools.py) score the
  chunks against the question (or, without one, the instructions), each chunk also given as windows
  of `embed_window` tokens for an embedder, under the policy's `retriever`; the best chunks are
  kept, in document order, until the budget is full; the room whole chunks leave (up to a chunk)
  is filled with the beginning of the best chunk left out, cut at a sentence or paragraph start
  (its `ChunkInfo.kept_tokens` says how much). Without `text_tools` retrieval is an EngineError.
- "map_reduce": the document is split into as few chunks as one call's room allows, of about equal
  length (or into chunks of `map_chunk_tokens`); one batched `llm.generate` answers the request over
  every chunk (the request's own template, the chunk as its document), then a reduce prompt
  (`reduce_template`) over the partial answers gives the final answer; that prompt is itself fitted
  by truncation if it is too long.

Wherever document text was removed, `gap_marker` (default "\\n[...]\\n", counted in the budget) is
put in its place. Key-entity retention is the share of the document's distinct named entities and
numbers (as the `text_tools` extract them) of which at least one occurrence lies wholly inside the
document text the model saw (for map-reduce: inside any chunk; the reduce step sees only partial
answers); without `text_tools` it is not measured (None in the report).

The engine imports nothing from the pipelines: `pipelines.text.fallback_tools.PipelineTextTools`
is the implementation the app passes in.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.core.output_processor import GenerationOutput
from engine.core.sampling import SamplingParams
from engine.errors import CacheFullError, ContextLengthError, EngineError
from engine.fallback.token_text import TokenText
from engine.fallback.tools import TextTools

if TYPE_CHECKING:
    from engine.llm import LLM

log = logging.getLogger(__name__)

STRATEGIES = ("error", "truncate", "retrieval", "map_reduce")
SIDES = ("head", "tail", "middle")
DEFAULT_REDUCE_TEMPLATE = "{instructions}Answers found in the parts of a long document:\n{document}\n{question}"


@dataclass
class FallbackPolicy:
    """What to do when a request does not fit (see the module docstring)."""

    strategy: str = "truncate"  # "error" | "truncate" | "retrieval" | "map_reduce"
    truncate_side: str = "middle"  # part of the document DROPPED: "head", "tail" or "middle"
    chunk_tokens: int = 512  # retrieval chunk size (tokens)
    chunk_overlap: int = 0  # tokens shared by consecutive chunks
    map_chunk_tokens: int | None = None  # map-reduce chunk size; None: as large as one call can hold
    answer_reserve: int | None = None  # tokens kept free for the answer; None: params.max_tokens
    partial_max_tokens: int | None = None  # map step answer length; None: params.max_tokens
    snap_tokens: int = 64  # at most this many tokens given up to cut at a paragraph/sentence start
    gap_marker: str = "\n[...]\n"  # stands where document text was removed; "" for none
    retriever: str = "auto"  # handed to TextTools.retrieval_scores: "auto", "embedding" or "bm25"
    embed_window: int = 128  # tokens per embedded window inside a retrieval chunk
    reduce_template: str = DEFAULT_REDUCE_TEMPLATE  # fields {instructions} {document} {question}

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise EngineError(f"unknown fallback strategy {self.strategy!r} (use one of {', '.join(STRATEGIES)})")
        if self.truncate_side not in SIDES:
            raise EngineError(f"unknown truncate_side {self.truncate_side!r} (use head, tail or middle)")
        if self.retriever not in ("auto", "embedding", "bm25"):
            raise EngineError(f"unknown retriever {self.retriever!r} (use auto, embedding or bm25)")
        if self.chunk_tokens < 1 or self.chunk_overlap < 0 or self.chunk_overlap >= self.chunk_tokens:
            raise EngineError("chunk_tokens must be >= 1 and 0 <= chunk_overlap < chunk_tokens")
        if "{document}" not in self.reduce_template:
            raise EngineError("reduce_template needs a {document} field (the partial answers)")


@dataclass
class LongRequest:
    """A request whose document may be cut: `template` places the fields; it must contain {document}
    once. Only the document is ever cut; instructions and question always reach the model."""

    document: str
    question: str = ""
    instructions: str = ""
    template: str = "{instructions}{document}{question}"

    def parts(self) -> tuple[str, str]:
        """The rendered text before and after the document."""
        if self.template.count("{document}") != 1:
            raise EngineError("LongRequest.template must contain {document} exactly once")
        pre, post = self.template.split("{document}")
        fields = {"instructions": self.instructions, "question": self.question}

        def fill(s: str) -> str:
            return re.sub(r"\{(instructions|question)\}", lambda m: fields[m.group(1)], s)

        return fill(pre), fill(post)

    def render(self) -> str:
        pre, post = self.parts()
        return pre + self.document + post


@dataclass
class ChunkInfo:
    index: int
    token_start: int  # token range in the document
    token_end: int
    char_start: int | None = None  # character range in the document (None without a tokenizer)
    char_end: int | None = None
    score: float | None = None  # retrieval relevance
    used: bool = False
    answer: str | None = None  # map-reduce partial answer
    kept_tokens: int | None = None  # retrieval: tokens of it the model saw when only its beginning fit


@dataclass
class FallbackReport:
    """What happened to a request. Token counts of the document are of its ids encoded alone;
    `kept_tokens + tokens_dropped == document_tokens`. `chunks_total`/`chunks_used` are 0 for
    strategies that do not chunk. `key_entity_retention` is 1.0 when the document has no entity;
    it and the entity counts are None when not measured (no text tools were given)."""

    fallback_triggered: bool
    strategy: str  # the policy's strategy (applied only when fallback_triggered)
    reason: str | None  # "context" or "memory" (the binding limit) when the request did not fit
    prompt_tokens: int  # the original prompt (instructions + document + question) as one encoding
    document_tokens: int
    budget_tokens: int  # the longest prompt allowed: min(max_model_len, kv per sequence) - answer_reserve
    max_model_len: int
    kv_tokens_per_seq: int
    answer_reserve: int
    kept_tokens: int  # document tokens the model saw (map-reduce: in any chunk)
    tokens_dropped: int
    chunks_total: int = 0
    chunks_used: int = 0
    key_entity_retention: float | None = 1.0
    entities_total: int | None = 0
    entities_kept: int | None = 0
    lost_entities: list[str] = field(default_factory=list)  # up to 20, in document order
    truncate_side: str | None = None
    retrieval_method: str | None = None  # as the text tools name it: "embedding:minilm", "bm25", ...
    prompt_tokens_sent: list[int] = field(default_factory=list)  # length of every prompt generated from
    kept_spans: list[tuple[int, int]] = field(default_factory=list)  # char spans of the document kept
    kept_token_spans: list[tuple[int, int]] = field(default_factory=list)
    chunks: list[ChunkInfo] = field(default_factory=list)
    reduce_tokens_dropped: int = 0  # map-reduce: partial-answer tokens cut from the reduce prompt
    fit_seconds: float = 0.0
    generate_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class FallbackPlan:
    """The prompts to generate from: one prompt, or one per chunk for the map step of map-reduce."""

    prompts: list[list[int]]
    stage: str  # "single" or "map"
    params: SamplingParams  # for these prompts (the map step may use partial_max_tokens)


# --------------------------------------------------------------------------------------- helpers
@dataclass
class _Prepared:
    pre: list[int]  # ids before the document (BOS, instructions)
    post: list[int]  # ids after it (question)
    doc: TokenText
    full: list[int]  # the original prompt, encoded as one text (or the ids given)
    query: str  # what retrieval scores against ("" for token-id requests)
    is_text: bool
    decode: Callable[[list[int]], str] | None = None


def _prepare(llm: LLM, request: LongRequest | str | list[int]) -> _Prepared:
    if isinstance(request, str):
        request = LongRequest(document=request)
    if isinstance(request, LongRequest):
        if llm.tokenizer is None:
            raise EngineError("this model has no tokenizer; pass the request as a list of token ids")
        pre_text, post_text = request.parts()
        full = llm.encode(pre_text + request.document + post_text)
        pre = llm.encode(pre_text)  # with BOS where the tokenizer adds it
        post = llm.encode(post_text, add_special_tokens=False) if post_text else []
        enc = llm.tokenizer.encode_with_offsets(request.document, add_special_tokens=False)
        doc = TokenText(enc.ids, request.document, enc.offsets)
        query = (request.question or request.instructions).strip()
        return _Prepared(pre, post, doc, full, query, True)
    ids = [int(t) for t in request]
    if not ids:
        raise EngineError("empty prompt")
    bos = llm.config.bos_token_id
    pre = ids[:1] if bos is not None and ids[0] == bos else []
    doc_ids = ids[len(pre) :]
    decode = (lambda x: llm.tokenizer.decode(x, skip_special_tokens=True)) if llm.tokenizer is not None else None
    text = decode(doc_ids) if decode else None
    return _Prepared(pre, [], TokenText(doc_ids, text, None), ids, "", False, decode)


def _merge(pieces: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(pieces):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _cost(pieces: list[tuple[int, int]], n: int, gap: int) -> int:
    """Tokens of the kept pieces (merged) plus a gap marker at every place text was removed."""
    merged = _merge(pieces)
    if not merged:
        return gap if n else 0
    gaps = (merged[0][0] > 0) + (merged[-1][1] < n) + len(merged) - 1
    return sum(b - a for a, b in merged) + gaps * gap


def _assemble(p: _Prepared, pieces: list[tuple[int, int]], gap_ids: list[int]) -> list[int]:
    merged = _merge(pieces)
    n = len(p.doc)
    body: list[int] = []
    pos = 0
    for a, b in merged:
        if a > pos:
            body += gap_ids
        body += p.doc.ids[a:b]
        pos = b
    if pos < n:
        body += gap_ids
    return p.pre + body + p.post


def _truncate(doc: TokenText, room: int, side: str, snap: int, gap: int) -> list[tuple[int, int]]:
    """Token pieces of the document kept by truncation into `room` tokens (gap markers included)."""
    n = len(doc)
    if n <= room:
        return [(0, n)]
    keep = room - gap  # one marker where text was removed, whichever side
    if keep <= 0:
        return []
    if side == "tail":  # drop the end, keep the beginning
        return [(0, doc.snap_down(keep, keep - snap))]
    if side == "head":  # drop the beginning, keep the end
        start = n - keep
        return [(doc.snap_up(start, start + snap), n)]
    head = doc.snap_down(keep // 2, keep // 2 - snap)
    start = n - (keep - head)
    start = doc.snap_up(start, start + snap)
    return [p for p in ((0, head), (start, n)) if p[1] > p[0]]


def _retrieval_scores(
    p: _Prepared, chunks: list[tuple[int, int]], policy: FallbackPolicy, tools: TextTools | None
) -> tuple[list[float], str]:
    if tools is None:
        raise EngineError(
            "fallback strategy 'retrieval' needs text tools: pass text_tools= (a TextTools, e.g. "
            "pipelines.text.fallback_tools.PipelineTextTools()) to generate_long / run_with_fallback / fit"
        )
    doc = p.doc

    def text_of(a: int, b: int) -> str:
        lo, hi = doc.char_span(a, b)  # type: ignore[misc]
        return doc.text[lo:hi]  # type: ignore[index]

    texts = [text_of(a, b) for a, b in chunks]
    windows = [[text_of(x, y) for x, y in doc.chunks(a, b, policy.embed_window)] for a, b in chunks]
    return tools.retrieval_scores(doc.text or "", p.query, texts, windows, policy.retriever)


def _limits(llm: LLM, reserve: int) -> tuple[int, int, int, str]:
    ctx = int(llm.max_model_len)
    kv = int(llm.kv.max_tokens_per_seq())
    budget = min(ctx, kv) - reserve
    reason = "memory" if kv < ctx else "context"
    if budget <= 0:
        raise EngineError(
            f"no room for a prompt: the limit is {min(ctx, kv)} tokens (max_model_len {ctx}, KV cache {kv} "
            f"per sequence) and {reserve} are reserved for the answer"
        )
    return ctx, kv, budget, reason


# ------------------------------------------------------------------------------------------ fit
def fit(
    llm: LLM, request: LongRequest | str | list[int], policy: FallbackPolicy | None = None,
    params: SamplingParams | None = None, text_tools: TextTools | None = None,
) -> tuple[FallbackPlan, FallbackReport]:
    """Decide how `request` is served: the prompts to generate from and the report (see module doc).
    `text_tools` score retrieval chunks and measure key-entity retention."""
    t0 = time.perf_counter()
    policy = policy or FallbackPolicy()
    params = params or SamplingParams()
    reserve = params.max_tokens if policy.answer_reserve is None else policy.answer_reserve
    ctx, kv, budget, reason = _limits(llm, reserve)
    p = _prepare(llm, request)
    n = len(p.doc)
    report = FallbackReport(
        fallback_triggered=False, strategy=policy.strategy, reason=None, prompt_tokens=len(p.full),
        document_tokens=n, budget_tokens=budget, max_model_len=ctx, kv_tokens_per_seq=kv,
        answer_reserve=reserve, kept_tokens=n, tokens_dropped=0,
    )
    if len(p.full) <= budget:
        _finish(report, p, [(0, n)], t0, text_tools)
        report.prompt_tokens_sent = [len(p.full)]
        return FallbackPlan([p.full], "single", params), report

    report.fallback_triggered, report.reason = True, reason
    limit_name = "KV cache per sequence" if reason == "memory" else "max_model_len"
    if policy.strategy == "error":
        cls = CacheFullError if reason == "memory" else ContextLengthError
        raise cls(
            f"prompt is {len(p.full)} tokens; with {reserve} reserved for the answer at most {budget} fit "
            f"(the {limit_name} is the limit: max_model_len {ctx}, KV cache {kv} tokens per sequence)"
        )
    if policy.strategy in ("retrieval", "map_reduce") and not p.query:
        what = "token-id requests" if not p.is_text else "requests without a question or instructions"
        raise EngineError(f"fallback strategy {policy.strategy!r} needs a question; {what} allow 'error' or 'truncate'")
    gap_ids = llm.encode(policy.gap_marker, add_special_tokens=False) if policy.gap_marker and llm.tokenizer else []
    fixed = len(p.pre) + len(p.post)

    if policy.strategy == "map_reduce":
        part_tokens = params.max_tokens if policy.partial_max_tokens is None else policy.partial_max_tokens
        room = min(ctx, kv) - part_tokens - fixed
        if room <= 0:
            raise EngineError(f"instructions and question alone are {fixed} tokens; no room for a chunk")
        size = min(room, policy.map_chunk_tokens or room)
        overlap = min(policy.chunk_overlap, size - 1)
        chunks = p.doc.chunks(0, n, size, overlap)
        if policy.map_chunk_tokens is None and len(chunks) > 1:
            chunks = _balanced_chunks(p.doc, n, size, overlap, len(chunks)) or chunks
        prompts = [p.pre + p.doc.ids[a:b] + p.post for a, b in chunks]
        report.chunks = [_chunk_info(p.doc, i, a, b, used=True) for i, (a, b) in enumerate(chunks)]
        report.chunks_total = report.chunks_used = len(chunks)
        _finish(report, p, chunks, t0, text_tools)
        report.prompt_tokens_sent = [len(x) for x in prompts]
        return FallbackPlan(prompts, "map", dataclasses.replace(params, max_tokens=part_tokens)), report

    room = budget - fixed
    if room <= 0:
        raise EngineError(
            f"instructions and question alone are {fixed} tokens, more than the {budget}-token budget"
        )
    gap = len(gap_ids)
    if policy.strategy == "truncate":
        report.truncate_side = policy.truncate_side
        pieces = _truncate(p.doc, room, policy.truncate_side, policy.snap_tokens, gap)
    else:  # retrieval
        size = min(policy.chunk_tokens, room - 2 * gap)
        if size <= 0:
            raise EngineError(f"no room for a chunk: {room} tokens left for the document")
        chunks = p.doc.chunks(0, n, size, min(policy.chunk_overlap, size - 1))
        if p.doc.text is None or p.doc.offsets is None:  # unreachable: token-id requests stop above
            raise EngineError("retrieval needs the document's text")
        scores, report.retrieval_method = _retrieval_scores(p, chunks, policy, text_tools)
        chosen: list[int] = []
        for i in sorted(range(len(chunks)), key=lambda i: (-scores[i], i)):
            if _cost([chunks[j] for j in chosen + [i]], n, gap) <= room:
                chosen.append(i)
        pieces = [chunks[i] for i in sorted(chosen)]
        # whole chunks rarely fill the room (a 512-token chunk does not fit 500 tokens): the best
        # chunk left out contributes its beginning, cut at a sentence or paragraph start
        partial = _fill_partial(p.doc, pieces, [chunks[i] for i in sorted(range(len(chunks)), key=lambda i: (-scores[i], i))
                                                if i not in chosen], n, gap, room, policy.snap_tokens)
        if partial is not None:
            pieces = sorted(pieces + [partial])
        report.chunks = [
            _chunk_info(p.doc, i, a, b, used=i in chosen, score=scores[i]) for i, (a, b) in enumerate(chunks)
        ]
        if partial is not None:
            info = next(c for c in report.chunks if not c.used and c.token_start == partial[0])
            info.used, info.kept_tokens = True, partial[1] - partial[0]
        report.chunks_total, report.chunks_used = len(chunks), sum(c.used for c in report.chunks)
    ids = _assemble(p, pieces, gap_ids)
    assert len(ids) <= budget, (len(ids), budget)
    _finish(report, p, pieces, t0, text_tools)
    report.prompt_tokens_sent = [len(ids)]
    return FallbackPlan([ids], "single", params), report


def _fill_partial(doc: TokenText, pieces: list[tuple[int, int]], left: list[tuple[int, int]], n: int, gap: int,
                  room: int, snap: int, least: int = 32) -> tuple[int, int] | None:
    """The longest beginning (a, e) of the first chunk in `left` (best first) that still fits `room`
    beside `pieces`, its end moved back to a sentence or paragraph start within `snap` tokens; None
    when less than `least` tokens would be added."""
    if _cost(pieces, n, gap) + gap + least > room:
        return None
    for a, b in left[:1]:
        lo, hi = a, b  # the largest end e in [a, b] with the cost within room (cost grows with e)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if _cost(pieces + [(a, mid)], n, gap) <= room:
                lo = mid
            else:
                hi = mid - 1
        end = doc.snap_down(lo, max(a + 1, lo - snap)) if lo < b else lo
        if end - a >= least:
            return (a, end)
    return None


def _balanced_chunks(doc: TokenText, n: int, size: int, overlap: int, k: int) -> list[tuple[int, int]] | None:
    """At most `k` chunks of at most `size` tokens covering [0, n), as equal in length as the
    snapping to paragraph and sentence starts allows: the chunk size is searched from the even share
    up to `size` (17 sizes), keeping the split whose longest and shortest chunks differ least."""
    base = -(-(n + (k - 1) * overlap) // k)
    step = max(1, (size - base) // 16)
    best, best_spread = None, None
    for even in range(min(base, size), size + 1, step):
        cand = doc.chunks(0, n, even, min(overlap, even - 1))
        if len(cand) > k:
            continue
        lens = [b - a for a, b in cand]
        spread = max(lens) - min(lens)
        if best_spread is None or spread < best_spread:
            best, best_spread = cand, spread
    return best


def _chunk_info(doc: TokenText, i: int, a: int, b: int, used: bool, score: float | None = None) -> ChunkInfo:
    span = doc.char_span(a, b)
    return ChunkInfo(i, a, b, span[0] if span else None, span[1] if span else None, score, used)


def _finish(report: FallbackReport, p: _Prepared, pieces: list[tuple[int, int]], t0: float,
            tools: TextTools | None) -> None:
    """Fill the kept/dropped counts and the key-entity retention (with `tools`) from the kept token
    pieces."""
    merged = _merge(pieces)
    kept = sum(b - a for a, b in merged)
    report.kept_tokens, report.tokens_dropped = kept, len(p.doc) - kept
    report.kept_token_spans = merged
    doc = p.doc
    if doc.text is not None and doc.offsets is not None:
        spans = [doc.char_span(a, b) for a, b in merged]
        report.kept_spans = [s for s in spans if s is not None]
        if kept == len(doc):  # the whole document text, leading/trailing whitespace included
            report.kept_spans = [(0, len(doc.text))]
    total: int | None
    have: int | None
    lost: list[str] = []
    if doc.text is None:  # token ids without a tokenizer: no text, no entities
        total, have = 0, 0
    elif tools is None:  # not measured
        total, have = None, None
    elif doc.offsets is not None:
        total, have, lost = tools.entity_retention(doc.text, report.kept_spans)
    else:  # token ids with a tokenizer: decode what was kept
        seen = [doc.text] if kept == len(doc) else [p.decode(doc.ids[a:b]) for a, b in merged]  # type: ignore[misc]
        total, have, lost = tools.entity_retention_texts(doc.text, seen)
    report.entities_total, report.entities_kept = total, have
    report.key_entity_retention = None if total is None or have is None else (have / total if total else 1.0)
    report.lost_entities = lost[:20]
    report.fit_seconds = time.perf_counter() - t0


# ------------------------------------------------------------------------------------------- run
def run_with_fallback(
    llm: LLM, request: LongRequest | str | list[int], policy: FallbackPolicy | None = None,
    params: SamplingParams | None = None, text_tools: TextTools | None = None,
) -> tuple[GenerationOutput, FallbackReport]:
    """Serve `request` under `policy`: fit it, generate, and for map-reduce reduce the partial
    answers (one batched generate over the chunks, then one over the reduce prompt). `text_tools`:
    see `fit`."""
    policy = policy or FallbackPolicy()
    params = params or SamplingParams()
    plan, report = fit(llm, request, policy, params, text_tools)
    t0 = time.perf_counter()
    if plan.stage == "single":
        out = llm.generate([plan.prompts[0]], plan.params)[0]
        out.prompt = llm.decode(out.prompt_token_ids, False) if llm.tokenizer is not None else None
        report.generate_seconds = time.perf_counter() - t0
        return out, report
    partials = llm.generate(plan.prompts, plan.params)
    for info, o in zip(report.chunks, partials, strict=True):
        info.answer = o.text
    # one line per non-empty partial answer (its whitespace collapsed), numbered by chunk
    lines = [f"Part {i + 1}: {' '.join(o.text.split())}" for i, o in enumerate(partials) if o.text.strip()]
    assert isinstance(request, LongRequest)
    reduce_req = LongRequest(
        document="\n".join(lines), question=request.question, instructions=request.instructions,
        template=policy.reduce_template,
    )
    reduce_policy = dataclasses.replace(policy, strategy="truncate", answer_reserve=params.max_tokens)
    rplan, rreport = fit(llm, reduce_req, reduce_policy, params, text_tools)
    report.reduce_tokens_dropped = rreport.tokens_dropped
    report.prompt_tokens_sent.append(len(rplan.prompts[0]))
    out = llm.generate([rplan.prompts[0]], params)[0]
    out.prompt = llm.decode(out.prompt_token_ids, False)
    report.generate_seconds = time.perf_counter() - t0
    return out, report
