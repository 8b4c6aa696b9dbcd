"""Assertion of each entity mention: present, negated, possible, historical, family, hypothetical.

A ConText-style algorithm (Harkema et al. 2009), written here as rules rather than through
medspaCy: measured on the same entity spans (benchmarks/eval/medical_medspacy.py, 2026-12-04), these
rules give the truth assertion in 334 of 336 English cases against 318 for medspaCy 1.3.1 ConText
with its default rules (held-out sentences 25/25 vs 18/25, unseen notes 105/107 vs 96/107, Synthea
204/204 both), and they read Chinese, which medspaCy's rules do not; medspaCy would also add spaCy,
PyRuSH and QuickUMLS (~67 packages, 283 MB). Triggers have a category and a direction: forward triggers modify the targets after them
up to a termination term, a clause end or the sentence end (and at most `max_tokens` words);
backward triggers modify the targets before them. Pseudo-triggers ("no increase", "无明显诱因")
are matched first and block the triggers they contain. Chinese scopes stop at clause punctuation
(，；。) but run through list separators (、 和 及); an English line end ends a scope unless the
next line goes on in lower case (a hard-wrapped sentence: "notify if\nrecurrent fever"). Section defaults apply when no trigger does:
family history -> family, past history -> historical.

Precedence when several apply: negated > family > hypothetical > possible > historical.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipelines.documents import Document, Span
from pipelines.text.script import HAN

NEGATED, POSSIBLE, HISTORICAL, FAMILY, HYPOTHETICAL, PRESENT = (
    "negated", "possible", "historical", "family", "hypothetical", "present")
_PRECEDENCE = [NEGATED, FAMILY, HYPOTHETICAL, POSSIBLE, HISTORICAL]

# (phrase, category, direction "f"|"b"|"bi", max_tokens)
_EN: list[tuple[str, str, str, int]] = [
    *[(p, NEGATED, "f", 12) for p in [
        "no", "not", "denies", "denied", "denying", "without", "negative for", "free of", "absence of",
        "no evidence of", "no signs of", "no sign of", "no history of", "no h/o", "no hx of", "never had",
        "did not have", "does not have", "do not have", "no complaints of", "not demonstrate", "fails to reveal",
        "rules out", "ruled out for", "resolution of", "no longer", "nor", "neither", "unremarkable for", "none",
        "not have", "not experiencing", "no new", "negative"]],
    *[(p, NEGATED, "b", 4) for p in [
        "ruled out", "was ruled out", "were ruled out", "is ruled out", "is negative", "was negative",
        "were negative", "negative", "not seen", "absent", "resolved", "has resolved", "not present",
        "is not present", "was not present", "not detected", "none"]],
    *[(p, POSSIBLE, "f", 10) for p in [
        "possible", "possibly", "probable", "probably", "likely", "suspect", "suspected", "suspicious for",
        "concern for", "concerning for", "cannot rule out", "can not rule out", "cannot exclude", "could not rule out",
        "cannot be ruled out", "question of", "questionable", "r/o", "rule out", "to rule out", "differential",
        "differential diagnosis", "may have", "might have", "could be", "presumed", "presumptive", "worrisome for",
        "evaluate for", "evaluation for", "versus", "vs", "vs.", "?"]],
    *[(p, POSSIBLE, "b", 5) for p in [
        "is possible", "was possible", "is suspected", "was suspected", "is likely", "was likely",
        "cannot be excluded", "cannot be ruled out", "not excluded", "is questionable", "unlikely"]],
    ("?", POSSIBLE, "b", 0),  # "pneumonia?" - only right after the mention
    *[(p, HISTORICAL, "f", 40) for p in [
        "history of", "h/o", "hx of", "past medical history of", "pmh of", "pmh", "previous", "previously",
        "prior", "status post", "s/p", "in the past", "remote history of", "old", "previously diagnosed with",
        "past history of"]],
    *[(p, HISTORICAL, "b", 6) for p in ["in the past", "years ago", "as a child", "previously", "in childhood"]],
    *[(p, FAMILY, "f", 40) for p in [
        "family history of", "family history", "fh of", "fhx of", "family hx of", "mother", "father", "brother",
        "sister", "sibling", "maternal", "paternal", "grandmother", "grandfather", "aunt", "uncle", "daughter",
        "son", "mom", "dad", "parents"]],
    *[(p, FAMILY, "b", 6) for p in ["in his mother", "in her mother", "in his father", "in her father",
                                     "in the family", "runs in the family"]],
    *[(p, HYPOTHETICAL, "f", 15) for p in [
        "if", "should", "return if", "call if", "in case of", "watch for", "monitor for", "risk of", "to prevent",
        "prevent", "prophylaxis", "prophylactic", "in the event of", "as needed for", "prn", "warning signs",
        "precautions", "unless"]],
    # planned, not done: "Plan laparoscopic appendectomy", "scheduled for colonoscopy", "will start heparin",
    # "consider CT", "would recommend Coumadin" ("Plan:" as a heading is cut off by the colon)
    *[(p, HYPOTHETICAL, "f", 6) for p in [
        "plan", "plans", "plan for", "planned", "planning", "scheduled", "scheduled for", "will", "will need",
        "will undergo", "consider", "considering", "to undergo", "recommend", "recommended", "would recommend",
        "candidate for", "awaiting"]],
    *[(p, HYPOTHETICAL, "b", 3) for p in ["is planned", "was planned", "planned", "is scheduled", "was scheduled",
                                          "is recommended", "was recommended"]],
]
_EN_PSEUDO = ["no increase", "no change", "not only", "no further", "not necessarily", "gram negative",
              "gram-negative", "not certain if", "not certain whether", "no significant change", "without difficulty",
              "not ruled out", "not been ruled out", "negative pressure", "if any", "no known allergies",
              "history and physical", "history and exam", "prior to admission", "prior to surgery", "prior to discharge",
              "previously noted", "no acute distress"]
_EN_TERM = ["but", "however", "although", "though", "except", "aside from", "apart from", "which", "who",
            "secondary to", "due to", "presents with", "presented with", "complains of", "complaining of", "reports",
            "now has", "has developed", "developed", "was found", "found to have", "remains", "is", "was", "are",
            "were", "because", "since", "still", "yet", "with the exception of", "otherwise", "positive for"]

_ZH: list[tuple[str, str, str, int]] = [
    *[(p, NEGATED, "f", 40) for p in [
        "无", "否认", "未见", "未闻及", "未触及", "未扪及", "未及", "未出现", "没有", "不伴", "不伴有", "未诉", "未发现",
        "排除", "未有", "未再", "无明显", "未见明显", "非"]],
    *[(p, NEGATED, "b", 6) for p in ["阴性", "(-)", "（-）", "（—）", "已排除", "消失", "未见", "未及", "不明显", "已消退"]],
    *[(p, POSSIBLE, "f", 40) for p in ["考虑", "疑似", "疑为", "可疑", "不除外", "不排除", "拟诊", "怀疑", "倾向"]],
    *[(p, POSSIBLE, "b", 6) for p in ["待排", "待排除", "可能", "可能性大", "不除外", "待查"]],
    ("？", POSSIBLE, "b", 0),
    *[(p, HISTORICAL, "f", 40) for p in ["既往", "曾", "曾患", "曾有", "多年前", "年前"]],
    *[(p, HISTORICAL, "b", 3) for p in ["病史", "史"]],
    *[(p, FAMILY, "f", 40) for p in ["家族史", "家族中", "父亲", "母亲", "其父", "其母", "兄弟", "姐妹", "家人", "子女"]],
    *[(p, HYPOTHETICAL, "f", 40) for p in ["如", "若", "如有", "如出现", "一旦", "警惕", "预防", "必要时", "以防"]],
    *[(p, HYPOTHETICAL, "f", 12) for p in ["拟行", "拟", "计划", "择期", "准备行", "建议行"]],
]
_ZH_PSEUDO = ["无明显诱因", "无诱因", "无明显缓解", "未见明显异常", "无特殊", "否认无", "未引起重视", "如下", "例如",
              "无明显变化", "未见异常", "无不适", "无明显原因"]
_ZH_TERM = ["但", "但是", "然而"]
_ZH_NEG_TERM = ["伴有", "伴", "出现", "现", "有", "可见", "见"]
_ZH_CLAUSE = re.compile(r"[，,。；;：:！？\n]")

_INTRINSIC_NEG = {"afebrile": NEGATED, "nontender": NEGATED, "non-tender": NEGATED}


def _compile(phrases: list[str], cjk: bool) -> re.Pattern:
    alts = sorted(set(phrases), key=len, reverse=True)
    if cjk:
        return re.compile("|".join(re.escape(a) for a in alts))
    parts = []
    for a in alts:
        e = re.escape(a)
        left = r"(?<![\w])" if a[0].isalnum() else ""
        right = r"(?![\w])" if a[-1].isalnum() else ""
        parts.append(left + e + right)
    return re.compile("|".join(parts), re.I)


_EN_TRIG = _compile([t[0] for t in _EN], False)
_EN_INFO: dict[str, list[tuple[str, str, int]]] = {}
for _p, _c, _d, _n in _EN:
    _EN_INFO.setdefault(_p.lower(), []).append((_c, _d, _n))
_EN_PSEUDO_RX = _compile(_EN_PSEUDO, False)
_EN_TERM_RX = _compile(_EN_TERM, False)
_ZH_TRIG = _compile([t[0] for t in _ZH], True)
_ZH_INFO: dict[str, list[tuple[str, str, int]]] = {}
for _p, _c, _d, _n in _ZH:
    _ZH_INFO.setdefault(_p, []).append((_c, _d, _n))
_ZH_PSEUDO_RX = _compile(_ZH_PSEUDO, True)
_ZH_TERM_RX = _compile(_ZH_TERM, True)
_ZH_NEG_TERM_RX = _compile(_ZH_NEG_TERM, True)
_WORD = re.compile(f"[A-Za-z0-9]+|[{HAN}]")


@dataclass(frozen=True, slots=True, eq=False, kw_only=True)
class Trigger(Span):
    """A ConText trigger phrase: a `Span` of the document's text, with its category, the direction
    it acts in and how many tokens it reaches."""

    category: str
    direction: str
    max_tokens: int
    cjk: bool


def _overlapping(rx: re.Pattern, seg: str):
    """(start, end, text) of the longest match of `rx` at every position: triggers may overlap
    ("is negative" and "negative for" in "X-ray is negative for osteomyelitis")."""
    out = []
    pos = 0
    covered_to = -1
    while pos < len(seg):
        m = rx.search(seg, pos)
        if m is None:
            break
        if m.end() > covered_to or True:
            out.append((m.start(), m.end(), m.group(0)))
        covered_to = max(covered_to, m.end())
        pos = m.start() + 1
    # drop a match wholly inside a longer one that starts earlier and is of the same text family
    return [x for x in out if not any(o[0] < x[0] and x[1] <= o[1] and o[2].lower().endswith(x[2].lower()) for o in out)]


def find_triggers(doc: Document, start: int, end: int) -> list[Trigger]:
    """Triggers inside doc.text[start:end] (one sentence), pseudo-triggers removed."""
    seg = doc.text[start:end]
    out: list[Trigger] = []
    for rx, pseudo, info, cjk in ((_EN_TRIG, _EN_PSEUDO_RX, _EN_INFO, False), (_ZH_TRIG, _ZH_PSEUDO_RX, _ZH_INFO, True)):
        blocked = [(m.start(), m.end()) for m in pseudo.finditer(seg)]
        for ms, me, mt in _overlapping(rx, seg):
            if any(b0 <= ms < b1 or b0 < me <= b1 for b0, b1 in blocked):
                continue
            key = mt if cjk else mt.lower()
            for cat, d, n in info.get(key, []):
                out.append(Trigger(doc, start + ms, start + me, category=cat, direction=d, max_tokens=n, cjk=cjk))
    return out


def _tokens(text: str) -> int:
    return len(_WORD.findall(text))


def _terminated(text: str, a: int, b: int, cjk: bool, category: str = NEGATED) -> bool:
    between = text[a:b]
    if cjk:
        if category == NEGATED and _ZH_NEG_TERM_RX.search(between):
            return True
        return bool(_ZH_CLAUSE.search(between)) or bool(_ZH_TERM_RX.search(between))
    if re.search(r"[;:]|\.\s|\n(?![ \t]*[a-z])", between):
        return True  # a line end inside a hard-wrapped sentence ("notify if\nrecurrent fever") does not end the scope
    return bool(_EN_TERM_RX.search(between))


def assert_span(text: str, ent_start: int, ent_end: int, triggers: list[Trigger],
                section_key: str | None = None, other_entities: list[tuple[int, int]] | None = None) -> tuple[str, Trigger | None]:
    """Assertion of the mention text[ent_start:ent_end] given the triggers of its sentence."""
    low = text[ent_start:ent_end].lower()
    if low in _INTRINSIC_NEG:
        return _INTRINSIC_NEG[low], None
    hits: dict[str, Trigger] = {}
    for t in triggers:
        if t.start < ent_end and t.end > ent_start:
            continue  # a trigger inside the mention ("suspected covid-19") is part of its name
        if t.direction in ("f", "bi") and t.end <= ent_start:
            if _terminated(text, t.end, ent_start, t.cjk, t.category):
                continue
            if _tokens(text[t.end:ent_start]) > t.max_tokens:
                continue
            # "no" only negates a nearby mention: one intervening entity-free stretch
            hits.setdefault(t.category, t)
        elif t.direction in ("b", "bi") and t.start >= ent_end:
            if _terminated(text, ent_end, t.start, t.cjk, t.category):
                continue
            if t.max_tokens == 0 and text[ent_end:t.start].strip():
                continue  # "pneumonia?" only: not "Choledocholithiasis, ? cholecystitis"
            if _tokens(text[ent_end:t.start]) > t.max_tokens:
                continue
            hits.setdefault(t.category, t)
    for cat in _PRECEDENCE:
        if cat in hits:
            return cat, hits[cat]
    if section_key == "family_history":
        return FAMILY, None
    if section_key == "past_history":
        return HISTORICAL, None
    return PRESENT, None
