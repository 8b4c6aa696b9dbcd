"""Patient identity: what each document says about whose record it is, and documents grouped by
patient.

`read_identity` reads a document's identity evidence, each fact a `Span` of its text: name
("Patient: John Doe", "Name:", "姓名：", a Synthea-style name line before "is a 4 month-old"),
record number (MRN, medical record / case / hospital number, 住院号, 病案号, 病历号), sex ("Sex:",
"性别：", "45-year-old male", "62 yo female", "Ms.", "男，49岁", "男性"), age (years, months, weeks;
"岁") and birth date, and the stay it states (admission and discharge dates).

`disagreements(a, b)` lists why two documents cannot be of one patient: different record numbers
or names (strong keys), different sex, ages that the documents' dates cannot reconcile (dated
documents: the age difference must match the date difference within 1.05 years; undated ones must
state the same age), different birth dates, or stays that overlap without being the same stay.
`group_documents` groups a patient folder's documents: documents sharing a record number or name
are one patient; the others join the one group they agree with, strongest evidence first; a
document without identity evidence joins the only group there is; when there are several it joins
the one group that states its stay (the same admission date, or its date inside the group's
admission-to-discharge interval) and otherwise stands alone (it cannot be attributed). Each group says why it was split from the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date

from pipelines.documents import Document, Span
from pipelines.medical.timex import TimeMention, absolute_date

_HEAD = 1500  # identity is stated near the top; deeper mentions are about others as often as not
_EN_SEX = {"male": "male", "man": "male", "gentleman": "male", "boy": "male", "m": "male", "mr.": "male", "mr": "male",
           "female": "female", "woman": "female", "lady": "female", "girl": "female", "f": "female",
           "ms.": "female", "ms": "female", "mrs.": "female", "mrs": "female", "miss": "female"}
_SEX_WORD = r"(?P<sex>male|female|man|woman|gentleman|lady|boy|girl)"
_AGE_UNIT = {"year": 1.0, "yr": 1.0, "month": 1 / 12, "week": 1 / 52.18, "day": 1 / 365.25}
_AGE_EN = [
    # "a 45-year-old male", "4 month-old non-hispanic white male", "74-year-old woman"
    re.compile(r"(?<![\w.])(?P<age>\d{1,3})[ -](?P<unit>year|yr|month|week|day)s?[ -]old\b(?:[^.\n]{0,40}?\b" + _SEX_WORD + r"\b)?",
               re.I),
    # "62 yo female", "45 y/o M"
    re.compile(r"(?<![\w.])(?P<age>\d{1,3})\s*(?:yo|y/o|y\.o\.)\s*-?\s*(?P<sex>male|female|man|woman|M|F)?\b"),
    # "Age: 45"
    re.compile(r"\bage\s*[:：]\s*(?P<age>\d{1,3})\b", re.I),
]
_AGE_EN_NOT = re.compile(r"\b(?:his|her|their|your|my|whose)\s+(?:[\w,]+\s+){0,2}$|"
                         r"\b(?:mother|father|wife|husband|son|daughter|sister|brother|sibling|child|partner)\b[^.\n]{0,20}$",
                         re.I)
_AGE_ZH = [
    # "男，49岁", "男性，50岁", "男性病儿，3岁", "性别：男  年龄：52岁"
    re.compile(r"(?P<sex>[男女])(?:性)?(?:病儿|患儿|患者|病人)?[，,、\s]*(?:年龄[:：]\s*)?(?P<age>\d{1,3})\s*(?P<unit>岁|个月)"),
    re.compile(r"(?:病人|患者|患儿|病儿|年龄[:：])[，,\s]*(?P<age>\d{1,3})\s*(?P<unit>岁|个月)"),
]
_SEX_LABEL = re.compile(r"(?:\b(?:sex|gender)\s*[:：]\s*(?P<en>male|female|M|F)\b|性别\s*[:：]?\s*(?P<zh>[男女]))", re.I)
_SEX_TITLE = re.compile(r"(?<![\w.])(?P<t>Mr|Ms|Mrs|Miss)\.?\s+[A-Z]")
_SEX_ZH = re.compile(r"(?:青年|中年|老年|成年)?(?P<sex>[男女])性(?!别)")
_NAME = [
    re.compile(r"(?i:\bpatient(?:'s)? name|\bname|\bpatient)\s*[:：]\s*(?P<name>[A-Z][A-Za-z'-]+(?: [A-Z][a-z'-]*\.?(?![\w'-])){0,3})"),
    re.compile(r"姓名\s*[:：]\s*(?P<name>[^\s（(，,:：]{1,10})"),
    re.compile(r"(?m)^[ \t]*(?P<name>[A-Z][a-z]+\d*(?:[ \t]+[A-Z][a-z]+\d*){0,3})[ \t]*\n[ \t]*is an?\s+\d{1,3}[ -](?:year|month|week|day)"),
]
_RECORD = [
    re.compile(r"\b(?:MRN|medical record (?:number|no\.?|#)|record (?:number|no\.?|#)|hospital (?:number|no\.?)|"
               r"patient (?:id|number|no\.?)|case (?:number|no\.?))(?!\w)\s*[:#：]?\s*(?P<rec>[A-Z0-9-]*\d[A-Z0-9-]*)\b", re.I),
    re.compile(r"(?:住院号|病案号|病历号|门诊号|登记号|ID号)\s*[:：]?\s*(?P<rec>[A-Za-z0-9-]*\d[A-Za-z0-9-]*)"),
]
_BIRTH = re.compile(r"(?:\bDOB\b|date of birth|birth ?date|\bborn(?: on)?|出生日期|出生年月)\s*[:：]?\s*", re.I)
_ADMIT = re.compile(r"(?:admission date|date of admission|admit date|admitted on|入院日期|入院时间)\s*[:：]?\s*", re.I)
_DISCH = re.compile(r"(?:discharge date|date of discharge|discharged on|出院日期|出院时间)\s*[:：]?\s*", re.I)


@dataclass
class Fact:
    """One identity fact: its normalised value and the span that states it."""

    value: str
    span: Span


@dataclass
class Identity:
    """What one document says about whose record it is."""

    doc: Document
    date: date | None = None  # the note's date, for reconciling ages
    name: Fact | None = None
    record: Fact | None = None
    sex: Fact | None = None
    age: Fact | None = None  # value: age in years, as a string ("45", "0.333")
    birth: Fact | None = None  # value: ISO date
    admission: Fact | None = None  # value: ISO date
    discharge: Fact | None = None  # value: ISO date

    def facts(self) -> list[tuple[str, Fact]]:
        return [(k, f) for k in ("name", "record", "sex", "age", "birth", "admission", "discharge")
                if (f := getattr(self, k)) is not None]

    def strength(self) -> int:
        """How much this document says: 3 a name or record number, 2 age and sex, 1 one of them, 0 none."""
        if self.name or self.record:
            return 3
        return (self.sex is not None) + (self.age is not None)

    def describe(self) -> str:
        bits = [f"{k} {_show(k, f.value)}" for k, f in self.facts() if k in ("name", "record", "sex", "age", "birth")]
        return ", ".join(bits) if bits else "no identity evidence"


def _show(kind: str, value: str) -> str:
    if kind == "age":
        y = float(value)
        return f"{y:g}" if y >= 2 or y == int(y) else f"{round(y * 12)} months"
    return value


def _norm_name(s: str) -> str:
    s = re.sub(r"\s*[（(][^）)]*[）)]", "", s)
    return re.sub(r"\s+", " ", s).strip().lower()


def _date_after(label: re.Pattern, doc: Document, times: list[TimeMention]) -> Fact | None:
    for m in label.finditer(doc.text):
        t = next((t for t in times if m.end() <= t.start <= m.end() + 3), None)
        d = absolute_date(t) if t is not None and t.value.get("y") else None
        if d is not None:
            return Fact(d.isoformat(), Span(doc, t.start, t.end, label="date"))
    return None


def read_identity(doc: Document, times: list[TimeMention], doc_date: date | None = None) -> Identity:
    """The identity evidence of one document (see the module docstring); `times` are its time
    expressions (`timex.find_times`), `doc_date` the note's date."""
    text = doc.text
    head = text[:_HEAD]
    ident = Identity(doc=doc, date=doc_date)
    for rx in _NAME:
        m = rx.search(head)
        if m and _norm_name(m.group("name")) not in ("", "no", "none", "the"):
            ident.name = Fact(_norm_name(m.group("name")), Span(doc, m.start("name"), m.end("name"), label="name"))
            break
    for rx in _RECORD:
        m = rx.search(head)
        if m:
            ident.record = Fact(m.group("rec").upper(), Span(doc, m.start("rec"), m.end("rec"), label="record"))
            break
    m = _SEX_LABEL.search(head)
    if m:
        g = "en" if m.group("en") else "zh"
        v = m.group(g)
        ident.sex = Fact(_EN_SEX[v.lower()] if g == "en" else ("male" if v == "男" else "female"),
                         Span(doc, m.start(g), m.end(g), label="sex"))
    for rx in _AGE_EN:
        for m in rx.finditer(head):
            if _AGE_EN_NOT.search(head[max(0, m.start() - 30):m.start()]):
                continue  # "her 50-year-old son", "his mother, a 70-year-old" — not the patient's own age
            unit = (m.groupdict().get("unit") or "year").lower()
            years = int(m.group("age")) * _AGE_UNIT.get(unit, 1.0)
            if ident.age is None:
                ident.age = Fact(f"{years:.3f}".rstrip("0").rstrip("."), Span(doc, m.start("age"), m.end("age"), label="age"))
            if ident.sex is None and m.groupdict().get("sex"):
                ident.sex = Fact(_EN_SEX[m.group("sex").lower()], Span(doc, m.start("sex"), m.end("sex"), label="sex"))
            break
        if ident.age is not None:
            break
    for rx in _AGE_ZH:
        if ident.age is not None:
            break
        m = rx.search(head)
        if m:
            years = int(m.group("age")) / (12 if m.group("unit") == "个月" else 1)
            ident.age = Fact(f"{years:.3f}".rstrip("0").rstrip("."), Span(doc, m.start("age"), m.end("age"), label="age"))
            if ident.sex is None and m.groupdict().get("sex"):
                ident.sex = Fact("male" if m.group("sex") == "男" else "female", Span(doc, m.start("sex"), m.end("sex"), label="sex"))
    if ident.sex is None:
        m = _SEX_TITLE.search(head) or _SEX_ZH.search(head[:400])
        if m:
            g = "t" if "t" in m.groupdict() else "sex"
            v = m.group(g)
            ident.sex = Fact(_EN_SEX[v.lower()] if g == "t" else ("male" if v == "男" else "female"),
                             Span(doc, m.start(g), m.end(g), label="sex"))
    ident.birth = _date_after(_BIRTH, doc, times)
    ident.admission = _date_after(_ADMIT, doc, times)
    ident.discharge = _date_after(_DISCH, doc, times)
    return ident


