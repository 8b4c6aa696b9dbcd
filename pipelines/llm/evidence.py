"""Evidence-first answers: the passage that holds the answer, found by retrieval and by the model,
quoted exactly; the value asked for as a span inside it; the model's own words only where the
quote carries them; "not stated in the document" when no passage is good enough.

For one question over one `Document` (a joined document for several), every candidate passage
(`candidate_spans`: the document's sentences and lines, headings, wrapped lines and lists kept
whole) gets features, each scaled within the
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
- `short`: 1 for a passage under 25 characters (a heading, a lone table cell);
- `ident`, `phrase`, `ctx`: the question's identifiers ("claim 10", "表 2-3", "CG.B.4") in the
  passage, its adjacent word pairs in the passage, and the BM25 of the passage's neighbours
  (`lexical_extras`);
- `contra`: 1 for a passage that lists allergies, denies, or reports a negative finding or a drug
  stopped, when the question does not ask about those (an allergy line never answers "which
  antibiotic was given?").

A first ranking (`PRE`, over the features above) picks each question's best `RERANK` passages;
the model then reads each of them (`upr`: the question's mean log-probability per token after the
passage, against the best one's; `lift`: the best against no passage; one `LLM.score_many` for the
whole call), and `FUSION` ranks on everything. Both are linear scores whose sigmoid reads as the
probability that a passage holds the answer, fitted on the development split of the QA set
(benchmarks/eval/qa) by `python -m benchmarks.bench_answers fit` (`PRE` pointwise with `--pre`,
`FUSION` listwise: the softmax over each question's passages, then Platt scaling); the numbers and
the commands are in BENCHMARKS.md, "Evidence-first answers".

The answer (`decide`) is the best passage and up to two more whose probability clears
`FUSION.threshold`, the value of the asked kind inside them that the model's answer names or that
sits nearest the question's terms, and the model's wording when `support` finds it carried by the
quotes (every number of it in them and at least `SUPPORT_MIN` of its other content terms); shown:
the value, else the supported wording, else the first quote. `CONFIDENCE`, a second logistic
model fitted on the same split over the chosen answer (`answer_features`: the best passage's
probability and margin, whether a value of the asked kind was found, whether the model's words are
carried and overlap the quote, ...), is the answer's confidence; below its threshold the answer is
"not stated in the document" with those passages as near misses.
"""

from __future__ import annotations

import logging
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from pipelines.documents import Document
from pipelines.text.retrieval import BM25, bm25_terms
from pipelines.text.script import cjk_share
from pipelines.text.values import question_kind, value_spans

log = logging.getLogger(__name__)

FEATURES = ("bm25", "cover", "emb", "qatt", "aatt", "aover", "kind", "short", "contra", "ident", "phrase", "ctx",
            "upr", "lift")
PRE_FEATURES = FEATURES[:12]  # what ranks the passages before the model reads the best `RERANK` of them
RERANK = 16
SCORE_BATCH = 8  # passages the model reads per forward: a few at a time keep the pool's cached documents
NOT_STATED = "not stated in the document"
SUPPORT_MIN = 0.8  # share of the model answer's non-numeric content terms that the quotes must hold
MAX_PASSAGES = 3
LOW_CONFIDENCE = 0.5  # an answer below this is shown as one to check against its quote, not as a finding


@dataclass(frozen=True)
class Fusion:
    """A linear score over `FEATURES` whose sigmoid, p = sigmoid(bias + sum(w * x)), reads as the
    probability that a passage holds the answer; `threshold`: the least probability at which a
    second or third passage is quoted beside the best. `source`: where the numbers come from."""

    weights: dict[str, float]
    bias: float
    threshold: float
    source: str

    def score(self, feats: dict[str, float]) -> float:
        return self.bias + sum(self.weights.get(k, 0.0) * feats.get(k, 0.0) for k in FEATURES)


