"""Optional evidence re-ranking with the engine's attention attribution (off by default).

For each claim, the candidate sentences the retrieval step found (supporting and contradicting)
are laid out as one prompt, one line each with its document id; the claim is the "answer"; the
engine's `LLM.attribute(prompt, answer, spans)` returns the attention mass the claim's tokens put
on each sentence. The final score mixes the retrieval score with the sentence's attention share
(relative to the best sentence): `(1 - weight) * score + weight * share / max_share`. Only the
candidates are put in the context (not the whole record): prefill on the CPU is slow (BENCHMARKS.md,
"Engine (CPU)": about 4.5 s for 2K tokens on 2 cores), and the retrieval step already chose them.

The pipeline runs fully without this step; when the engine cannot be imported or loaded, the
pipeline records a warning and keeps the retrieval ranking. The engine is the process's shared
handle from the LLM layer (`pipelines.llm.get_engine`, settings from LONGDOC_MODEL / _DEVICE /
_DTYPE / _MAX_MODEL_LEN); the step is `STEP` in the layer's registry, where it stays out of
`--llm auto` until a gain over the retrieval ranking is measured.
"""

from __future__ import annotations

from pipelines.medical.models import Evidence, EvidenceItem

STEP = "medical.engine_rerank"


def default_llm():
    """The process's engine from the LLM layer (loaded once, shared with every other step)."""
    from pipelines.llm import get_engine

    return get_engine()


def build_prompt(items: list[EvidenceItem]) -> tuple[str, list[tuple[int, int]]]:
    """The prompt text and the character span of each candidate sentence in it."""
    parts = ["Excerpts from one patient's medical record:\n"]
    spans: list[tuple[int, int]] = []
    pos = len(parts[0])
    for it in items:
        head = f"[{it.doc_id}] "
        text = " ".join(it.span.text.split())
        spans.append((pos + len(head), pos + len(head) + len(text)))
        line = head + text + "\n"
        parts.append(line)
        pos += len(line)
    parts.append("Conclusion supported by the record:")
    return "".join(parts), spans


def rerank_one(ev: Evidence, llm, weight: float = 0.3) -> Evidence:
    items = list(ev.supporting) + list(ev.contradicting)
    if not items:
        return ev
    prompt, spans = build_prompt(items)
    out = llm.attribute(prompt, " " + ev.claim, spans)
    shares = [s.share for s in out.spans]
    top = max(shares) or 1.0

    def mix(it: EvidenceItem, share: float) -> EvidenceItem:
        rel = share / top
        scores = dict(it.scores)
        scores["engine_share"] = round(share, 4)
        return it.model_copy(update={"score": round((1 - weight) * it.score + weight * rel, 4), "scores": scores})

    n_sup = len(ev.supporting)
    sup = [mix(it, shares[i]) for i, it in enumerate(ev.supporting)]
    con = [mix(it, shares[n_sup + i]) for i, it in enumerate(ev.contradicting)]
    key = lambda it: (-it.score, it.doc_id, it.span.char_start)  # noqa: E731
    return ev.model_copy(update={"supporting": sorted(sup, key=key), "contradicting": sorted(con, key=key),
                                 "method": ev.method + "+engine_attention"})


def rerank(evidence: list[Evidence], docs: dict | None = None, llm=None, weight: float = 0.3) -> list[Evidence]:
    """Re-rank every evidence list with the engine's attention attribution."""
    from pipelines.llm import engine_lock

    llm = llm if llm is not None else default_llm()
    with engine_lock(llm):
        return [rerank_one(ev, llm, weight) for ev in evidence]