# -------------------------------------------------------------------------------------------------
def _strong_same(a: Identity, b: Identity) -> bool:
    if a.record and b.record:
        return a.record.value == b.record.value
    return bool(a.name and b.name and a.name.value == b.name.value)


def _strong_diff(a: Identity, b: Identity) -> list[str]:
    out = []
    if a.record and b.record and a.record.value != b.record.value:
        out.append(f"record numbers {a.record.value} and {b.record.value}")
    if a.name and b.name and a.name.value != b.name.value and not (a.record and b.record and a.record.value == b.record.value):
        out.append(f"names {a.name.value} and {b.name.value}")
    return out


def _weak_diff(a: Identity, b: Identity) -> list[str]:
    out = []
    if a.sex and b.sex and a.sex.value != b.sex.value:
        out.append(f"sex {a.sex.value} and {b.sex.value}")
    if a.age and b.age:
        ya, yb = float(a.age.value), float(b.age.value)
        if a.date and b.date:
            gap = (b.date - a.date).days / 365.25
            if abs((yb - ya) - gap) > 1.05:
                out.append(f"ages {_show('age', a.age.value)} on {a.date} and {_show('age', b.age.value)} on {b.date}")
        elif abs(ya - yb) > 1e-6:
            out.append(f"ages {_show('age', a.age.value)} and {_show('age', b.age.value)} in undated documents")
    if a.birth and b.birth and a.birth.value != b.birth.value:
        out.append(f"birth dates {a.birth.value} and {b.birth.value}")
    if a.admission and b.admission and a.admission.value != b.admission.value:
        for x, y in ((a, b), (b, a)):
            if x.discharge and x.admission.value < y.admission.value < x.discharge.value:  # type: ignore[union-attr]
                out.append(f"admission on {y.admission.value} during the stay {x.admission.value} to "  # type: ignore[union-attr]
                           f"{x.discharge.value}")
                break
    return out


