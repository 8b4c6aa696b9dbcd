"""The medical pipeline's LLM steps (issue 16), each inside `LLMRun.step`:

- `medical.attention_evidence`: the patient's documents in one long context (`PatientText`: every
  document one after the other under a one-line header, offsets mapped back to each document's own
  `SourceSpan`), followed by every conclusion and question of the run; ONE attention pass
  (`LLM.attribute`) reads, for each of them, the attention mass its tokens put on each candidate
  sentence of the record (`per_token` rows of that probe), so the whole patient is computed once for
  all the conclusions and questions. A question is probed by its generated answer when
  `medical.answer` ran (the answer's attention), else by its own words. The relative attention
  (mass / the best candidate's) is fused with the retrieval score (BM25 + embedder + concepts,
  `evidence.EvidenceIndex.scored`): `(1 - WEIGHT) * retrieval + WEIGHT * attention`, then the same
  evidence cut-off and top 5 as without the step. Candidates the retrieval did not score stay out
  (attention re-orders and can drop, never adds), negated mentions stay contradicting.
- `medical.answer`: a short answer to each question, generated over the same patient text with
  `ask_document` (strategy "placement": the patient's KV computed once for all the questions and
  kept in the engine's document cache for the session's later questions); each answer sentence
  links to the record sentences its tokens attend to most (the same attention pass, the answer's
  sentence rows). An answer whose attention could not be read is dropped with a one-line error
  (no ungrounded sentence is shown).

A patient longer than the model's context (or the KV cache) goes through the retrieval fallback:
the sentences the evidence ranking found for the conclusions and questions (round-robin over them,
best first) are kept in record order, as many as fit; `LLMContext` says so and how much was kept.

Known limits: `LLM.attribute` has no progress hook, so while its prefill runs the progress callback
gets an estimate (elapsed time against the estimated time, at most 95 %) once a second from the
calling thread; cancellation is checked before and after it. A later probe in the pass also sees
the earlier probes (one sequence); the record itself comes first for all of them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pipelines.documents import Document, SourceSpan
from pipelines.llm import (
    LLMRun,
    Progress,
    StepDecision,
    ask_document,
    engine_lock,
    register,
    sentence_spans,
)
from pipelines.medical.models import Answer, AnswerSentence, EvidenceItem, LLMContext

STEP_EVIDENCE = "medical.attention_evidence"
STEP_ANSWER = "medical.answer"
WEIGHT = 0.3  # the attention's weight in the fused score (the value the earlier engine re-rank used; not tuned)
FALLBACK_POOL = 12  # sentences per conclusion/question offered to the retrieval fallback
ANSWER_MAX_TOKENS = 48
ANSWER_EVIDENCE = 3  # record sentences linked to each answer sentence

INSTRUCTIONS = "The medical record of one patient, document by document.\n\n"
PROBES_HEAD = "\n\nConclusions and questions about this patient, each grounded in the record above:\n"
ANSWER_INSTRUCTIONS = "The medical record of one patient, document by document.\n\n"
ANSWER_QUESTION = "\n\nQuestion about this patient: {question}\nShort answer based on the record:"
ANSWER_STOP = ("\nQuestion", "\n\n")

# Registered with the measurements of BENCHMARKS.md ("LLM step: medical.attention_evidence",
# "LLM step: medical.answer"); see there for the commands.
register(StepDecision(
    STEP_EVIDENCE, "default", in_auto=False, measurement=None,
    note="not yet measured with Gemma 3 270M; runs with --llm on"))
register(StepDecision(
    STEP_ANSWER, "default", in_auto=False, measurement=None,
    note="no answer-quality truth to measure a gain against; runs with --llm on"))


# ------------------------------------------------------------------------------------------ the patient
@dataclass(frozen=True)
class _Segment:
    start: int  # in the patient text
    end: int
    doc: Document
    doc_start: int  # the same characters in doc.text


class PatientText:
    """One patient's documents (or kept sentences of them) as one `Document`, with every range of
    it that lies inside one source document mapped back to that document's own `SourceSpan`."""

    def __init__(self, parts: Sequence[tuple[Document, str, Sequence[tuple[int, int]] | None]]) -> None:
        """parts: (document, header line, ranges of it to include, None: its whole text)."""
        chunks: list[str] = []
        segs: list[_Segment] = []
        pos = 0
        for doc, head, ranges in parts:
            chunks.append(head + "\n")
            pos += len(head) + 1
            for a, b in ranges if ranges is not None else [(0, len(doc.text))]:
                segs.append(_Segment(pos, pos + b - a, doc, a))
                chunks.append(doc.text[a:b])
                pos += b - a
                chunks.append("\n")
                pos += 1
            chunks.append("\n")
            pos += 1
        self.doc = Document.from_text("".join(chunks), doc_id="patient")
        self.segments = segs
        self._by_doc = {}
        for s in segs:
            self._by_doc.setdefault(s.doc.doc_id, []).append(s)

    @property
    def text(self) -> str:
        return self.doc.text

    def to_patient(self, doc_id: str, start: int, end: int) -> tuple[int, int] | None:
        """The patient-text range of doc_id's [start, end), None when it was left out."""
        for s in self._by_doc.get(doc_id, ()):
            if s.doc_start <= start and end <= s.doc_start + (s.end - s.start):
                return s.start + start - s.doc_start, s.start + end - s.doc_start
        return None

    def to_source(self, start: int, end: int) -> SourceSpan | None:
        """The source document's SourceSpan of the patient text's [start, end), None when it crosses documents."""
        for s in self.segments:
            if s.start <= start and end <= s.end:
                return s.doc.span(s.doc_start + start - s.start, s.doc_start + end - s.start)
        return None


