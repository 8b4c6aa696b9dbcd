"""Evidence-first answers: the passage that holds the answer, found by retrieval and by the model,
quoted exactly; the value asked for as a span inside it; the model's own words only where the
quote carries them; "not stated in the document" when no passage is good enough.

For one question over one `Document` (a joined document for several), every candidate passage
(`candidate_spans`: the document's sentences and lines) gets features, each scaled within the
question so that documents of any length compare:

- `bm25`: BM25 of the passage for the question (pipelines.text.retrieval), over the best passage's;
- `cover`: the idf-weighted share of the question's content terms that the passage holds;
- `emb`: all-MiniLM-L6-v2 cosine of question and passage, minus the best passage's (English only:
  the model reads Chinese as unknown tokens, so a Chinese question gets 0 for every passage);
- `qatt`: the question's attention on the passage (the engine's attribution pass with the question
  as the attributed text, after the document), over the best passage's;
- `aatt`: the model's answer's attention on the passage, likewise (the answer the model generated
  greedily after "Question: ... Answer:");
- `aover`: the share of the answer's content terms (words, numbers, CJK bigrams) in the passage;
- `kind`: 1 when the passage holds a value of the kind the question asks for
  (`pipelines.text.values`), 0 when it holds none, 0.5 for a question that asks for text;
- `short`: 1 for a passage under 25 characters (a heading, a lone table cell).

The fused score is a logistic model of those features (`FUSION`: weights fitted on the
development QA set by `benchmarks/bench_answers.py --fit`; the numbers and the command are in
BENCHMARKS.md); its probability on the best passage is the answer's confidence. Below
`FUSION.threshold` the answer is "not stated in the document" and the best passages are listed as
near misses. Otherwise the answer is the best passage (and up to two more whose probability clears
the threshold), the value of the asked kind inside it that the model's answer names or that sits
nearest the question's terms, and the model's wording when `support` finds it carried by the
quotes: every number of it in them and at least `SUPPORT_MIN` of its other content terms.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from pipelines.documents import Document
from pipelines.llm.spans import sentence_spans
from pipelines.text.retrieval import BM25, bm25_terms
from pipelines.text.script import cjk_share
from pipelines.text.values import question_kind, value_spans

FEATURES = ("bm25", "cover", "emb", "qatt", "aatt", "aover", "kind", "short")
NOT_STATED = "not stated in the document"
SUPPORT_MIN = 0.8  # share of the model answer's non-numeric content terms that the quotes must hold
MAX_PASSAGES = 3


@dataclass(frozen=True)
class Fusion:
    """A logistic model over `FEATURES`: p = sigmoid(bias + sum(w * x)); `threshold`: the least
    confidence shown as an answer. `source`: where the numbers come from."""

    weights: dict[str, float]
    bias: float
    threshold: float
    source: str

    def score(self, feats: dict[str, float]) -> float:
        return self.bias + sum(self.weights.get(k, 0.0) * feats.get(k, 0.0) for k in FEATURES)


# Fitted by `python -m benchmarks.bench_answers --fit` on the development split of the QA set
# (benchmarks/eval/qa); BENCHMARKS.md, "Evidence-first answers", has the run and both splits' scores.
FUSION = Fusion(
    weights={"bm25": 2.0, "cover": 2.0, "emb": 2.0, "qatt": 1.0, "aatt": 2.0, "aover": 1.0, "kind": 1.0,
             "short": -1.0},
    bias=-5.0,
    threshold=0.3,
    source="hand-set starting point (not yet fitted)",
)


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -60 else 0.0


# ----------------------------------------------------------------------------- candidate passages
_WORDY = re.compile(r"[\w\u3400-\u9fff]")


def candidate_spans(doc: Document) -> list[tuple[int, int]]:
    """The passages an answer may quote: `doc`'s sentences and lines that hold a letter or digit."""
    return [(s, e) for s, e in sentence_spans(doc) if _WORDY.search(doc.text, s, e)]


# --------------------------------------------------------------------------------------- terms
_STOP = frozenset("""a an the of to in on at by for with from and or not no is are was were be been being do does did
has have had what which who whom whose when where why how this that these those it its as any all each there
their they them he she his her we our you your i me my can could would should shall will may might must than then
into onto upon about under over between after before during within without per via if so such only also other
patient document agreement claim claims section figure table report according said wherein""".split())
_QWORDS = frozenset(["什么", "何时", "哪些", "哪个", "哪一", "多少", "怎么", "如何", "是否", "为什", "么时", "时候",
                     "本解", "解释", "患者", "权利", "利要", "要求"])
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def content_terms(text: str) -> list[str]:
    """`bm25_terms` without stop words and question words: what a question or an answer is about."""
    return [t for t in bm25_terms(text) if t not in _STOP and t not in _QWORDS and (len(t) > 1 or t.isdigit())]


def _stem(t: str) -> str:
    return t[:5] if t.isascii() and t.isalpha() else t