def disagreements(a: Identity, b: Identity) -> list[str]:
    """Why documents `a` and `b` cannot be of one patient (empty when they can)."""
    return _strong_diff(a, b) + _weak_diff(a, b)


@dataclass
class PatientGroup:
    """Documents of one patient (indices into the list given to `group_documents`) and, when the
    folder held several patients, why this group stands apart."""

    members: list[int]
    reason: str = ""
    identity: list[Identity] = field(default_factory=list)

    def describe(self) -> str:
        facts: dict[str, str] = {}
        for ident in self.identity:
            for k, f in ident.facts():
                if k in ("name", "record", "sex", "age"):
                    facts.setdefault(k, _show(k, f.value))
        return ", ".join(f"{k} {v}" for k, v in facts.items()) or "no identity evidence"


def _claims(group: list[int], docs: list[int], idents: list[Identity]) -> bool:
    """Whether `group` states the stay the documents `docs` belong to: the same admission date, or
    a note date within an admission-to-discharge interval the group states."""
    stays = [(x.admission.value, x.discharge.value if x.discharge else None) for x in (idents[i] for i in group)
             if x.admission is not None]
    admitted = {a for a, _ in stays}
    for i in docs:
        d = idents[i]
        if d.admission is not None and d.admission.value in admitted:
            return True
        day = d.date.isoformat() if d.date else None
        if day and any(a <= day <= b for a, b in stays if b):
            return True
    return False