def _header(doc: Document, kind: str, day) -> str:
    return f"[{doc.doc_id} · {kind.replace('_', ' ')}{' · ' + day.isoformat() if day else ''}]"


def _fits(llm, n: int) -> bool:
    from engine import EngineError

    try:
        llm.check_len(n)
        return True
    except EngineError:
        return False


def _token_limit(llm) -> int:
    """The longest sequence this engine runs (context and KV cache), by bisection over check_len."""
    lo, hi = 0, 1 << 22
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _fits(llm, mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


# ------------------------------------------------------------------------------------------ attention pass
@dataclass
class _Probe:
    key: object  # what the caller reads back (None: context only, not read)
    text: str


def _attention_pass(llm, prompt_prefix: str, pt: PatientText, spans: list[tuple[int, int]], probes: list[_Probe],
                    on_progress: Callable[[Progress], None] | None, estimated_s: float, cancel) -> dict:
    """One `LLM.attribute` over prefix + patient text + probes: key -> mass per span (mean over that
    probe's tokens). Progress: an estimate once a second while the pass runs (see the module docstring)."""
    ids: list[int] = []
    rows: dict[object, tuple[int, int]] = {}
    for p in probes:
        t = llm.encode(p.text, add_special_tokens=False)
        if p.key is not None and t:
            rows[p.key] = (len(ids), len(ids) + len(t))
        ids.extend(t)
    shift = len(prompt_prefix)
    prompt = prompt_prefix + pt.text
    total = len(llm.encode(prompt)) + len(ids)
    box: dict = {}

    def work() -> None:
        try:
            box["out"] = llm.attribute(prompt, ids, [(a + shift, b + shift) for a, b in spans])
        except BaseException as exc:  # noqa: BLE001 - re-raised on the calling thread
            box["err"] = exc

    t0 = time.perf_counter()
    with engine_lock(llm):
        th = threading.Thread(target=work, name="medical-attention", daemon=True)
        th.start()
        while th.is_alive():
            th.join(1.0)
            if on_progress is not None and th.is_alive():
                el = time.perf_counter() - t0
                frac = min(0.95, el / estimated_s) if estimated_s > 0 else 0.0
                on_progress(Progress(int(frac * total), total, el, 0, 1))
    if "err" in box:
        raise box["err"]
    if on_progress is not None:
        on_progress(Progress(total, total, time.perf_counter() - t0, 1, 1))
    per_token = box["out"].per_token  # [probe tokens, spans]
    return {k: per_token[a:b].mean(0).tolist() for k, (a, b) in rows.items()}, total


# ------------------------------------------------------------------------------------------ the steps
@dataclass
class Plan:
    """One evidence ranking to fuse: its claim, kind and a function giving the retrieval's scored
    (supporting, contradicting, method) lists before the cut, and one building the Evidence from the
    fused lists (and the context's most attended sentences)."""

    claim: str
    kind: str
    scored: Callable[[], tuple[list, list, str]]
    build: Callable[..., object]  # (supporting, contradicting, method, attention=None) -> Evidence


def _est_tokens(text: str) -> int:
    return len(text.encode("utf-8")) // 4 + 1


def _fallback_keep(llm, docs: list[tuple[Document, str, object]], pools: list[list], limit: int,
                   overhead: int) -> tuple[PatientText, int]:
    """The retrieval fallback: round-robin over the rankings' pools, best first, as many sentences as fit."""
    order: list = []
    seen: set = set()
    for r in range(FALLBACK_POOL):
        for pool in pools:
            if r < len(pool):
                c = pool[r]
                k = (c.doc_id, c.start, c.end)
                if k not in seen:
                    seen.add(k)
                    order.append(c)
    heads = {d.doc_id: len(llm.encode(_header(d, kind, day) + "\n", add_special_tokens=False)) + 1
             for d, kind, day in docs}
    kept: list = []
    used = overhead
    docs_in: set[str] = set()
    for c in order:
        n = len(llm.encode(c.text, add_special_tokens=False)) + 1 + (0 if c.doc_id in docs_in else heads[c.doc_id])
        if used + n > limit:
            continue
        used += n
        kept.append(c)
        docs_in.add(c.doc_id)
    by_doc: dict[str, list[tuple[int, int]]] = {}
    for c in kept:
        by_doc.setdefault(c.doc_id, []).append((c.start, c.end))
    parts = [(d, _header(d, kind, day), sorted(by_doc[d.doc_id])) for d, kind, day in docs if d.doc_id in by_doc]
    return PatientText(parts), len(kept)


def run_steps(llm: LLMRun, docs: list[tuple[Document, str, object]], candidates: list, plans: list[Plan],
              questions: list[str]) -> tuple[list, LLMContext | None, list[Answer] | None]:
    """Run medical.answer and medical.attention_evidence for one patient. docs: (document, kind,
    date) in record order; candidates: the evidence index's sentences (`evidence.Candidate`); plans:
    one per evidence ranking (questions first, in `questions` order). Returns the evidence list
    (fused where the evidence step ran, else each plan's own), the context note and the answers
    (None when the answer step did not run)."""
    want_ev = bool(plans) and llm.wants(STEP_EVIDENCE)
    want_ans = bool(questions) and llm.wants(STEP_ANSWER)
    n_chars_tokens = sum(_est_tokens(d.text) for d, _, _ in docs)
    scored = [p.scored() for p in plans] if (want_ev or want_ans) else []
    state: dict = {"pt": None, "ctx": None, "att": None}

    def context(l_engine) -> PatientText:
        """The patient text for this engine (whole, or the retrieval fallback), built once."""
        if state["pt"] is None:
            whole = PatientText([(d, _header(d, kind, day), None) for d, kind, day in docs])
            probes_n = sum(len(l_engine.encode(p.claim, add_special_tokens=False)) + 8 for p in plans)
            overhead = (len(l_engine.encode(INSTRUCTIONS)) + len(l_engine.encode(PROBES_HEAD, add_special_tokens=False))
                        + probes_n + (ANSWER_MAX_TOKENS + 16) * len(questions) + 32)
            n = len(l_engine.encode(whole.text, add_special_tokens=False))
            total_sents = len(candidates)
            if _fits(l_engine, n + overhead):
                state["pt"] = whole
                state["ctx"] = LLMContext(strategy="whole patient", tokens=n, documents=len(docs), sentences=total_sents,
                                          sentences_total=total_sents,
                                          note=f"the whole patient ({len(docs)} documents, {n:,} tokens) in one context")
            else:
                limit = _token_limit(l_engine)
                pools = [[c for c, *_ in sup + con] for sup, con, _ in scored]
                pt, kept = _fallback_keep(l_engine, docs, pools, limit, overhead)
                m = len(l_engine.encode(pt.text, add_special_tokens=False))
                state["pt"] = pt
                state["ctx"] = LLMContext(
                    strategy="retrieval", tokens=m, documents=len({s.doc.doc_id for s in pt.segments}), sentences=kept,
                    sentences_total=total_sents,
                    note=(f"the patient ({n:,} tokens, {n + overhead:,} with the prompts around it) does not fit the "
                          f"model's context of {limit:,} tokens: retrieval "
                          f"fallback, {kept} of {total_sents} sentences kept (those the evidence ranking found for the "
                          f"conclusions and questions), the rest dropped"))
        return state["pt"]

    def spans_in(pt: PatientText) -> tuple[list[int], list[tuple[int, int]]]:
        idx, spans = [], []
        for i, c in enumerate(candidates):
            r = pt.to_patient(c.doc_id, c.start, c.end)
            if r is not None:
                idx.append(i)
                spans.append(r)
        return idx, spans

    def attention(st, answers: dict[int, list[str]] | None, est_s: float) -> None:
        """The one attention pass: every plan's claim (or its question's answer) and every answer sentence."""
        pt = context(st.llm)
        idx, spans = spans_in(pt)
        probes = [_Probe(None, PROBES_HEAD)]
        keys: dict[int, list] = {}  # plan -> the probe rows that stand for it
        for k, p in enumerate(plans):
            qi = questions.index(p.claim) if p.kind == "question" and p.claim in questions else None
            if answers is not None and qi is not None and answers.get(qi):
                probes.append(_Probe(None, f"- Question: {p.claim}\n  Answer:"))
                for j, s in enumerate(answers[qi]):
                    probes.append(_Probe(("ans", qi, j), " " + s))
                probes.append(_Probe(None, "\n"))
                keys[k] = [("ans", qi, j) for j in range(len(answers[qi]))]
                continue
            keys[k] = [("plan", k)]
            lead = "- Question: " if p.kind == "question" else "- Conclusion: "
            probes.append(_Probe(None, lead))
            probes.append(_Probe(("plan", k), p.claim))
            probes.append(_Probe(None, "\n"))
        if answers is not None:  # answers to questions that have no plan (none today; kept general)
            for qi, sents in answers.items():
                if any(p.kind == "question" and p.claim == questions[qi] for p in plans):
                    continue
                probes.append(_Probe(None, f"- Question: {questions[qi]}\n  Answer:"))
                for j, s in enumerate(sents):
                    probes.append(_Probe(("ans", qi, j), " " + s))
                probes.append(_Probe(None, "\n"))
        if llm.cancel is not None and llm.cancel.is_set():
            st.record.reason = "cancelled before the attention pass"
            return
        mass, total = _attention_pass(st.llm, INSTRUCTIONS, pt, spans, probes, st.progress, est_s, llm.cancel)
        st.add(requests=1, prompt_tokens=total)
        for k, ks in keys.items():  # a question answered: its answer's attention, all sentences together
            rows = [mass[x] for x in ks if x in mass]
            if rows and ("plan", k) not in mass:
                mass[("plan", k)] = [sum(col) / len(rows) for col in zip(*rows, strict=True)]
        state["att"] = (idx, mass)

    answers_out: list[Answer] | None = None
    answer_sents: dict[int, list[str]] = {}
    if questions:
        # the patient's KV once for all the questions, the answers decoded together, and (when the evidence
        # step does not run) the attention pass over the patient again
        est = llm.estimate_s(n_chars_tokens * (1 if want_ev else 2), ANSWER_MAX_TOKENS)
        with llm.step(STEP_ANSWER, estimated_s=est) as st:
            if st:
                pt = context(st.llm)
                res = ask_document(st.llm, pt.doc, questions, instructions=ANSWER_INSTRUCTIONS,
                                   question_template=ANSWER_QUESTION, max_tokens=ANSWER_MAX_TOKENS, stop=ANSWER_STOP,
                                   strategy="placement", on_progress=st.progress, cancel=llm.cancel)
                st.add(res)
                answers_out = []
                for qi, it in enumerate(res.items):
                    text = " ".join(it.text.split())
                    if it.error or not text:
                        answers_out.append(Answer(question=questions[qi], text=text, error=it.error or "empty answer"))
                        continue
                    answers_out.append(Answer(question=questions[qi], text=text))
                    answer_sents[qi] = _sentences(text)
                if answer_sents and not want_ev:
                    attention(st, answer_sents, llm.estimate_s(n_chars_tokens))
    evidence_fused = None
    if plans:
        est = llm.estimate_s(n_chars_tokens + 40 * len(plans))
        with llm.step(STEP_EVIDENCE, estimated_s=est) as st:
            if st:
                attention(st, answer_sents or None, est)
                if state["att"] is not None:
                    evidence_fused = _fuse(plans, scored, candidates, *state["att"])
    if answers_out is not None:
        answers_out = _ground(answers_out, answer_sents, questions, candidates, state)
    return evidence_fused, state["ctx"], answers_out


def _sentences(text: str) -> list[str]:
    d = Document.from_text(text)
    return [text[a:b] for a, b in sentence_spans(d)] or [text]


def _fuse(plans: list[Plan], scored: list, candidates: list, idx: list[int], mass: dict) -> list:
    """Each plan's retrieval lists with the attention fused in, cut and built (see the module docstring)."""
    from pipelines.medical.evidence import cut

    pos = {id(candidates[i]): j for j, i in enumerate(idx)}
    out = []
    for k, (p, (sup, con, method)) in enumerate(zip(plans, scored, strict=True)):
        m = mass.get(("plan", k))
        if m is None:
            out.append(p.build(cut(sup)[:5], cut(con)[:5], method))
            continue
        out.append(p.build(cut(_fused(sup, m, pos))[:5], cut(_fused(con, m, pos))[:5], method + "+attention",
                           _top_attended(m, idx, candidates)))
    return out


def _top_attended(mass: list[float], idx: list[int], candidates: list, k: int = ANSWER_EVIDENCE) -> list[EvidenceItem]:
    """The k sentences of the context with the most attention, best first; score: share among all of them."""
    total = sum(mass) or 1.0
    best = sorted(range(len(mass)), key=lambda t: (-mass[t], t))[:k]
    out = []
    for t in best:
        c = candidates[idx[t]]
        out.append(EvidenceItem(span=c.doc.span(c.start, c.end), score=round(mass[t] / total, 4), doc_id=c.doc_id,
                                section=c.section, scores={"attention_share": round(mass[t] / total, 4)}))
    return out


def _fused(ranked: list, mass: list[float], pos: dict[int, int]) -> list:
    """(candidate, fused score, parts + relative attention), best first; a candidate outside the
    context (retrieval fallback) has attention 0."""
    top = max(mass) if mass and max(mass) > 0 else 1.0
    res = []
    for c, score, parts in ranked:
        j = pos.get(id(c))
        rel = mass[j] / top if j is not None else 0.0
        res.append((c, round((1 - WEIGHT) * score + WEIGHT * rel, 4), {**parts, "attention": round(rel, 4)}))
    res.sort(key=lambda x: (-x[1], x[0].doc_order, x[0].start))
    return res


def _ground(answers: list[Answer], sents: dict[int, list[str]], questions: list[str], candidates: list,
            state: dict) -> list[Answer]:
    """Each answer sentence's evidence from the attention pass; an answer without it is dropped with a line."""
    att = state["att"]
    pt: PatientText | None = state["pt"]
    out = []
    for qi, a in enumerate(answers):
        if a.error is not None:
            out.append(a)
            continue
        if att is None or pt is None or ("ans", qi, 0) not in att[1]:
            out.append(Answer(question=a.question, text="", error="the answer's attention could not be read: not shown"))
            continue
        idx, mass = att
        rows = []
        for j, s in enumerate(sents[qi]):
            m = mass.get(("ans", qi, j))
            if m is None:
                continue
            rows.append(AnswerSentence(text=s, evidence=_top_attended(m, idx, candidates)))
        out.append(Answer(question=a.question, text=a.text, sentences=rows))
    return out

