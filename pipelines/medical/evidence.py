"""Evidence ranking without the engine: for a claim or question, score every sentence of the
patient's documents by lexical BM25 (English word stems; Chinese character unigrams + bigrams),
sentence embeddings (all-MiniLM-L6-v2, English only), and
concept overlap with the entities the pipeline found in the sentence. A sentence whose matching
mention is negated ("no fever", "否认发热") goes to `contradicting`; a bare re-mention of past
history ("history of X") weighs less than a primary observation. Sentences below the evidence
cut-off (`MIN_SCORE`, `MIN_SHARE_OF_TOP` of the best) are not listed.

BM25 and the embedding model are the shared ones of `pipelines.text.retrieval` (BM25 with k1 = 1.4;
sentences embedded at most 128 word pieces long); if the model cannot be loaded the ranking falls
back to lexical + concept scores and says so in `method`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipelines.documents import Span
from pipelines.text.retrieval import BM25, minilm_encode, minilm_model
from pipelines.text.script import HAN_RUN_RE, has_cjk

_EN_STOP = set("""a an the of and or to in on at for with by from is was were are be been being this that these those it its
as patient patients pt what why how when which who whom did does do has have had there their his her he she they
not no any some all into over under after before during than then also about""".split())
_WORD = re.compile(r"[a-z0-9]+(?:[-/][a-z0-9]+)*")


def tokens(text: str) -> list[str]:
    """BM25 tokens: lower-case English words (light stemming) and Chinese unigrams + bigrams."""
    out: list[str] = []
    low = text.lower()
    for w in _WORD.findall(low):
        if w in _EN_STOP or len(w) < 2 and not w.isdigit():
            continue
        for suf in ("ies", "es", "s", "ing", "ed"):
            if len(w) > len(suf) + 3 and w.endswith(suf):
                w = w[: -len(suf)] + ("y" if suf == "ies" else "")
                break
        out.append(w)
    for run in HAN_RUN_RE.findall(text):
        out.extend(run)
        out.extend(run[i:i + 2] for i in range(len(run) - 1))
    return out


# a sentence is listed as evidence only when its score reaches both floors: an absolute one (below it a
# sentence shares at most a word or a weak related concept with the claim) and a share of the best
# sentence's score (the tail of a ranking led by a direct statement)
MIN_SCORE = 0.12
MIN_SHARE_OF_TOP = 0.3


def cut(ranked: list) -> list:
    """The ranked (candidate, score, parts) items above the evidence cut-off."""
    if not ranked:
        return ranked
    floor = max(MIN_SCORE, MIN_SHARE_OF_TOP * ranked[0][1])
    return [x for x in ranked if x[1] >= floor]


BM25_K1 = 1.4
MAX_SEQ_LENGTH = 128  # word pieces embedded per sentence: clinical sentences are short; longer ones are cut
_CACHE: dict[str, object] = {}
_CACHE_MAX = 50_000
ENCODE_THREADS = 1  # on a shared 2-core CPU one torch thread encodes ~4x faster than two (measured)


def encode(texts: list[str]):
    """Unit-normalised embeddings of `texts` (numpy, one row each); identical sentences (template
    lines repeated across notes) are encoded once per process."""
    import numpy as np
    import torch

    todo = sorted({t for t in texts if t not in _CACHE})
    if todo:
        before = torch.get_num_threads()
        torch.set_num_threads(max(1, min(before, ENCODE_THREADS)))
        try:
            vecs = minilm_encode(todo, batch_size=64, max_seq_length=MAX_SEQ_LENGTH)
        finally:
            torch.set_num_threads(before)
        if len(_CACHE) + len(todo) > _CACHE_MAX:
            _CACHE.clear()
        _CACHE.update(zip(todo, vecs, strict=True))
    return np.stack([_CACHE[t] for t in texts])


@dataclass(frozen=True, slots=True, eq=False, kw_only=True)
class Candidate(Span):
    """A sentence of one of the patient's documents that may be evidence: a `Span` of its text."""

    section: str | None
    doc_order: int
    mentions: list  # (entity id, concept, assertion, type)

    @property
    def doc_id(self) -> str:
        return self.doc.doc_id


