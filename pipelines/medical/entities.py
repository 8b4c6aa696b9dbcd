"""Clinical entity mentions in one document, each with its span, section, sentence and assertion.

Sources, most specific first (a later one never overlaps an earlier one):
1. lab results and vital signs (labs.py), inline and table rows;
2. list slots: items after "presenting with", "history of", "diagnosed with", "significant for",
   "given the following immunizations:", bullet items under "procedures ... :", "careplan:",
   "prescribed ... medications:", and the items of medication, diagnosis, procedure and problem
   sections — real records list problems and drugs the same way ("PMH: HTN, DM2, CKD"); a
   medication section written as one wrapped sentence gives one drug per item, known or not;
   list items reporting a normal finding ("normal LV ejection fraction") are not problems;
3. medications anywhere: a known drug name with dose, unit, route and frequency (combination
   products — "amoxicillin/clavulanate", "哌拉西林他唑巴坦" — as one drug with its components), then
   drugs outside the lexicon by their drug–strength–form pattern ("Eliquis 5 mg tablet PO BID");
4. the concept lexicon (English words on word boundaries, Chinese terms extended left over a few
   characters for disease-suffix terms: 急性阑尾炎, 胆总管结石, 肾癌);
Types: problem, symptom, procedure, medication, immunization, lab, vital.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipelines.documents import Document, HasSpan, Span
from pipelines.medical import context
from pipelines.medical.labs import find_labs, find_vitals
from pipelines.medical.lexicon import (
    DRUGS,
    FREQUENCIES,
    LAB_NAMES,
    ROUTES,
    VACCINES,
    VITAL_NAMES,
    concept_table,
)
from pipelines.medical.sections import Section, section_at
from pipelines.medical.text import find_sentence, sentences, word_boundary_ok
from pipelines.text.intervals import Intervals
from pipelines.text.script import HAN, HAN_RUN_RE


@dataclass
class Mention(HasSpan):
    """An entity mention: a `Span` of the document's text, what it is, and (filled in by `extract`)
    its section, sentence, assertion and the trigger behind the assertion."""

    type: str
    span: Span
    source: str  # lab | vital | list | medication | lexicon | section_item
    canonical: str
    normalized: dict = field(default_factory=dict)
    section: str | None = None
    sentence: Span | None = None  # the sentence holding it (its own span when none does)
    assertion: str = context.PRESENT
    trigger: context.Trigger | None = None
    row_time: tuple[int, int] | None = None  # a table row's date/time cells (labs and vitals of a table)


_CONCEPTS = concept_table()
_EN_CONCEPTS = {k: v for k, v in _CONCEPTS.items() if k.isascii()}
_ZH_CONCEPTS = {k: v for k, v in _CONCEPTS.items() if not k.isascii()}
_EN_RX = re.compile(r"(?<![\w-])(" + "|".join(re.escape(k) for k in sorted(_EN_CONCEPTS, key=len, reverse=True)) + r")(?![\w])", re.I)
_ZH_RX = re.compile("|".join(re.escape(k) for k in sorted(_ZH_CONCEPTS, key=len, reverse=True)))
_ZH_DISEASE_SUFFIX = re.compile(r"(癌|炎|瘤|结石|梗阻|骨折|疝|破裂|出血|占位|感染|综合征|溃疡|穿孔|积液|增生|狭窄|梗死|梗塞|衰竭|血症|病变|扩张|脓肿)")
_ZH_LEFT_STOP = set("无否认考虑为伴及和并有的诊断史患既往曾见未示提行于在与或查体致因起后前经合现予由改、")
_EN_MODIFIERS = re.compile(r"(?:(?:acute|chronic|severe|mild|moderate|recurrent|perforated|postoperative|post-operative|"
                           r"bilateral|left|right|community[- ]acquired|hospital[- ]acquired|viral|bacterial|essential|"
                           r"uncontrolled|superficial|deep|incisional|complicated|uncomplicated|new|worsening)\s+){1,3}$", re.I)

_SEMTAG = re.compile(r"\((finding|disorder|procedure|situation|physical object|organism|substance|record artifact|"
                     r"regime/therapy|observable entity|morphologic abnormality|event|qualifier value)\)\s*$", re.I)
_SEMTYPE = {"finding": "symptom", "disorder": "problem", "procedure": "procedure", "situation": "problem",
            "physical object": "procedure", "organism": "problem", "substance": "problem", "record artifact": "procedure",
            "regime/therapy": "procedure", "observable entity": "symptom", "morphologic abnormality": "problem",
            "event": "problem", "qualifier value": "problem"}

# list triggers: phrase -> default type of the items
_LIST_TRIGGERS = [
    (r"(?:is |was )?presenting with|presents with|presented with", "problem"),
    (r"(?:has |had )?(?:a |an )?(?:past )?(?:medical )?history of|h/o|hx of|pmh (?:of|significant for)|significant for", "problem"),
    (r"diagnosed with|diagnosis of|diagnoses of|complains of|complaining of|c/o|positive for|treated for|admitted (?:with|for)", "problem"),
    (r"denies|denied|negative for|no evidence of|without", "problem"),
    (r"given the following immunizations\s*:|immunizations?\s*(?:given|administered)?\s*:", "immunization"),
    (r"following procedures were conducted\s*:|procedures? (?:performed|done)\s*:", "procedure"),
    (r"placed on a careplan\s*:|care ?plan\s*:", "procedure"),
    (r"prescribed the following medications\s*:|following medications\s*:|started on|was given|received", "medication"),
]
_LIST_RX = re.compile(r"(?<!\w)(?:" + "|".join(f"(?P<t{i}>{p})" for i, (p, _) in enumerate(_LIST_TRIGGERS)) + r")", re.I)
_SECTION_ITEM_TYPE = {"medications": "medication", "discharge_medications": "medication", "procedures": "procedure",
                      "admission_diagnosis": "problem", "discharge_diagnosis": "problem", "diagnosis": "problem",
                      "preop_diagnosis": "problem", "postop_diagnosis": "problem", "past_history": "problem",
                      "chief_complaint": "symptom"}
_DOSE = re.compile(r"(?P<dose>\d+(?:\.\d+)?(?:\s*/\s*\d+(?:\.\d+)?)?)\s*(?P<unit>mg/ml|mg/kg|mg|mcg|μg|ug|g|kg|ml|mL|units?|U|IU|meq|mEq|%|片|粒|支|袋|克|毫克)(?![a-zA-Z])", re.I)


def _terms_rx(terms, extra: str = "") -> re.Pattern:
    """Alternation of terms: ASCII ones on word boundaries, Chinese ones anywhere."""
    alts = []
    for k in sorted(terms, key=len, reverse=True):
        e = re.escape(k)
        if k.isascii():
            left = r"(?<![A-Za-z0-9_])" if k[0].isalnum() else ""
            right = r"(?![A-Za-z0-9_])" if k[-1].isalnum() or k[-1] == "." else ""
            alts.append(left + e + right)
        else:
            alts.append(e)
    if extra:
        alts.append(extra)
    return re.compile("(" + "|".join(alts) + ")", re.I)


_ROUTE_RX = _terms_rx(ROUTES)
_FREQ_RX = _terms_rx(FREQUENCIES, r"(?<![A-Za-z])q\.?\s?\d{1,2}\s?h(?:ours?|rs?)?\.?(?![A-Za-z])|every\s+\d{1,2}\s+hours?|每\s*\d{1,2}\s*小时(?:一次|1次)?")
_DRUG_RX = _terms_rx(DRUGS)
_NON_ENTITY_ITEMS = re.compile(r"^(?:none|no known allergies|no complaints|no active medications|nkda|n/a|unknown|无|不详|"
                               r"no known drug allergies|see above|as above|other|others)\.?$", re.I)
# a list item that reports a normal finding ("normal left ventricular ejection fraction at 55%",
# "unremarkable abdomen", "正常") is not a problem
_NORMAL_ITEM = re.compile(r"^(?:normal|unremarkable|within normal limits|wnl|intact|preserved)\b|正常|未见异常", re.I)


def _med_details(text: str, start: int, end: int) -> dict:
    seg = text[start:end]
    d: dict = {}
    m = _DOSE.search(seg)
    if m:
        d["dose"] = m.group("dose").replace(" ", "")
        d["dose_unit"] = m.group("unit")
    r = _ROUTE_RX.search(seg)
    if r:
        d["route"] = ROUTES[r.group(1).lower()] if r.group(1).lower() in ROUTES else ROUTES.get(r.group(1), r.group(1))
    f = _FREQ_RX.search(seg)
    if f:
        word = f.group(1).lower()
        if word in FREQUENCIES:
            d["frequency"] = FREQUENCIES[word]
        else:
            n = re.search(r"\d+", word)
            d["frequency"] = f"every {n.group(0)} hours" if n else word
    forms = re.search(r"\b(tablet|capsule|solution|suspension|injection|cream|ointment|patch|inhaler|chewable tablet|day pack)\b", seg, re.I)
    if forms:
        d["form"] = forms.group(1).lower()
    drug = _DRUG_RX.search(seg)
    d["drug"] = drug.group(1).lower() if drug else re.split(r"\s+\d", seg.strip(), maxsplit=1)[0].strip().lower()
    return d


def _clean_item(text: str, s: int, e: int) -> tuple[int, int]:
    """Trim whitespace, bullets, numbering and trailing punctuation from an item span."""
    while s < e and (text[s].isspace() or text[s] in "-*•·"):
        s += 1
    m = re.match(r"(?:\d{1,2}[.)、]|[（(]\d{1,2}[）)]|[a-z][.)])\s*", text[s:e])
    if m and e - s > m.end():
        s += m.end()
    # leading determiners and repeated list triggers: "any chest pain", "history of seizure disorder"
    m = re.match(r"(?:(?:any|a|an|the|some|her|his|their|no|also|a history of|history of|h/o|hx of)\s+)+", text[s:e], re.I)
    if m and e - s > m.end():
        s += m.end()
    while e > s and (text[e - 1].isspace() or text[e - 1] in ".,;:。，；：、"):
        e -= 1
    return s, e


def _split_items(text: str, s: int, e: int, commas: bool = True) -> list[tuple[int, int]]:
    """Split a list at commas/semicolons/' and ' and inline numbering ("1. A  2. B"), keeping
    vaccine names that contain commas whole; `commas=False` keeps English commas inside items
    ("Perforated appendicitis, status post appendectomy")."""
    seg = text[s:e]
    low = seg.lower()
    protected: list[tuple[int, int]] = []
    for v in sorted(VACCINES, key=len, reverse=True):
        for m in re.finditer(re.escape(v), low):
            a, b = m.start(), m.end()
            if (a == 0 or not low[a - 1].isalnum()) and (b == len(low) or not low[b].isalnum()):
                if not any(pa < b and a < pb for pa, pb in protected):
                    protected.append((a, b))
    cuts = []
    sep = (r",\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+|" if commas else "") + \
        rf";\s*|\s+nor\s+|\.\s+(?=[A-Z{HAN}])|\s+(?:\d{{1,2}}[.、)]|[（(]\d{{1,2}}[）)])\s*|、|，|；|。|及|和"
    for m in re.finditer(sep, seg):
        if any(pa <= m.start() < pb for pa, pb in protected):
            continue
        # a comma inside parentheses belongs to the item
        if seg[: m.start()].count("(") > seg[: m.start()].count(")"):
            continue
        cuts.append((m.start(), m.end()))
    out = []
    pos = 0
    for a, b in cuts:
        out.append((s + pos, s + a))
        pos = b
    out.append((s + pos, e))
    return [c for c in (_clean_item(text, a, b) for a, b in out) if c[1] > c[0]]


def _item_type(item: str, default: str) -> tuple[str, str]:
    """(type, canonical) of a list item."""
    low = item.lower().strip()
    tag = _SEMTAG.search(low)
    base = _SEMTAG.sub("", low).strip() if tag else low
    if default in ("immunization", "medication"):
        return default, base
    if base in _CONCEPTS:
        typ, can = _CONCEPTS[base]
        return (typ if default != "procedure" else "procedure"), can
    if not tag and default in ("problem", "procedure"):
        # "Postoperative wound infection", "Perforated appendicitis, s/p ...": the concept inside names it
        found = [(m.start(), _EN_CONCEPTS[m.group(1).lower()]) for m in _EN_RX.finditer(item)]
        found += [(m.start(), _ZH_CONCEPTS[m.group(0)]) for m in _ZH_RX.finditer(item)]
        found = [f for f in found if f[1][0] in ("problem", "procedure") or default != "problem"]
        if found:
            pref = [f for f in found if f[1][0] == default] or found
            typ, can = min(pref)[1]
            return (default if default == "procedure" else typ), can
    if tag:
        typ = _SEMTYPE.get(tag.group(1), default)
        if default == "procedure":
            typ = "procedure"
        return typ, base
    if _DRUG_RX.search(low) and _DOSE.search(low):
        return "medication", base
    return default, base


class _Collector:
    def __init__(self, doc: Document):
        self.doc = doc
        self.items: list[Mention] = []
        self._taken = Intervals()

    def free(self, s: int, e: int) -> bool:
        return not self._taken.overlaps(s, e)

    def add(self, type_: str, s: int, e: int, source: str, canonical: str, normalized: dict | None = None) -> bool:
        """Keep a mention of doc.text[s:e] unless it is empty or overlaps one already kept."""
        if not self._taken.add(s, e):
            return False
        self.items.append(Mention(type_, Span(self.doc, s, e), source, canonical, normalized or {}))
        return True

    def remove(self, m: Mention) -> None:
        """Drop a kept mention (its range is free again)."""
        self.items.remove(m)
        self._taken.discard(m.start, m.end)


def _list_slots(text: str, col: _Collector, sents: list[Span], sections: list[Section]) -> None:
    for m in _LIST_RX.finditer(text):
        if any(sec.start <= m.start() < sec.end for sec in sections):
            continue  # "History of Present Illness" is a heading, not a list
        default = next(t for i, (_, t) in enumerate(_LIST_TRIGGERS) if m.group(f"t{i}"))
        trig = m.group(0)
        after = m.end()
        if trig.rstrip().endswith(":") and re.match(r"[ \t]*\n", text[after:]):
            # bullet list on the following lines
            pos = text.index("\n", after) + 1
            while pos < len(text):
                le = text.find("\n", pos)
                le = len(text) if le < 0 else le
                if not re.match(r"\s*(?:[-*•·]|\d{1,2}[.)])\s+\S", text[pos:le]):
                    break
                a, b = _clean_item(text, pos, le)
                _add_item(text, col, a, b, default, "list")
                pos = le + 1
            continue
        sent = find_sentence(sents, m.start())
        end = sent.end if sent else min(len(text), after + 300)
        # stop the list at a clause that is not a list
        tail = text[after:end]
        stop = re.search(r"\.\s|\.$|;\s*(?:she|he|patient|the)\b|\bwhich\b|\bthat\b|\bwho\b|\bbut\b|\bfor\s+\d|"
                         r"[,;]?\s*\b(?:denies|denied|reports|no|now|overnight|since|x\s*\d)\b", tail, re.I)
        if stop:
            end = after + stop.start()
        if default == "medication" and not trig.rstrip().endswith(":"):
            continue  # "started on", "was given": handled by the drug pattern
        if default == "problem" and trig.lower() in ("denies", "denied", "negative for", "no evidence of", "without"):
            pass
        if end - after > 400:
            continue
        denial = bool(re.match(r"denie|negative|no evidence|without", trig, re.I))
        for a, b in _split_items(text, after, end):
            if b - a > 80 or b - a < 2:
                continue
            if default == "problem" and not _plausible_problem(text[a:b], strict=denial):
                continue
            _add_item(text, col, a, b, default, "list")


def _plausible_problem(item: str, strict: bool = False) -> bool:
    """Is a list item a problem name? `strict` (denial lists: "denies X, Y nor Z"): only exact
    concepts or unknown short phrases — an item with a known term inside plus other words is left
    to the lexicon, which finds the term itself."""
    low = item.lower().strip()
    if _SEMTAG.search(low) or low in _CONCEPTS:
        return True
    inner = _EN_RX.search(low) or _ZH_RX.search(item)
    if inner and strict:
        return False
    if inner and not _CLAUSE_WORDS.search(low):
        return True
    # short noun phrases only; a clause is not a problem name (the lexicon then finds the term inside)
    words = low.split()
    return 0 < len(words) <= 4 and not _CLAUSE_WORDS.search(low)


_CLAUSE_WORDS = re.compile(r"\b(the|was|were|is|are|has|had|to|on|at|in|by|this|that|patient|morning|today|yesterday|"
                           r"night|home|since|after|before|from|until|during)\b|(?<![A-Za-z0-9-])\d")


def _add_item(text: str, col: _Collector, a: int, b: int, default: str, source: str) -> None:
    item = text[a:b]
    if not item.strip() or _NON_ENTITY_ITEMS.match(item.strip()):
        return
    typ, can = _item_type(item, default)
    if typ in ("problem", "symptom") and _NORMAL_ITEM.search(item.strip()[:12]):
        return
    norm: dict = {}
    if typ == "medication":
        norm = _med_details(text, a, b)
        can = norm.get("drug", can)
    col.add(typ, a, b, source, can, norm)


def _section_items(text: str, col: _Collector, sections: list[Section]) -> None:
    for sec in sections:
        default = _SECTION_ITEM_TYPE.get(sec.key)
        if default is None or sec.body_end <= sec.body_start:
            continue
        body = text[sec.body_start:sec.body_end]
        if default == "symptom":
            continue  # chief complaints are free text: the lexicon handles them
        if default == "medication" and _prose_med_list(text, col, sec.body_start, sec.body_end):
            continue
        lines = [(sec.body_start + m.start(), sec.body_start + m.end()) for m in re.finditer(r"[^\n]+", body)]
        for ls, le in lines:
            a, b = _clean_item(text, ls, le)
            if b <= a:
                continue
            seg = text[a:b]
            if default == "medication":
                if len(seg) > 200:
                    continue
                if ";" in seg or len(_DRUG_RX.findall(seg)) >= 2 or len(_DOSE.findall(seg)) >= 2 and re.search(r",\s*[A-Za-z]", seg):
                    parts = _split_items(text, a, b, commas=";" not in seg)  # "metformin 1000 mg BID, amlodipine 5 mg daily"
                else:
                    parts = [(a, b)]
                for pa, pb in parts:
                    if _NON_ENTITY_ITEMS.match(text[pa:pb].strip()):
                        continue
                    if _DRUG_RX.search(text[pa:pb]) or _DOSE.search(text[pa:pb]):
                        # one drug per item: trim after the first sentence end
                        stop = re.search(r"\.\s+[A-Z]", text[pa:pb])
                        pe = pa + stop.start() if stop else pb
                        _add_item(text, col, pa, pe, "medication", "section_item")
            elif default in ("problem", "procedure"):
                if len(seg) > 120 or len(seg.split()) > 14:
                    continue
                if sec.key == "past_history" and not _list_like(seg):
                    continue  # prose: list triggers ("history of") and the lexicon handle it
                items = _split_items(text, a, b, commas=sec.key == "past_history")
                for pa, pb in items:
                    if pb - pa < 2 or _NON_ENTITY_ITEMS.match(text[pa:pb].strip()):
                        continue
                    if any(t.category in (context.NEGATED, context.POSSIBLE, context.FAMILY)
                           for t in context.find_triggers(col.doc, pa, pb)):
                        continue  # "否认糖尿病史", "r/o sepsis": the lexicon finds the term, ConText its assertion
                    if sec.key == "past_history" and not _plausible_problem(text[pa:pb]):
                        continue
                    _add_item(text, col, pa, pb, default, "section_item")


_MED_LEAD_IN = re.compile(r"^[^,.;:\n]*?\b(?:include|includes|including|are|is on|takes|taking|consist of|as follows)\b\s*:?\s*", re.I)
_MED_ITEM_NOISE = re.compile(r"\b(?:chart|listed|see|reviewed|unknown|none|noted|per|list|dispense[ds]?|refills?|tablets?|capsules?)\b", re.I)


def _prose_med_list(text: str, col: _Collector, s: int, e: int) -> bool:
    """A medication section written as one wrapped sentence ("Listed in the chart and include
    Coumadin, Lasix, metformin,\nfolic acid, diltiazem, B12, Prevacid, and Feosol."): each comma or
    'and' item of at most four words is a medication, known to the lexicon or not. False when the
    section is not such a sentence (bullets, numbered lines, one drug per line)."""
    body = text[s:e]
    if body.count(",") < 2 or re.search(r"(?m)^\s*(?:[-*•]|\d{1,2}[.)])", body) or len(body) > 600:
        return False
    end = body.find(".\n")
    end = len(body.rstrip()) if end < 0 else end
    a = s + (m.end() if (m := _MED_LEAD_IN.match(body[:end])) else 0)
    b = s + end
    for pa, pb in _split_items(text, a, b):
        pa, pb = _clean_item(text, pa, pb)
        item = text[pa:pb]
        if pb <= pa or len(item.split()) > 4 or _NON_ENTITY_ITEMS.match(item.strip()) or _MED_ITEM_NOISE.search(item):
            continue
        norm = _med_details(text, pa, pb)
        col.add("medication", pa, pb, "section_item", norm.get("drug", item.lower()), norm)
    return True


def _list_like(line: str) -> bool:
    """A problem-list line ("HTN, DM2, CKD stage 3", "1. 高血压 2. 糖尿病"), not a sentence of prose."""
    if len(line) > 90:
        return False
    parts = [p.strip() for p in re.split(r"[,;，；、]|\.\s|\s\d{1,2}[.、)]\s*", line) if p.strip()]
    return all(len(p.split()) <= 5 and not _CLAUSE_WORDS.search(p.lower()) for p in parts)


class _End:
    """A drug-name match read up to a later end (a combination product's last component)."""

    def __init__(self, m: re.Match, end: int):
        self._m, self._end = m, end

    def start(self) -> int:
        return self._m.start()

    def end(self) -> int:
        return self._end

    def group(self, i: int = 0) -> str:
        return self._m.group(i)


def _medications(text: str, col: _Collector) -> None:
    for m in _DRUG_RX.finditer(text):
        s = m.start()
        # a combination product: "amoxicillin/clavulanate", "piperacillin-tazobactam", "哌拉西林他唑巴坦"
        parts = [m.group(1).lower()]
        m_end = m.end()
        while (j := re.match(r"\s*(?:/|-|\+)\s*|", text[m_end:])) is not None and (
                n2 := _DRUG_RX.match(text, m_end + j.end())) is not None and (j.end() or not m.group(1).isascii()):
            parts.append(n2.group(1).lower())
            m_end = n2.end()
        m = _End(m, m_end)
        # extend over dose, route, frequency on the same line (at most ~60 chars)
        par_end = text.find("\n\n", m.end())
        par_end = len(text) if par_end < 0 else par_end
        window = text[m.end():min(par_end, m.end() + 70)]
        nl = window.find("\n")
        if nl >= 0 and not re.match(r"\n[ \t]*[a-z0-9]", window[nl:]):
            window = window[:nl]  # the next line is a new item, not a wrapped continuation
        stop = re.search(r"[.;,，。；](?!\d)|\b(?:and|after|then|for|with|via|was|were|is|changed|switched|to|because|due|"
                         r"stopped|discontinued|and)\b|改为|换为|停用|由|共", window)
        nxt = _DRUG_RX.search(window)
        if nxt and nxt.start() > 0 and (stop is None or nxt.start() < stop.start()) and not text[m.end():m.end() + nxt.start()].strip() == "":
            window = window[:nxt.start()]
        seg_end = m.end() + (stop.start() if stop else len(window))
        e = m.end()
        for rx in (_DOSE, _ROUTE_RX, _FREQ_RX):
            for mm in rx.finditer(text, m.end(), seg_end):
                e = max(e, mm.end())
        while e > s and text[e - 1].isspace():
            e -= 1
        before = re.search(r"(?:(?<![A-Za-z])(?:IV|PO|IM|SC|iv|po)\s+|口服|静滴|静脉滴注|静推|肌注|皮下注射)$", text[max(0, s - 6):s])
        if before:
            s -= len(before.group(0))
        norm = _med_details(text, s, e)
        if len(parts) > 1:
            norm["drug"] = "/".join(parts)
            norm["components"] = parts
        col.add("medication", s, e, "medication", norm.get("drug", m.group(1).lower()), norm)


_FORM = r"(?:tablets?|tabs?|capsules?|caps?|injection|solution|suspension|syrup|patch|cream|ointment|inhaler|spray|drops|suppository|片|胶囊|注射液)"
# a drug name the lexicon does not hold, known by its pattern: a capitalised brand or a generic-looking word,
# a strength, then a dose form, a route or a frequency ("Eliquis 5 mg tablet PO BID", "apixaban 5 mg twice daily")
_DRUG_PATTERN = re.compile(
    r"(?<![\w/-])(?P<name>[A-Z][a-z]{3,}|[a-z]{4,}(?:pril|sartan|olol|statin|azole|mycin|cillin|floxacin|dipine|tidine|"
    r"prazole|parin|xaban|gatran|gliptin|gliflozin|mab|nib|semide|thiazide|cycline|vir|done|pam|lam|zepam|tropin))"
    r"\s+(?P<dose>\d+(?:\.\d+)?(?:/\d+(?:\.\d+)?)?)\s*(?P<unit>mg|mcg|µg|ug|units?|IU|mL|g)(?![A-Za-z])")
_NOT_DRUG_WORDS = {"dose", "doses", "total", "about", "over", "with", "daily", "given", "take", "takes", "taking", "then",
                   "than", "were", "was", "weight", "weighs", "increase", "increased", "decrease", "decreased", "reduce",
                   "reduced", "received", "start", "started", "bolus", "load", "loading", "change", "changed", "held",
                   "hold", "each", "every", "once", "twice", "patient", "protein", "sodium", "potassium", "glucose"}


def _drug_patterns(text: str, col: _Collector) -> None:
    for m in _DRUG_PATTERN.finditer(text):
        name = m.group("name")
        if name.lower() in _NOT_DRUG_WORDS or name.lower() in LAB_NAMES or name.lower() in VITAL_NAMES:
            continue
        tail = text[m.end():m.end() + 40].split("\n")[0]
        if not (re.match(r"\s*" + _FORM, tail, re.I) or _ROUTE_RX.match(tail.lstrip()) or _FREQ_RX.match(tail.lstrip())):
            continue
        e = m.end()
        stop = re.search(r"[.;,，。；](?!\d)", tail)
        seg_end = m.end() + (stop.start() if stop else len(tail))
        for rx in (re.compile(_FORM, re.I), _ROUTE_RX, _FREQ_RX):
            for mm in rx.finditer(text, m.end(), seg_end):
                e = max(e, mm.end())
        norm = _med_details(text, m.start(), e)
        norm["drug"] = name.lower()
        col.add("medication", m.start(), e, "pattern", name.lower(), norm)


_DOSE_AFTER = re.compile(r"[ \t]*(?:mg|mcg|g|meq|units?|tablets?|capsules?)(?![A-Za-z/])(?!\s*/)", re.I)
# a capitalised name right after a route: "IV Lasix", "IV Flagyl", "p.o. Keflex" (brand names the lexicon lacks)
_ROUTE_NAME = re.compile(r"(?<![A-Za-z])(?:IV|I\.V\.|PO|p\.o\.|IM|SQ|SC|intravenous|oral)[ \t]+"
                         r"(?P<name>[A-Z][a-z]{3,}(?:-[A-Z]?[a-z]+)?)(?![\w-])")
_NOT_DRUG_NAMES = {"fluids", "fluid", "antibiotics", "antibiotic", "access", "contrast", "hydration", "dye", "line",
                   "lines", "team", "therapy", "medications", "medication", "meds", "pain", "narcotics", "steroids",
                   "diet", "intake", "push", "drip", "infusion", "site", "placement", "started", "given", "the", "and",
                   "with", "his", "her", "their", "this", "that", "was", "were", "also", "then", "daily", "prn",
                   "other", "home", "dose", "doses", "each", "every", "some", "many", "several", "oxygen"}


def _drug_like(word: str) -> bool:
    """A word that may name a drug in a list of drugs: not a common word, a measurement or a known
    concept of another type."""
    low = word.lower()
    if low in _NOT_DRUG_NAMES or low in _NOT_DRUG_WORDS or low in LAB_NAMES or low in VITAL_NAMES:
        return False
    if low in _CONCEPTS and _CONCEPTS[low][0] != "medication":
        return False
    return not _CLAUSE_WORDS.search(low)


def _route_names(text: str, col: _Collector) -> None:
    for m in _ROUTE_NAME.finditer(text):
        name = m.group("name")
        if not _drug_like(name):
            continue
        norm = _med_details(text, m.start(), m.end())
        norm["drug"] = name.lower()
        col.add("medication", m.start(), m.end(), "route_name", name.lower(), norm)


_LIST_SEP = r"(?:,[ \t\n]*(?:and[ \t\n]+|or[ \t\n]+)?|[ \t\n]+(?:and|or)[ \t\n]+)"
_LIST_WORD = r"[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)?"
_LEFT_ITEM = re.compile(rf"(?<![\w-])(?P<item>{_LIST_WORD}){_LIST_SEP}$")
_RIGHT_ITEM = re.compile(rf"{_LIST_SEP}(?P<item>{_LIST_WORD})(?=[ \t\n]*(?:[,.;:)]|and\b|or\b|$))")


def _coordinated_drugs(text: str, col: _Collector) -> None:
    """The other members of a list that holds a known drug ("placed on Prinivil, aspirin,
    oxybutynin, docusate, and Klor-Con"; "a prescription for Percocet and OxyContin") are drugs too
    when they are single drug-like words; a two-member list needs a capitalised (brand) name."""
    meds = [m for m in col.items if m.type == "medication" and m.source in ("medication", "pattern", "route_name")]
    for med in meds:
        name_end = med.start + len(med.canonical) if text[med.start:med.end].lower().startswith(med.canonical) else med.end
        if name_end != med.end:
            continue  # "doxycycline 100 mg p.o.": its own dose follows, not a list
        found: list[tuple[int, int]] = []
        pos = med.start
        while (m := _LEFT_ITEM.search(text, max(0, pos - 60), pos)) is not None and m.end() == pos:
            found.insert(0, m.span("item"))
            pos = m.start("item")
        pos = med.end
        while (m := _RIGHT_ITEM.match(text, pos)) is not None:
            found.append(m.span("item"))
            pos = m.end("item")
        if not found:
            continue
        for a, b in found:
            word = text[a:b]
            if not _drug_like(word) or (len(found) == 1 and not word[0].isupper()) or word.isupper() and len(word) <= 3:
                continue
            norm = _med_details(text, a, b)
            norm["drug"] = word.lower()
            col.add("medication", a, b, "coordination", word.lower(), norm)


def _lexicon(text: str, col: _Collector) -> None:
    for m in _EN_RX.finditer(text):
        s, e = m.start(), m.end()
        if not word_boundary_ok(text, s, e):
            continue
        key = m.group(1).lower()
        typ, can = _EN_CONCEPTS[key]
        if key.isupper() or len(key) <= 3:
            if text[s:e] != text[s:e].upper() and key not in ("sob",):
                continue  # short abbreviations only in capitals ("PE", "CAD", not "pe", "cad")
        mod = _EN_MODIFIERS.search(text[max(0, s - 60):s])
        if mod and typ == "problem":
            s = s - (len(text[max(0, s - 60):s]) - mod.start())
        col.add(typ, s, e, "lexicon", can)
    for m in _ZH_RX.finditer(text):
        s, e = m.start(), m.end()
        typ, can = _ZH_CONCEPTS[m.group(0)]
        col.add(typ, s, e, "lexicon", can)
    for run in HAN_RUN_RE.finditer(text):
        # split the run at stop characters; the phrase ends at its last disease suffix
        pos = run.start()
        for piece in re.split(r"([" + re.escape("".join(sorted(_ZH_LEFT_STOP))) + r"])", run.group(0)):
            a, b = pos, pos + len(piece)
            pos = b
            if len(piece) < 2 or piece in _ZH_LEFT_STOP:
                continue
            last = None
            for sm in _ZH_DISEASE_SUFFIX.finditer(piece):
                last = sm
            if last is None:
                continue
            e = a + last.end()
            s = max(a, e - 10)
            inner_trig = [t for t in context.find_triggers(col.doc, s, e) if t.cjk]
            if inner_trig:
                s = max(s, max(t.end for t in inner_trig))  # "不除外胆总管结石": the trigger is not part of the name
            if e - s < 2:
                continue
            overl = [x for x in col.items if x.start < e and s < x.end]
            if overl and not all(x.source == "lexicon" and s <= x.start and x.end <= e for x in overl):
                continue
            inner = [x for x in overl if x.type == "problem"]
            for x in overl:
                col.remove(x)
            can = max(inner, key=lambda x: x.end - x.start).canonical if inner else text[s:e]
            col.add("problem", s, e, "lexicon", can)


# English disorder and finding words by their form: "venostasis", "ischemia", "organomegaly",
# "cholangiopathy", "dysuria"; and finding head nouns ("left atrial enlargement", "mitral
# regurgitation", "diastolic dysfunction")
_MORPH = re.compile(r"(?<![\w-])(?P<word>[A-Za-z]{3,}(?:itis|osis|oses|emia|aemia|megaly|pathy|algia|uria|rrhea|rrhoea|"
                    r"penia|cytosis|plasia|trophy|ectasis|stasis|spasms?|spams?)|(?:[Rr]egurgitation|[Ee]nlargement|"
                    r"[Dd]ysfunction|[Ii]nsufficiency|[Ii]nfarcts?|[Ee]mboli|[Tt]hromboses|[Oo]rganomegaly))(?![\w-])")
_MORPH_NOT = re.compile(r"^(?:diagnosis|diagnoses|prognosis|hypothesis|basis|emphasis|thesis|synthesis|analysis|"
                        r"dialysis|hemostasis|haemostasis|homeostasis|anastomosis|anastomoses|osmosis|symbiosis|"
                        r"mitosis|meiosis|apoptosis|necrosis|kyphosis|lordosis|isis|proteinuria|hematuria|"
                        r"normokalemia|normocalcemia|normoglycemia|euvolemia|euthyroid|trophy|atrophy|hypertrophy)$", re.I)
_MORPH_KEEP = {"necrosis", "atrophy", "hypertrophy", "proteinuria", "hematuria", "kyphosis", "lordosis"}


def _morphology(text: str, col: _Collector) -> None:
    for m in _MORPH.finditer(text):
        word = m.group("word")
        low = word.lower()
        if _MORPH_NOT.match(low) and low not in _MORPH_KEEP:
            continue
        if low in _CONCEPTS or (word.isupper() and len(word) < 6):
            continue  # the lexicon has it (and decided)
        s, e = m.start(), m.end()
        mod = _EN_MODIFIERS.search(text[max(0, s - 60):s])
        if mod:
            s = s - (len(text[max(0, s - 60):s]) - mod.start())
        col.add("problem", s, e, "morphology", low)


def extract(doc: Document, sections: list[Section], sents: list[Span] | None = None) -> list[Mention]:
    """All entity mentions of one document, with sections, sentences and assertions."""
    text = doc.text
    sents = sents if sents is not None else sentences(doc)
    col = _Collector(doc)
    for meas in find_vitals(doc):
        if col.add("vital", meas.span.start, meas.span.end, "vital", meas.analyte, meas.normalized()):
            col.items[-1].row_time = meas.row_time
    for meas in find_labs(doc):
        if _DOSE_AFTER.match(text, meas.span.end):
            continue  # "potassium chloride 10 mEq daily": a dose, not a result
        if col.add("lab", meas.span.start, meas.span.end, "lab", meas.analyte, meas.normalized()):
            col.items[-1].row_time = meas.row_time
    _list_slots(text, col, sents, sections)
    _section_items(text, col, sections)
    _medications(text, col)
    _drug_patterns(text, col)
    _route_names(text, col)
    _coordinated_drugs(text, col)
    _lexicon(text, col)
    _morphology(text, col)
    out = sorted(col.items, key=lambda m: (m.start, m.end))
    trig_cache: dict[tuple[int, int], list] = {}
    for m in out:
        sec = section_at(sections, m.start)
        m.section = sec.key if sec else None
        sent = find_sentence(sents, m.start)
        if sent:
            m.sentence = sent
            key = (sent.start, sent.end)
            if key not in trig_cache:
                trig_cache[key] = context.find_triggers(doc, sent.start, sent.end)
            if m.type in ("lab", "vital"):
                m.assertion = context.PRESENT
                continue
            others = [(o.start, o.end) for o in out if o is not m and o.start < sent.end and o.end > sent.start]
            trigs = [t for t in trig_cache[key] if not any(a <= t.start and t.end <= b for a, b in others)]
            m.assertion, trig = context.assert_span(text, m.start, m.end, trigs, m.section)
            if trig:
                m.trigger = trig
            if (m.type == "procedure" and trig is not None and m.assertion == context.NEGATED and trig.start >= m.end
                    and "negative" in text[trig.start:trig.end].lower()):
                # "X-ray is negative for osteomyelitis": the test was done; its result is negative
                m.assertion = context.PRESENT
                m.normalized = {**m.normalized, "result": "negative"}
            elif (m.type == "procedure" and trig is not None and m.assertion == context.NEGATED and trig.end <= m.start
                    and re.search(r"\b(?:on|by|per|at|via|from)\s+(?:the\s+|a\s+|repeat\s+)?$", text[max(0, m.start - 20):m.start], re.I)):
                # "no evidence of abscess on CT": the CT was done; what it showed is negated
                m.assertion = context.PRESENT
                m.normalized = {**m.normalized, "result": "negative"}
        else:
            m.sentence = m.span
        if m.type == "medication" and m.section in ("allergies",):
            m.type = "problem"
            m.normalized = {"allergen": m.canonical}
            m.canonical = f"allergy: {m.canonical}"
    return out