# PRE ranks the passages on the features read before the model's likelihood reading
# (`PRE_FEATURES`); FUSION ranks them on all; CONFIDENCE (below) decides answer or "not stated".
# Fitted by `python -m benchmarks.bench_answers fit` (`--pre` for PRE, `--listwise` for FUSION and
# CONFIDENCE) on the development split of the QA set (benchmarks/eval/qa), with the default model;
# BENCHMARKS.md, "Evidence-first answers", has the runs and both splits' scores.
FUSION = Fusion(
    weights={
        "bm25": 1.521,
        "cover": 0.6854,
        "emb": 1.403,
        "qatt": 0.2732,
        "aatt": 0.7769,
        "aover": 0.625,
        "kind": 1.7845,
        "short": -0.2485,
        "contra": 0.0126,
        "ident": 0.6854,
        "phrase": 0.5405,
        "ctx": 1.7045,
        "upr": 1.4909,
        "lift": -0.0,
    },
    bias=-4.3172,
    threshold=0.5,
    source='fitted on the dev split (101 questions, 24043 passages, l2 1.0, listwise)',
)
PRE = Fusion(
    weights={
        "bm25": 1.7725,
        "cover": 1.2885,
        "emb": 1.0481,
        "qatt": 1.1694,
        "aatt": 0.4202,
        "aover": 0.6218,
        "kind": 1.2621,
        "short": -0.0088,
        "contra": 0.201,
        "ident": 0.8435,
        "phrase": 0.333,
        "ctx": 1.3299,
    },
    bias=-6.0162,
    threshold=0.5,
    source='fitted on the dev split (101 questions, 24043 passages, l2 1.0, features before the likelihood reading)',
)


def low_confidence(answer) -> bool:
    """An evidence-search answer (an `Answer` or a review cell) whose calibrated confidence is under
    `LOW_CONFIDENCE`: every surface shows it as one to check against its quote, never as a finding."""
    return (answer.status == "answered" and getattr(answer, "route", "evidence") == "evidence"
            and answer.confidence is not None and answer.confidence < LOW_CONFIDENCE)


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -60 else 0.0


# ----------------------------------------------------------------------------- candidate passages
_WORDY = re.compile(r"[\w\u3400-\u9fff]")
_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n")
# a period after these does not end a sentence ("U.S. Dollars", "Fig. 2", "et al. (2020)", "Dr. Li")
_ABBREV = re.compile(r"(?:\b(?:[A-Z]\.){1,3}|\b(?:e\.g|i\.e|etc|vs|al|Fig|Figs|No|Nos|Dr|Mr|Mrs|Ms|Inc|Ltd|Co|Corp|St|"
                     r"Sec|Art|Eq|Ref|approx|incl|cf|p|pp|vol|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.)$")
_TERMINAL = re.compile(r"[.!?。！？；;]['\"”’)）]?$")
_LABEL_ONLY = re.compile(r"^(?:\(?\d{1,3}[.)]|(?:Figure|Fig\.|Table|Claim|Section|图|表|附表|权利要求)\s*[\dA-Z][\w.\-\u00ad]*"
                         r"[.:：]?)$", re.IGNORECASE)
MERGE_MAX = 500  # characters a merged passage may reach


