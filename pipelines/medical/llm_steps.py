"""The medical pipeline's LLM steps (issue 16), each inside `LLMRun.step`:

- `medical.attention_evidence`: the patient's documents in one long context (`patient_text`, a
  `Document.join`: every document one after the other under a one-line header, offsets mapped back to each document's own
  `SourceSpan`), followed by every conclusion and question of the run; ONE attention pass
  (`LLM.attribute`) reads, for each of them, the attention mass its tokens put on each candidate
  sentence of the record (`per_token` rows of that probe), so the whole patient is computed once for
  all the conclusions and questions. A question is probed by its own words: with the default model
  its words' attention found the known sentence more often than its generated answer's (BENCHMARKS.md,
  "LLM step: medical.attention_evidence", top-1 0.61 against 0.26 on 23 questions). The relative attention
  (mass / the best candidate's) is fused with the retrieval score (BM25 + embedder + concepts,
  `evidence.EvidenceIndex.scored`): `(1 - WEIGHT) * retrieval + WEIGHT * attention`, then the same
  evidence cut-off and top 5 as without the step. Candidates the retrieval did not score stay out
  (attention re-orders and can drop, never adds), negated mentions stay contradicting.
- `medical.answer`: a short answer to each question, generated over the same patient text with
  `ask_document` (strategy "auto": the patient's KV computed once and shared by reference by all
  the questions; a later question of the session takes it from the prefix cache); each answer sentence
  links to the record sentences its tokens attend to most (the same attention pass, the answer's
  sentence rows). An answer whose attention could not be read is dropped with a one-line error
  (no ungrounded sentence is shown), and so is an empty or list-numbers-only one ("1. 1. 1."). On a
  CPU a patient over ANSWER_WHOLE_MAX_TOKENS_CPU tokens is not computed a second time for the
  answers: they read the questions' retrieval sentences instead (`LLMContext.answer_note` says so),
  their evidence still comes from the whole-context attention pass.

A patient longer than the model's context (or the KV cache) goes through the retrieval fallback:
the sentences the evidence ranking found for the conclusions and questions (round-robin over them,
best first) are kept in record order, as many as fit; `LLMContext` says so and how much was kept.

Known limits: `LLM.attribute` has no progress hook, so while its prefill runs the progress callback
gets an estimate (elapsed time against the estimated time, at most 95 %) once a second
(`StepContext.attribute`); cancellation is checked before and after it. A later probe in the pass also sees
the earlier probes (one sequence); the record itself comes first for all of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pipelines.documents import Document, Joined
from pipelines.llm import (
    LLMRun,
    Measurement,
    StepDecision,
    ask_document,
    register,
    sentence_spans,
)
from pipelines.medical.models import Answer, AnswerSentence, EvidenceItem, LLMContext

_LIST_MARK = re.compile(r"^\d{1,2}[.)、]?$")  # "1." "2)" "1": a list number on its own

STEP_EVIDENCE = "medical.attention_evidence"
STEP_ANSWER = "medical.answer"
WEIGHT = 0.3  # the attention's weight in the fused score (the value the earlier engine re-rank used; not tuned)
FALLBACK_POOL = 12  # sentences per conclusion/question offered to the retrieval fallback
ANSWER_MAX_TOKENS = 32
ANSWER_EVIDENCE = 3  # record sentences linked to each answer sentence
ANSWER_WHOLE_MAX_TOKENS_CPU = 3072  # longer patients: answers read the questions' retrieval sentences on a CPU
ANSWER_POOL = 8  # retrieval sentences per question for that reduced answer context

INSTRUCTIONS = "The medical record of one patient, document by document.\n\n"
PROBES_HEAD = "\n\nConclusions and questions about this patient, each grounded in the record above:\n"
ANSWER_INSTRUCTIONS = "The medical record of one patient, document by document.\n\n"
ANSWER_QUESTION = "\n\nQuestion about this patient: {question}\nAnswer:"
ANSWER_STOP = ("\n", " 2. ", "Question")  # one line; no second list item, no new question

# Registered with the measurements of BENCHMARKS.md ("LLM step: medical.attention_evidence",
# "LLM step: medical.answer"), where the commands are.
register(StepDecision(
    STEP_EVIDENCE, "default", in_auto=True,
    measurement=Measurement("Synthea evidence-in-top-3 (41 chains)", without=0.976, with_step=1.0,
                            command="OMP_NUM_THREADS=1 python -m benchmarks.eval.medical_llm --part synthea --llm on "
                                    "(and --llm off)", date="2026-12-03"),
    note="a small gain: one chain of 41, and on the attribution set evidence-in-top-3 0.826 -> 0.870 (one question "
         "of 23), top-1 unchanged (0.696); costs one pass over the patient (5-18 s for a Synthea patient, 71 s for "
         "20 documents / 7.5K tokens on the 2-core CPU) plus the model load"))
register(StepDecision(
    STEP_ANSWER, "default", in_auto=False, measurement=None,
    note="no answer-quality truth to measure a gain against (the first answer sentence's top evidence is the known "
         "sentence for 9 of 23 questions); runs with --llm on"))


# ------------------------------------------------------------------------------------------ the patient
def patient_text(parts: Sequence[tuple[Document, str, Sequence[tuple[int, int]] | None]]) -> Joined:
    """One patient's documents (or kept sentences of them) as one document (`Document.join`): each
    document under its header line, each kept range on a line of its own, a blank line after each
    document. parts: (document, header line, ranges of it to include, None: its whole text)."""
    pieces: list = []
    for doc, head, ranges in parts:
        pieces.append(head + "\n")
        for a, b in ranges if ranges is not None else [(0, len(doc.text))]:
            pieces += [(doc, a, b), "\n"]
        pieces.append("\n")
    return Document.join(pieces, doc_id="patient")


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


def _attention_pass(st, prompt_prefix: str, pt: Joined, spans: list[tuple[int, int]], probes: list[_Probe],
                    estimated_s: float) -> dict:
    """One attribution (`StepContext.attribute`, its progress an estimate while it runs) over prefix +
    patient text + probes: key -> mass per span (mean over that probe's tokens)."""
    ids: list[int] = []
    rows: dict[object, tuple[int, int]] = {}
    for p in probes:
        t = st.llm.encode(p.text, add_special_tokens=False)
        if p.key is not None and t:
            rows[p.key] = (len(ids), len(ids) + len(t))
        ids.extend(t)
    shift = len(prompt_prefix)
    out = st.attribute(prompt_prefix + pt.text, ids, [(a + shift, b + shift) for a, b in spans], estimated_s=estimated_s)
    per_token = out.per_token  # [probe tokens, spans]
    return {k: per_token[a:b].mean(0).tolist() for k, (a, b) in rows.items()}


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
                   overhead: int) -> tuple[Joined, int]:
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
    return patient_text(parts), len(kept)


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

    def context(l_engine) -> Joined:
        """The patient text for this engine (whole, or the retrieval fallback), built once."""
        if state["pt"] is None:
            whole = patient_text([(d, _header(d, kind, day), None) for d, kind, day in docs])
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

    def spans_in(pt: Joined) -> tuple[list[int], list[tuple[int, int]]]:
        idx, spans = [], []
        for i, c in enumerate(candidates):
            r = pt.to_joined(c.doc_id, c.start, c.end)
            if r is not None:
                idx.append(i)
                spans.append(r)
        return idx, spans

    def attention(st, answers: dict[int, list[str]] | None, est_s: float) -> None:
        """The one attention pass: every plan's claim (a question's own words) and every answer sentence."""
        pt = context(st.llm)
        idx, spans = spans_in(pt)
        probes = [_Probe(None, PROBES_HEAD)]
        answered = set()
        for k, p in enumerate(plans):
            probes.append(_Probe(None, "- Question: " if p.kind == "question" else "- Conclusion: "))
            probes.append(_Probe(("plan", k), p.claim))
            qi = questions.index(p.claim) if p.kind == "question" and p.claim in questions else None
            if answers is not None and qi is not None and answers.get(qi) and qi not in answered:
                answered.add(qi)
                probes.append(_Probe(None, "\n  Answer:"))
                for j, sent in enumerate(answers[qi]):
                    probes.append(_Probe(("ans", qi, j), " " + sent))
            probes.append(_Probe(None, "\n"))
        for qi, sents in (answers or {}).items():  # answers to questions without a ranking (none today)
            if qi in answered:
                continue
            probes.append(_Probe(None, f"- Question: {questions[qi]}\n  Answer:"))
            for j, sent in enumerate(sents):
                probes.append(_Probe(("ans", qi, j), " " + sent))
            probes.append(_Probe(None, "\n"))
        if llm.cancel is not None and llm.cancel.is_set():
            st.record.reason = "cancelled before the attention pass"
            return
        state["att"] = (idx, _attention_pass(st, INSTRUCTIONS, pt, spans, probes, est_s))

    answers_out: list[Answer] | None = None
    answer_sents: dict[int, list[str]] = {}
    if questions:
        # the patient's KV once for all the questions, the answers decoded together, and (when the evidence
        # step does not run) the attention pass over the patient again
        est = llm.estimate_s(n_chars_tokens * (1 if want_ev else 2), ANSWER_MAX_TOKENS)
        with llm.step(STEP_ANSWER, estimated_s=est) as st:
            if st:
                pt = context(st.llm)
                pt = _answer_context(st.llm, llm.device, pt, state, docs, plans, scored, questions)
                res = ask_document(st.llm, pt.doc, questions, instructions=ANSWER_INSTRUCTIONS,
                                   question_template=ANSWER_QUESTION, max_tokens=ANSWER_MAX_TOKENS, stop=ANSWER_STOP,
                                   strategy="auto", on_progress=st.progress, cancel=llm.cancel)
                st.add(res)
                answers_out = []
                for qi, it in enumerate(res.items):
                    text = " ".join(it.text.split())
                    if not _usable(text):
                        text = ""
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