# ------------------------------------------------------------------------------------ features
@dataclass
class Passage:
    """A candidate passage [start, end) of the document, its features, fused score and probability."""

    start: int
    end: int
    feats: dict[str, float] = field(default_factory=dict)
    score: float = 0.0
    prob: float = 0.0


def _scaled(values: Sequence[float]) -> list[float]:
    top = max(values, default=0.0)
    return [v / top if top > 0 else 0.0 for v in values]


@lru_cache(maxsize=8)
def _passage_embeddings(text: str, spans: tuple[tuple[int, int], ...]):
    from pipelines.text.retrieval import minilm_encode

    return minilm_encode([text[s:e][:1000] for s, e in spans], batch_size=64, max_seq_length=128)


def _embedding_sims(question: str, doc: Document, spans: list[tuple[int, int]]) -> list[float]:
    """MiniLM cosine of the question with every passage minus the best one's (0 for all when the
    question is Chinese or the model is missing)."""
    from pipelines.text.retrieval import minilm_encode, minilm_model

    if cjk_share(question) > 0.2 or not spans or minilm_model() is None:
        return [0.0] * len(spans)
    rows = _passage_embeddings(doc.text, tuple(spans))
    q = minilm_encode([question], max_seq_length=128)[0]
    sims = [float(x) for x in rows @ q]
    top = max(sims)
    return [s - top for s in sims]


def passage_features(question: str, doc: Document, spans: list[tuple[int, int]],
                     question_shares: Sequence[float] | None = None, answer_shares: Sequence[float] | None = None,
                     model_text: str = "", embed: bool = True) -> list[Passage]:
    """Every candidate span of `doc` with its features (see the module docstring); shares: the
    question's and the model answer's attention on each span (None: not measured, 0)."""
    texts = [doc.text[s:e] for s, e in spans]
    index = BM25([bm25_terms(t) for t in texts])
    q_terms = content_terms(question) or bm25_terms(question)
    bm = _scaled(index.scores(q_terms))
    weights = {t: index.idf.get(t, 0.0) for t in set(q_terms)}
    total_w = sum(weights.values())
    emb = _embedding_sims(question, doc, spans) if embed else [0.0] * len(spans)
    qa = _scaled(question_shares) if question_shares is not None else [0.0] * len(spans)
    aa = _scaled(answer_shares) if answer_shares is not None else [0.0] * len(spans)
    a_terms = {_stem(t) for t in content_terms(model_text)}
    kind = question_kind(question)
    out = []
    for i, (s, e) in enumerate(spans):
        present = index.docs[i]
        cover = sum(w for t, w in weights.items() if t in present) / total_w if total_w > 0 else 0.0
        p_stems = {_stem(t) for t in present}
        aover = len(a_terms & p_stems) / len(a_terms) if a_terms else 0.0
        if kind == "text":
            k = 0.5
        else:
            k = 1.0 if value_spans(texts[i], kind) else 0.0
        out.append(Passage(s, e, {"bm25": bm[i], "cover": cover, "emb": emb[i], "qatt": qa[i], "aatt": aa[i],
                                  "aover": aover, "kind": k, "short": float(len(texts[i].strip()) < 25)}))
    return out


def rank(passages: list[Passage], fusion: Fusion = FUSION) -> list[Passage]:
    """The passages scored by `fusion`, best first (ties: earlier in the document first)."""
    for p in passages:
        p.score = fusion.score(p.feats)
        p.prob = sigmoid(p.score)
    return sorted(passages, key=lambda p: (-p.score, p.start))


# ------------------------------------------------------------------------- the model's wording
@dataclass(frozen=True)
class Support:
    """Whether the model's words are carried by the quotes: `numbers_missing` (every number must
    be quoted), `coverage` (share of its other content terms found in the quotes)."""

    supported: bool
    coverage: float
    numbers_missing: tuple[str, ...] = ()
    terms_missing: tuple[str, ...] = ()


def _nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def support(model_text: str, quotes: Sequence[str]) -> Support:
    """Check the model's answer against the quoted passages (see the module docstring). An empty
    answer, or one with no content terms (a bare "yes", a copy of the question's form), is not
    supported: it says nothing the quote could carry."""
    text = _nfkc(model_text).strip()
    if not text:
        return Support(False, 0.0)
    joined = _nfkc(" ".join(quotes))
    quoted_numbers = {n.replace(",", "") for n in _NUMBER.findall(joined)}
    numbers = [n.replace(",", "") for n in _NUMBER.findall(text)]
    missing_n = tuple(n for n in numbers if n not in quoted_numbers)
    terms = [t for t in content_terms(text) if not t.isdigit()]
    have = {_stem(t) for t in bm25_terms(joined)}
    missing_t = tuple(t for t in terms if _stem(t) not in have)
    if not terms and not numbers:
        return Support(False, 0.0)
    coverage = 1.0 - len(missing_t) / len(terms) if terms else 1.0
    return Support(not missing_n and coverage >= SUPPORT_MIN, coverage, missing_n, missing_t)