def candidate_spans(doc: Document, within: Sequence[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
    """The passages an answer may quote: the document's sentences and lines (a period after an
    abbreviation or an initial does not cut), then, so that a passage reads as a unit, a line is
    joined with the next when it is a heading or label (`_heading`: under 40 characters, no
    sentence end, no bullet, no digits but a leading enumerator; or a bare "21." / "Figure 2." /
    "表 2-3") or when it is wrapped prose (a line of 30 characters or more without a sentence end,
    and the next line starts in lower case, with a digit or a bracket, or both lines are CJK and
    the first is a full line of 25 characters or more) or when it is a list item under a lead-in
    line that ends with a colon; never across a blank line; at most
    `MERGE_MAX` characters. Passages without a letter or digit are dropped. within: ranges of the
    text cut separately (the parts of a joined document), None: the whole text."""
    if within is not None:
        return [se for a, b in within for se in _candidates(doc.text, a, b)]
    return _candidates(doc.text, 0, len(doc.text))


def _candidates(text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    pieces: list[list[int]] = []  # [start, end, ends_line]
    start = lo
    for m in _END.finditer(text, lo, hi):
        cut, nxt = m.start(), m.end()
        if m.group() != "\n" and m.group().strip() == "" and _ABBREV.search(text, max(0, cut - 12), cut):
            continue  # "U.S. Dollars": not a sentence end
        _add_piece(text, start, cut, pieces, "\n" in m.group())
        start = nxt
    _add_piece(text, start, hi, pieces, True)
    merged: list[list[int]] = []
    for piece in pieces:
        if merged and _joins(text, merged[-1], piece):
            merged[-1][1], merged[-1][2] = piece[1], piece[2]
        else:
            merged.append(list(piece))
    return [(s, e) for s, e, _ in merged if _WORDY.search(text, s, e)]


def _add_piece(text: str, a: int, b: int, pieces: list[list[int]], ends_line: bool) -> None:
    seg = text[a:b]
    lead = len(seg) - len(seg.lstrip())
    trail = len(seg.rstrip())
    if trail > lead:
        pieces.append([a + lead, a + trail, int(ends_line)])
    elif ends_line and pieces:
        pieces[-1][2] = 1


def _joins(text: str, prev: list[int], nxt: list[int]) -> bool:
    if not prev[2] or nxt[1] - prev[0] > MERGE_MAX or text.count("\n", prev[1], nxt[0]) > 1:
        return False  # only across one line break (not a blank line), and not into an over-long passage
    a = text[prev[0]:prev[1]]
    b = text[nxt[0]:nxt[1]]
    if _LABEL_ONLY.match(a.strip()):
        return True
    if _BULLET.match(b) and (a.endswith((":", "：")) or _LISTING.search(a)):
        return True  # a list under its lead-in line ("prescribed the following medications:") stays one passage
    if _TERMINAL.search(a):
        return False
    if _heading(a) and not _LABEL_ONLY.match(b.strip()):
        return True
    first = b[:1]
    if len(a) >= 30 and (first.islower() or first.isdigit() or first in "(（["):
        return True
    return _cjk(a[-1:]) and _cjk(first) and len(a) >= 25


_ENUM = re.compile(r"^\s*(?:[(（]?\d{1,3}[)）.]|[(（][a-zA-Z][)）]|[A-Z]\.|[一二三四五六七八九十]+[、.．])\s*")
_BULLET = re.compile(r"^\s*[-•*·▪●]\s")
_LISTING = re.compile(r"[:：]\n\s*[-•*·▪●]\s")


def _heading(line: str) -> bool:
    """A short label that introduces what follows: "Edited by", "（2）主诉", "LABS:" — under 40
    characters, no sentence end, no list bullet, and no digits once a leading enumerator is off."""
    if len(line) >= 40 or _BULLET.match(line):
        return False
    rest = _ENUM.sub("", line, count=1)
    return bool(rest.strip()) and not any(c.isdigit() for c in rest)


def label_line(line: str) -> bool:
    """A line that only labels what follows: a short heading (`_heading`) or a bare label ("21.",
    "Figure 2.", "表 2-3"); the passage cutter joins such a line to the next."""
    return _heading(line) or bool(_LABEL_ONLY.match(line.strip()))


def _cjk(ch: str) -> bool:
    return bool(ch) and "\u3400" <= ch <= "\u9fff"


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


# a passage that states the opposite of what was given or found: an allergy list, a denial, a
# negative finding ("ALLERGIES: Penicillin" never answers "which antibiotic was given?")
_CONTRA = re.compile(r"allerg|\bno known\b|\bdenie[sd]\b|\bnegative for\b|\bnot (?:given|taken|prescribed)\b|"
                     r"\bdiscontinu|\bcontraindicat|过敏|否认|禁用|禁忌|未(?:使用|服用|给予)|停用", re.IGNORECASE)


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
    for p, extra in zip(out, lexical_extras(question, texts, bm), strict=True):
        p.feats.update(extra)
    return out


_IDENT = re.compile(r"(?:[A-Za-z]+[.\-])*[A-Za-z]*\d+(?:[.\-][A-Za-z0-9]+)*")


def identifiers(text: str) -> set[str]:
    """Tokens with a digit ("10", "2-3", "CG.B.4", "US7156074"), NFKC and case folded, soft hyphens
    read as hyphens: what names a claim, a table, a row or a section."""
    norm = _nfkc(text).replace("\u00ad", "-")
    return {m.group() for m in _IDENT.finditer(norm)}


def lexical_extras(question: str, texts: Sequence[str], bm25: Sequence[float]) -> list[dict[str, float]]:
    """`ident`: the share of the question's identifiers (`identifiers`) the passage holds (0 when the
    question has none); `phrase`: the share of the question's adjacent content-term pairs the
    passage holds in the same order (a phrase, not scattered words); `ctx`: the better BM25 of the
    passage's two neighbours (a heading above, the sentence after); `contra` (see the module
    docstring)."""
    q_ids = identifiers(question)
    q_terms = content_terms(question)
    asks_contra = bool(_CONTRA.search(question))
    pairs = {(a, b) for a, b in zip(q_terms, q_terms[1:], strict=False)}
    out = []
    for i, t in enumerate(texts):
        ids = identifiers(t) if q_ids else set()
        if pairs:
            terms = content_terms(t)
            have = set(zip(terms, terms[1:], strict=False))
            phrase = len(pairs & have) / len(pairs)
        else:
            phrase = 0.0
        ctx = max(bm25[i - 1] if i > 0 else 0.0, bm25[i + 1] if i + 1 < len(texts) else 0.0)
        out.append({"ident": len(q_ids & ids) / len(q_ids) if q_ids else 0.0, "phrase": phrase, "ctx": ctx,
                    "contra": float(not asks_contra and bool(_CONTRA.search(t)))})
    return out


_UPR = {"en": ("Passage: {passage}\nQuestion:", " {question}"), "zh": ("段落：{passage}\n问题：", "{question}")}


def likelihood_items(question: str, doc: Document, passages: Sequence[Passage]) -> list[tuple[str, str]]:
    """(prompt, continuation) pairs whose scores are the question's log-likelihood after each
    passage, and, last, after an empty passage (the question's own likelihood)."""
    lang = "zh" if cjk_share(question) > 0.2 else "en"
    head, tail = _UPR[lang]
    cont = tail.format(question=question.strip())
    texts = [" ".join(doc.text[p.start:p.end].split())[:600] for p in passages] + ["-"]
    return [(head.format(passage=t), cont) for t in texts]


def set_likelihood(passages: list[Passage], scores: Sequence[float]) -> None:
    """Give every passage its `upr` and `lift` features from `scores`: the mean log-probability per
    token of the question after each of the first len(scores) - 1 passages (the reranked ones) and,
    last, after an empty passage. upr: a reranked passage's score minus the best one's (the others
    get the worst reranked score minus 1); lift: the best score minus the empty passage's, the same
    for every passage of the question (how much any passage of the document explains the question)."""
    *read, null = scores
    if not read:
        return
    best, worst = max(read), min(read)
    for p, sc in zip(passages, read, strict=False):
        p.feats["upr"] = sc - best
    for p in passages[len(read):]:
        p.feats["upr"] = worst - best - 1.0
    for p in passages:
        p.feats["lift"] = best - null


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
    supported: it says nothing the quote could carry. A one-word answer must be a word of the quote
    as it stands ("APPROVED" is not carried by "must approve"); longer answers match by stem."""
    text = _nfkc(model_text).strip()
    if not text:
        return Support(False, 0.0)
    joined = _nfkc(" ".join(quotes))
    quoted_numbers = {n.replace(",", "") for n in _NUMBER.findall(joined)}
    numbers = [n.replace(",", "") for n in _NUMBER.findall(text)]
    missing_n = tuple(n for n in numbers if n not in quoted_numbers)
    terms = [t for t in content_terms(text) if not t.isdigit()]
    quoted = bm25_terms(joined)
    if len(terms) == 1 and not numbers:  # a one-word answer ("APPROVED") must be the quote's own word, not a stem of it
        missing_t = tuple(t for t in terms if t not in set(quoted))
    else:
        have = {_stem(t) for t in quoted}
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
    low = "".join((_nfkc(c) or c)[:1] for c in passage)  # per character: offsets stay the passage's
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
    `support`: the check of the model's wording against the quotes (None without model text).
    `warnings`: what a reader should know about the evidence (text imitating the prompt)."""

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
    feats: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


CONF_FEATURES = ("p_top", "margin", "text_kind", "has_value", "value_missing", "supported", "lift", "cover",
                 "aover", "named")


@dataclass(frozen=True)
class Confidence:
    """A logistic model of "the shown answer is right" over `CONF_FEATURES` of the chosen answer;
    below `threshold` the answer is "not stated in the document"."""

    weights: dict[str, float]
    bias: float
    threshold: float
    source: str

    def prob(self, feats: dict[str, float]) -> float:
        return sigmoid(self.bias + sum(self.weights.get(k, 0.0) * feats.get(k, 0.0) for k in CONF_FEATURES))


CONFIDENCE = Confidence(
    weights={
        "p_top": 1.3443,
        "margin": 0.0937,
        "text_kind": -0.2718,
        "has_value": 0.2984,
        "value_missing": -0.0266,
        "supported": -0.9294,
        "lift": -0.1818,
        "cover": 0.7186,
        "aover": 0.9954,
        "named": -0.6053,
    },
    bias=-1.1132,
    threshold=0.31,
    source='fitted on the dev split (88 answers, l2 1.0); threshold: best dev accuracy with at most 10% of answerable questions abstained',
)


def answer_features(kind: str, ranked: list[Passage], value, sup: Support | None, named: bool) -> dict[str, float]:
    """What the confidence model reads: the best passage's probability and its margin over the
    second's score, whether the question asks for text, whether a value of the asked kind was
    found in the quotes (or is missing), whether the model's words are carried by the quotes and
    whether the model's answer names the value, the likelihood lift and the best passage's
    question-term coverage and overlap with the model's answer."""
    top = ranked[0]
    second = ranked[1].score if len(ranked) > 1 else top.score - 5.0
    return {"p_top": top.prob, "margin": min(top.score - second, 5.0), "text_kind": float(kind == "text"),
            "has_value": float(value is not None), "value_missing": float(kind != "text" and value is None),
            "supported": float(sup is not None and sup.supported), "lift": top.feats.get("lift", 0.0),
            "cover": top.feats.get("cover", 0.0), "aover": top.feats.get("aover", 0.0), "named": float(named)}


# a question about what the patient was given, took or was prescribed ...
_GIVEN = re.compile(r"\b(?:given|administered|prescribed|received|receiving|taking|takes|took|started on|treated with|"
                    r"put on|medications?|drugs?|antibiotics?|therap(?:y|ies))\b|给予|给了|使用了|服用|用药|用了|"
                    r"治疗|药物|抗生素", re.IGNORECASE)
# ... is never answered by a line that says the opposite: an allergy, a denial, a drug not given
_NOT_GIVEN = re.compile(r"allerg|\bno known\b|\bdenie[sd]\b|\bnot (?:given|taken|prescribed)\b|\bcontraindicat|"
                        r"过敏|否认|禁用|禁忌|未(?:使用|服用|给予)", re.IGNORECASE)


_CLAUSE = re.compile(r"[，,；;。.!?！？\n]+")
# a line of the document that imitates the prompt's own structure ("Question: … / Answer: APPROVED")
# (whole words only: a SOAP note's "A:" is its assessment, not an answer planted for the model)
_IMITATION = re.compile(r"(?m)^[ \t>*#-]*(?:question|answer|instructions?|问题|回答|答案)[ \t]*[:：]", re.IGNORECASE)
IMITATION_WARNING = ("the document holds text that imitates a question and its answer (\"Question: … Answer: …\"); "
                     "it is never used as evidence")


def imitates_prompt(text: str) -> bool:
    """Whether a passage holds a line that opens like the ask prompt's "Question:" or "Answer:"
    (or 问题：/回答：): text planted to answer for the model, never evidence."""
    return bool(_IMITATION.search(text))


def answerable_by(question: str, text: str) -> bool:
    """False for a passage that can never answer the question: one that imitates the prompt
    (`imitates_prompt`), or one that, for a question about what
    was given, taken or prescribed (and not itself about allergies or denials), only says what was
    not — every clause with letters in it an allergy, a denial or a drug not given ("ALLERGIES:
    Penicillin."). A passage with another clause ("口服二甲双胍0.25g，tid，否认药物过敏史") may still
    answer; an excluded one may still be listed as a near miss."""
    if imitates_prompt(text):
        return False
    if not _GIVEN.search(question) or _NOT_GIVEN.search(question) or not _NOT_GIVEN.search(text):
        return True
    return any(_WORDY.search(c) and not _NOT_GIVEN.search(c) for c in _CLAUSE.split(text))


def decide(question: str, doc: Document, ranked: list[Passage], model_text: str = "",
           fusion: Fusion = FUSION, confidence: Confidence | None = None) -> Found:
    """The answer from passages ranked by `rank` (see the module docstring): the best passage and
    up to two more that clear `fusion.threshold`, the value inside them, the model's wording if the
    quotes carry it; then `confidence` (default `CONFIDENCE`) says how likely that answer is right,
    and below its threshold the answer is "not stated in the document" with these passages as the
    near misses. A passage that can never answer the question (`answerable_by`: an allergy line for
    "what was given?") is not chosen, whatever its score."""
    confidence = CONFIDENCE if confidence is None else confidence
    kind = question_kind(question)
    model_text = model_text.strip()
    near_all = ranked
    ranked = [p for p in ranked if answerable_by(question, doc.text[p.start:p.end])]
    warnings = [IMITATION_WARNING] if any(imitates_prompt(doc.text[p.start:p.end])
                                          for p in near_all[:RERANK]) else []
    if not ranked:
        return Found(question, kind, "not_stated", 1.0, NOT_STATED, near=near_all[:MAX_PASSAGES],
                     model_text=model_text, warnings=warnings)
    top = ranked[0]
    chosen = [top] + [p for p in ranked[1:MAX_PASSAGES] if p.prob >= max(fusion.threshold, 0.5 * top.prob)]
    quotes = [doc.text[p.start:p.end] for p in chosen]
    sup = support(model_text, quotes) if model_text else None
    value, named = None, False
    if kind != "text":
        for p, quote in zip(chosen, quotes, strict=True):
            v = pick_value(question, quote, model_text)
            if v is not None:
                value = (p.start + v[0], p.start + v[1])
                named = bool(model_text) and _nfkc(quote[v[0]:v[1]]) in _nfkc(model_text)
                break
    if value is not None:
        text = doc.text[value[0]:value[1]]
    elif sup is not None and sup.supported:
        text = model_text
    else:
        text = quotes[0]
    feats = answer_features(kind, ranked, value, sup, named)
    conf = confidence.prob(feats)
    if conf < confidence.threshold:
        return Found(question, kind, "not_stated", round(1.0 - conf, 4), NOT_STATED, near=ranked[:MAX_PASSAGES],
                     model_text=model_text, support=sup, feats=feats, warnings=warnings)
    return Found(question, kind, "answered", round(conf, 4), text, passages=chosen, value=value,
                 model_text=model_text, support=sup, feats=feats, warnings=warnings)


QUESTION_HEAD = "\n\nQuestion:"  # the question's attention is read after the document and this


@dataclass
class EvidenceJob:
    """One document's questions for `gather`: the prompt's instructions before the document, each
    question's suffix after it (as generated), the model's texts, whether the document's attention
    can be read for each (False where a fallback served the question because the document did not
    fit), and the ranges of the document that are separate parts (joined documents: a passage
    never crosses from one into the next); None: the whole text."""

    doc: Document
    instructions: str
    questions: list[str]
    suffixes: list[str]
    texts: list[str]
    readable: list[bool]
    parts: list[tuple[int, int]] | None = None


def read_attention(llm, jobs: Sequence[EvidenceJob], spans_of: Sequence[list[tuple[int, int]]]
                   ) -> list[list[tuple[list[float] | None, list[float] | None]]]:
    """The question's and the model answer's attention shares on every candidate span, for each
    question of each job; None where not read. One `attention_shares` call."""
    from pipelines.llm.settings import engine_lock
    from pipelines.llm.spans import attention_shares

    items, where = [], []
    for j, (job, spans) in enumerate(zip(jobs, spans_of, strict=True)):
        for i, (q, suf, txt, ok) in enumerate(zip(job.questions, job.suffixes, job.texts, job.readable, strict=True)):
            if not ok or not spans:
                continue
            where.append((j, i, 0))
            items.append((job.doc, job.instructions, QUESTION_HEAD, " " + q.strip(), spans))
            if txt.strip():
                where.append((j, i, 1))
                items.append((job.doc, job.instructions, suf, " " + txt.strip(), spans))
    out: list[list[list]] = [[[None, None] for _ in job.questions] for job in jobs]
    if items:
        with engine_lock(llm):
            got = attention_shares(llm, items)
        for (j, i, which), g in zip(where, got, strict=True):
            if g is not None:
                out[j][i][which] = [s for s, _ in g]
    return [[(q, a) for q, a in job] for job in out]


def read_likelihood(llm, asks: Sequence[tuple[str, Document, list[Passage]]]) -> list[list[float]]:
    """For each (question, doc, passages): the question's mean log-probability per token after each
    passage and, last, after an empty one (`likelihood_items`); one `LLM.score_many` call."""
    from pipelines.llm.settings import engine_lock

    items, sizes = [], []
    for question, doc, passages in asks:
        its = likelihood_items(question, doc, passages)
        items += its
        sizes.append(len(its))
    if not items:
        return [[] for _ in asks]
    with engine_lock(llm):
        outs = llm.score_many(items, batch=SCORE_BATCH)
    means = [sum(o.logprobs) / len(o.logprobs) for o in outs]
    res, at = [], 0
    for n in sizes:
        res.append(means[at:at + n])
        at += n
    return res


def gather(llm, jobs: Sequence[EvidenceJob], *, pre: Fusion | None = None, fusion: Fusion | None = None,
           embed: bool = True, rerank: int = RERANK, trace: list | None = None) -> list[list[Found]]:
    """Evidence-first answers for several documents' questions at once (see the module
    docstring): candidate passages, the attention reads of every question of the call in one
    engine call, the lexical features, a first ranking by `pre`, the model's reading of each
    question's best `rerank` passages (one `score_many`), the final ranking by `fusion`, the
    decision. trace: a list that gets (job index, question index, every passage ranked) for each
    question (the benchmark's record of the features)."""
    pre = PRE if pre is None else pre
    fusion = FUSION if fusion is None else fusion
    from engine import EngineError

    spans_of = [candidate_spans(job.doc, job.parts) for job in jobs]
    try:
        reads = read_attention(llm, jobs, spans_of)
    except EngineError as exc:  # the passages are still ranked, on what was read without the model
        log.warning("evidence: the attention could not be read (%s); ranking without it", exc)
        reads = [[(None, None) for _ in job.questions] for job in jobs]
    ranked_of: list[list[list[Passage]]] = []
    asks = []
    for job, spans, job_reads in zip(jobs, spans_of, reads, strict=True):
        ranked_job = []
        for q, txt, (q_sh, a_sh) in zip(job.questions, job.texts, job_reads, strict=True):
            ranked = rank(passage_features(q, job.doc, spans, q_sh, a_sh, txt, embed=embed), pre)
            ranked_job.append(ranked)
            if rerank > 0 and ranked:
                asks.append((q, job.doc, ranked[:rerank]))
        ranked_of.append(ranked_job)
    try:
        scores = iter(read_likelihood(llm, asks)) if asks else iter(())
    except EngineError as exc:
        log.warning("evidence: the passages could not be read by the model (%s); ranking without it", exc)
        rerank, scores = 0, iter(())
    out = []
    for job, ranked_job in zip(jobs, ranked_of, strict=True):
        answers = []
        for q, txt, ranked in zip(job.questions, job.texts, ranked_job, strict=True):
            if rerank > 0 and ranked:
                set_likelihood(ranked, next(scores))
            ranked = rank(ranked, fusion)
            if trace is not None:
                trace.append((len(out), len(answers), ranked))
            answers.append(decide(q, job.doc, ranked, txt, fusion))
        out.append(answers)
    return out