def _answer_context(l_engine, device: str, pt: Joined, state: dict, docs: list, plans: list[Plan], scored: list,
                    questions: list[str]) -> Joined:
    """What the answers are generated over: the patient context, or on a CPU, when the patient is
    longer than ANSWER_WHOLE_MAX_TOKENS_CPU, the questions' retrieval sentences (ANSWER_POOL best of
    each question, in record order): computing 7.5K tokens of patient a second time took 152 s on the
    2-core CPU (BENCHMARKS.md). The answers are still attributed over the whole context."""
    ctx: LLMContext = state["ctx"]
    if device == "cuda" or ctx.tokens <= ANSWER_WHOLE_MAX_TOKENS_CPU:
        return pt
    keep: dict[str, set[tuple[int, int]]] = {}
    for p, (sup, con, _) in zip(plans, scored, strict=True):
        if p.kind != "question" or p.claim not in questions:
            continue
        for c, *_ in sorted(sup + con, key=lambda x: -x[1])[:ANSWER_POOL]:
            if pt.to_joined(c.doc_id, c.start, c.end) is not None:
                keep.setdefault(c.doc_id, set()).add((c.start, c.end))
    if not keep:
        return pt
    small = patient_text([(d, _header(d, kind, day), sorted(keep[d.doc_id])) for d, kind, day in docs if d.doc_id in keep])
    n = len(l_engine.encode(small.text, add_special_tokens=False))
    state["ctx"] = ctx.model_copy(update={"answer_note": (
        f"the answers read the questions' retrieval sentences ({sum(len(v) for v in keep.values())} sentences, "
        f"{n:,} tokens), not the whole {ctx.tokens:,}-token context: on a CPU a context over "
        f"{ANSWER_WHOLE_MAX_TOKENS_CPU:,} tokens is not computed a second time for them; their evidence is "
        f"still read from the whole context")})
    return small


def _usable(text: str) -> bool:
    """An answer with a letter or digit beyond list numbers ("1. 1. 1." and punctuation are not)."""
    return any(ch.isalnum() for w in text.split() if not _LIST_MARK.match(w) for ch in w)


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
    pt: Joined | None = state["pt"]
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