def group_documents(idents: list[Identity]) -> list[PatientGroup]:
    """Group documents by patient (see the module docstring). Groups are ordered by their first
    document; one group, with an empty reason, when nothing sets the documents apart."""
    n = len(idents)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            if _strong_same(idents[i], idents[j]):
                parent[find(j)] = find(i)
    clusters: dict[int, list[int]] = {}
    for i in range(n):
        clusters.setdefault(find(i), []).append(i)

    def strength(c: list[int]) -> int:
        return max(idents[i].strength() for i in c)

    def conflicts(c: list[int], g: list[int]) -> list[str]:
        return [r for i in c for j in g for r in disagreements(idents[i], idents[j])]

    groups: list[PatientGroup] = []
    unattributed: list[list[int]] = []
    for c in sorted(clusters.values(), key=lambda c: (-strength(c), c[0])):
        if strength(c) == 0:
            unattributed.append(c)
            continue
        fits = [g for g in groups if not conflicts(c, g.members)]
        if len(fits) == 1:
            fits[0].members.extend(c)
            continue
        groups.append(PatientGroup(members=list(c), reason=(
            f"agrees with the documents of {len(fits)} patients and cannot be attributed" if fits else "")))
    if len(groups) <= 1:
        members = sorted(i for g in groups for i in g.members) + [i for c in unattributed for i in c]
        return [PatientGroup(members=sorted(members), identity=[idents[i] for i in sorted(members)])] if members else []
    changed = True
    while changed and unattributed:  # a note of a stay one patient's documents state joins that patient
        changed = False
        for c in list(unattributed):
            claims = [g for g in groups if _claims(g.members, c, idents)]
            if len(claims) == 1:
                claims[0].members.extend(c)
                unattributed.remove(c)
                changed = True
    for c in unattributed:
        groups.append(PatientGroup(members=list(c), reason="no identity evidence, in a folder of several patients"))
    for g in groups:
        g.members.sort()
        g.identity = [idents[i] for i in g.members]
        if not g.reason:
            others = [j for h in groups if h is not g for j in h.members]
            g.reason = "; ".join(list(dict.fromkeys(conflicts(g.members, others)))[:3])
    groups.sort(key=lambda g: g.members[0])
    return groups


def identity_conflicts(idents: list[Identity]) -> list[tuple[str, str, list[Span]]]:
    """Where the documents disagree about the patient: (field, description, the spans that state
    the disagreeing values), one per field (name, record, sex, age, birth, stay)."""
    out: list[tuple[str, str, list[Span]]] = []
    for key in ("record", "name", "sex", "birth"):
        values: dict[str, list[Fact]] = {}
        for ident in idents:
            f = getattr(ident, key)
            if f is not None:
                values.setdefault(f.value, []).append(f)
        if len(values) > 1:
            label = {"record": "record number", "birth": "birth date"}.get(key, key)
            desc = f"the documents state different patient {label}s: " + "; ".join(
                f"{v} in {', '.join(dict.fromkeys(f.span.doc.doc_id for f in fs))}" for v, fs in values.items())
            out.append((key, desc, [f.span for fs in values.values() for f in fs]))
    for key, rx in (("age", re.compile(r"^ages ")), ("stay", re.compile(r"^admission on "))):
        reasons: list[str] = []
        spans: list[Span] = []
        for i, a in enumerate(idents):
            for b in idents[i + 1:]:
                for r in _weak_diff(a, b):
                    if rx.match(r):
                        reasons.append(f"{r} ({a.doc.doc_id}, {b.doc.doc_id})")
                        for x in (a, b):
                            f = x.age if key == "age" else x.admission
                            if f is not None and f.span not in spans:
                                spans.append(f.span)
        if reasons:
            what = "ages the note dates cannot reconcile" if key == "age" else "stays that cannot coexist"
            out.append((key, f"the documents state {what}: " + "; ".join(reasons[:5]), spans))
    return out


def consensus(idents: list[Identity]) -> dict[str, str]:
    """The patient's name, record number, sex and age as the first document stating each says
    (age: of the latest dated statement, in years or months)."""
    out: dict[str, str] = {}
    for key in ("name", "record", "sex"):
        f = next((getattr(x, key) for x in idents if getattr(x, key) is not None), None)
        if f is not None:
            out[key] = f.value
    aged = [x for x in idents if x.age is not None]
    if aged:
        last = max(aged, key=lambda x: (x.date or date.min))
        shown = _show("age", last.age.value)  # type: ignore[union-attr]
        out["age"] = shown if shown.endswith("months") else f"{shown} years"
    return out