class EvidenceIndex:
    """The sentences of one patient, indexed once, queried per claim."""

    def __init__(self, candidates: list[Candidate], use_embeddings: bool = True):
        self.cands = candidates
        self.bm25 = BM25([tokens(c.text) for c in candidates], k1=BM25_K1)
        self.emb = None
        self.use_embeddings = use_embeddings
        self._en_idx = [i for i, c in enumerate(candidates) if not has_cjk(c.text)]

    def _embeddings(self):
        if self.emb is None and self.use_embeddings and self._en_idx:
            if minilm_model() is not None:
                self.emb = encode([self.cands[i].text for i in self._en_idx])
        return self.emb

    def rank(self, claim: str, claim_concepts: dict[str, float], exclude: set[tuple[str, int, int]] | None = None,
             top_k: int = 5, after: str | None = None) -> tuple[list[tuple[Candidate, float, dict]], list[tuple[Candidate, float, dict]], str]:
        """(supporting, contradicting, method): candidates with final score and score parts.
        `claim_concepts` maps a concept to its weight (1 for the claim's own concepts, less for
        related findings); only a negated mention of the claim's own concept contradicts. `after`
        (ISO date): mentions whose time ended on or before it do not count as concept matches."""
        sup, con, method = self.scored(claim, claim_concepts, exclude, after)
        return cut(sup)[:top_k], cut(con)[:top_k], method

    def scored(self, claim: str, claim_concepts: dict[str, float], exclude: set[tuple[str, int, int]] | None = None,
               after: str | None = None) -> tuple[list[tuple[Candidate, float, dict]], list[tuple[Candidate, float, dict]], str]:
        """`rank` before the evidence cut-off and top_k: every candidate scoring above 0.05, best first
        (the LLM step `medical.attention_evidence` fuses its attention into these, then cuts)."""
        exclude = exclude or set()
        lex = self.bm25.scores(tokens(claim))
        mx = max(lex) if lex and max(lex) > 0 else 1.0
        sem = [0.0] * len(self.cands)
        method = "bm25+concepts"
        if not has_cjk(claim) and self._embeddings() is not None:
            q = encode([claim])[0]
            sims = self.emb @ q
            for j, i in enumerate(self._en_idx):
                sem[i] = max(0.0, float(sims[j]))
            method = "bm25+embeddings+concepts"
        sup, con = [], []
        for i, c in enumerate(self.cands):
            if (c.doc_id, c.start, c.end) in exclude:
                continue
            matched = [m for m in c.mentions if m[1] in claim_concepts]
            if after is not None:
                # "postoperative X": a finding that ended before the operation day does not support it
                matched = [m for m in matched if not (m[4] and m[4] <= after)]
            concept = 0.0
            negated = False
            if matched:
                def val(m) -> float:
                    w = claim_concepts[m[1]]
                    return w * {"present": 1.0, "possible": 0.8}.get(m[2], 0.5)

                primary = [m for m in matched if m[2] in ("present", "possible")]
                neg = [m for m in matched if m[2] == "negated" and claim_concepts[m[1]] >= 1.0]
                if primary:
                    concept = max(val(m) for m in primary) + 0.1 * (len({m[0] for m in primary}) - 1)
                    concept = min(concept, 1.2)
                elif neg:
                    concept, negated = 1.0, True
                elif any(m[2] != "negated" for m in matched):
                    concept = max(val(m) for m in matched if m[2] != "negated")  # past / family / hypothetical
            lexn = lex[i] / mx
            w_sem = 0.25 if method.startswith("bm25+emb") else 0.0
            score = 0.3 * lexn + w_sem * sem[i] + 0.45 * concept
            if score <= 0.05:
                continue
            parts = {"lexical": round(lexn, 4), "embedding": round(sem[i], 4), "concept": round(concept, 4)}
            (con if negated else sup).append((c, round(score, 4), parts))
        key = lambda x: (-x[1], x[0].doc_order, x[0].start)  # noqa: E731 - earliest document first on ties
        sup.sort(key=key)
        con.sort(key=key)
        return sup, con, method