# ------------------------------------------------------------------------------------ the value
def pick_value(question: str, passage: str, model_text: str = "") -> tuple[int, int] | None:
    """The value of the question's kind inside `passage` (offsets in it): the one the model's answer
    names, else the one nearest the question's terms in the passage; None for a "text" question or
    a passage without such a value."""
    kind = question_kind(question)
    found = value_spans(passage, kind)
    if not found:
        return None
    answer = _nfkc(model_text)
    named = [(s, e) for s, e in found if _nfkc(passage[s:e]).strip() and _nfkc(passage[s:e]) in answer]
    if named:
        return max(named, key=lambda se: se[1] - se[0])
    low = _nfkc(passage)
    anchors = [m.start() for t in content_terms(question) for m in re.finditer(re.escape(t), low)]
    if not anchors:
        return found[0]
    return min(found, key=lambda se: (min(abs(se[0] - a) for a in anchors), se[0]))


# ----------------------------------------------------------------------------------- the answer
@dataclass
class Found:
    """The evidence-first answer to one question over one document (offsets in that document).
    status "answered": `passages` quoted, best first, `value` inside the first one (or None),
    `text` what is shown (the value, the model's supported wording, or the first quote);
    "not_stated": `near` holds the best passages that did not clear the threshold, `text` says so.
    `support`: the check of the model's wording against the quotes (None without model text)."""

    question: str
    kind: str
    status: str
    confidence: float
    text: str
    passages: list[Passage] = field(default_factory=list)
    near: list[Passage] = field(default_factory=list)
    value: tuple[int, int] | None = None
    model_text: str = ""
    support: Support | None = None


def decide(question: str, doc: Document, ranked: list[Passage], model_text: str = "",
           fusion: Fusion = FUSION) -> Found:
    """The answer from passages ranked by `rank` (see the module docstring)."""
    kind = question_kind(question)
    model_text = model_text.strip()
    if not ranked or ranked[0].prob < fusion.threshold:
        conf = ranked[0].prob if ranked else 0.0
        sup = support(model_text, [doc.text[p.start:p.end] for p in ranked[:1]]) if model_text and ranked else None
        return Found(question, kind, "not_stated", round(1.0 - conf, 4), NOT_STATED, near=ranked[:MAX_PASSAGES],
                     model_text=model_text, support=sup)
    top = ranked[0]
    chosen = [top] + [p for p in ranked[1:MAX_PASSAGES] if p.prob >= max(fusion.threshold, 0.5 * top.prob)]
    quotes = [doc.text[p.start:p.end] for p in chosen]
    sup = support(model_text, quotes) if model_text else None
    value = None
    if kind != "text":
        for p, quote in zip(chosen, quotes, strict=True):
            v = pick_value(question, quote, model_text if sup is not None and sup.supported else "")
            if v is not None:
                value = (p.start + v[0], p.start + v[1])
                break
    if value is not None:
        text = doc.text[value[0]:value[1]]
    elif sup is not None and sup.supported:
        text = model_text
    else:
        text = quotes[0]
    return Found(question, kind, "answered", round(top.prob, 4), text, passages=chosen, value=value,
                 model_text=model_text, support=sup)


QUESTION_HEAD = "\n\nQuestion:"  # the question's attention is read after the document and this


def gather(llm, jobs: Sequence[tuple[Document, str, Sequence[str], Sequence[str], Sequence[str], Sequence[bool]]],
           fusion: Fusion = FUSION, embed: bool = True) -> list[list[Found]]:
    """Evidence-first answers for several documents' questions at once. Each job: (doc,
    instructions, questions, suffixes (each question's prompt after the document), model texts,
    readable (whether the document's attention can be read for that question: False for one that
    went through a fallback because the document did not fit)). Every attention read of the call
    goes to the engine in one `attention_shares`."""
    from pipelines.llm.settings import engine_lock
    from pipelines.llm.spans import attention_shares

    spans_of = [candidate_spans(doc) for doc, *_ in jobs]
    items, where = [], []
    for j, ((doc, instr, questions, suffixes, texts, readable), spans) in enumerate(zip(jobs, spans_of, strict=True)):
        for i, (q, suf, txt, ok) in enumerate(zip(questions, suffixes, texts, readable, strict=True)):
            if not ok or not spans:
                continue
            where.append((j, i, "q"))
            items.append((doc, instr, QUESTION_HEAD, " " + q.strip(), spans))
            if txt.strip():
                where.append((j, i, "a"))
                items.append((doc, instr, suf, " " + txt.strip(), spans))
    shares: dict[tuple[int, int, str], list[float]] = {}
    if items:
        with engine_lock(llm):
            got = attention_shares(llm, items)
        for key, g in zip(where, got, strict=True):
            if g is not None:
                shares[key] = [s for s, _ in g]
    out = []
    for j, ((doc, _, questions, _, texts, _), spans) in enumerate(zip(jobs, spans_of, strict=True)):
        answers = []
        for i, (q, txt) in enumerate(zip(questions, texts, strict=True)):
            ps = passage_features(q, doc, spans, shares.get((j, i, "q")), shares.get((j, i, "a")), txt, embed=embed)
            answers.append(decide(q, doc, rank(ps, fusion), txt, fusion))
        out.append(answers)
    return out
