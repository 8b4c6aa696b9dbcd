"""Material-change flags inside an aligned pair of clauses.

Kinds: `amount` (money, with its currency), `percentage`, `date`, `duration`, `number` (any other
figure that changed), `obligation` (shall -> may, 应当 -> 可以), `negation` (not/no/不/未 added or
removed), `disclaimer` (a disclaimer or limitation of liability deleted or added), `defined_term`
(a party or defined term swapped in a replaced phrase; a word capitalised into a defined term,
reported but not material), `party` (a company name changed), `cross_reference` (targets changed;
a reference that only follows a renumbering is reported but not material), `definition_changed`
(the clause uses a term whose definition changed), `standard` (changed words name a measure or
basis of calculation: income, expenditure, wage, rate, fee, standard, 收入, 支出, 标准 …),
`wording` (words changed that no other flag explains; not capitalisation, spacing or punctuation).
Word flags compare only the words of one changed op (aligned positions) and quote or name them.

Values are compared as multisets of normalised values (1,000 == 1000, 十二 == 12, 10% == 百分之十),
so a figure that moved inside the clause is not a change, and every figure that did change is.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from pipelines.contracts.redline import Op
from pipelines.contracts.structure import Clause
from pipelines.text.entities import MONTH
from pipelines.text.numerals import CN_NUMERAL_CHARS, chinese_to_int
from pipelines.text.script import HAN, to_halfwidth

CNN = f"[{CN_NUMERAL_CHARS}]"
NUM = r"\d[\d,]*(?:\.\d+)?"
WORDNUM = (r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|forty-five|"
           r"fifty|sixty|ninety|hundred|a|an)")
MONTHS = MONTH + r"\.?"

PATTERNS: list[tuple[str, re.Pattern]] = [
    ("date", re.compile(
        rf"\b{MONTHS}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{MONTHS},?\s+\d{{4}}\b|"
        rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}/\d{{1,2}}/\d{{2,4}}\b|(?:\d{{4}}|{CNN}{{4}})\s*年\s*(?:\d{{1,2}}|{CNN}{{1,3}})\s*月"
        rf"(?:\s*(?:\d{{1,2}}|{CNN}{{1,3}})\s*[日号])?")),
    ("amount", re.compile(
        rf"(?:US\$|USD|U\.S\.\s*\$|HK\$|\$|€|EUR|£|GBP|¥|JPY|RMB|CNY|人民币)\s?{NUM}(?:\s?(?:million|billion|thousand|万|亿))?|"
        rf"{NUM}\s?(?:million|billion|thousand)?\s?(?:dollars|euros|pounds|USD|EUR|GBP|RMB|CNY)\b|"
        rf"(?:人民币\s?)?(?:{NUM}|{CNN}+)\s?(?:万|亿)?元|(?:{NUM}|{CNN}+)\s?(?:万|亿)?美元")),
    ("percentage", re.compile(rf"{NUM}\s?(?:%|％|percent\b|per cent\b)|百分之\s?(?:{NUM}|{CNN}+)")),
    ("duration", re.compile(
        rf"\b(?:{NUM}|{WORDNUM})(?:\s*\(\d+\))?[\s-]+(?:business\s+|calendar\s+|working\s+)?"
        rf"(?:days?|weeks?|months?|years?|hours?|minutes?)\b|"
        rf"(?:{NUM}|{CNN}+)\s*(?:个)?(?:工作日|日|天|周岁|周|星期|个月|月|年|小时)")),
    ("number", re.compile(rf"(?<![\w.]){NUM}(?![\w])|(?<!第)(?<!{CNN}){CNN}{{2,}}(?![条款项章节编{CN_NUMERAL_CHARS}])")),
]

OBLIGATION_EN = re.compile(
    r"\b(shall|must|will|may(?!\s+\d)|should|can|could|might|is required to|are required to|agrees? to|is entitled to|"
    r"are entitled to|has the right to|have the right to|is obligated to|are obligated to)\b", re.I)
OBLIGATION_ZH = re.compile(r"(应当|必须|须|应|可以|可|有权|无权|不得|禁止|得|允许|负责)")
NEGATION_EN = re.compile(r"\b(not|no|never|neither|nor|without|none|cannot|n't|unless|except)\b", re.I)
NEGATION_ZH = re.compile(r"(不|未|无|非|没有|否)")
STRENGTH = {"must": 3, "shall": 3, "is required to": 3, "are required to": 3, "is obligated to": 3, "are obligated to": 3,
            "agrees to": 2, "agree to": 2, "will": 2, "should": 1, "may": 0, "can": 0, "could": 0, "might": 0,
            "is entitled to": 0, "are entitled to": 0, "has the right to": 0, "have the right to": 0,
            "必须": 3, "须": 3, "应当": 3, "应": 3, "负责": 2, "可以": 0, "可": 0, "有权": 0, "得": 0, "允许": 0,
            "不得": -3, "禁止": -3, "无权": -3}
PARTY_WORDS = re.compile(
    r"\b(Customer|Provider|Supplier|Vendor|Licensor|Licensee|Buyer|Seller|Purchaser|Company|Contractor|Client|Lender|"
    r"Borrower|Landlord|Tenant|Employer|Employee|Discloser|Recipient|Disclosing Party|Receiving Party)\b|(甲方|乙方|丙方|出租人|承租人|买方|卖方|委托人|受托人|贷款人|借款人)")


MEASURE_EN = re.compile(
    r"\b(?:standards?|rates?|index|indices|benchmarks?|averages?|incomes?|wages?|salary|salaries|prices?|fees?|"
    r"costs?|expenditures?|thresholds?|caps?)\b", re.I)
MEASURE_ZH = re.compile(r"标准|收入|支出|工资|价格|费用|利率|利息|指数|基数|比例|费率|税率|金额|赔偿金|数额")


COMPANY = re.compile(
    r"\b[A-Z][\w&'.-]*(?:\s+(?:[A-Z][\w&'.-]*|&|of|and|de))*,?\s+(?:Inc\.|Incorporated|Ltd\.?|Limited|LLC|L\.L\.C\.|"
    r"LLP|Corp\.?|Corporation|GmbH|AG|S\.A\.|SAS|B\.V\.|N\.V\.|PLC|plc|Pty Ltd)|"
    rf"(?:^|(?<=[为与和及、，,：:（(\s“\"]))(?:(?![为与和及是由在向的])[{HAN}]){{2,30}}?(?:股份有限公司|有限责任公司|有限公司|合伙企业|集团公司|集团)")


@dataclass
class RawFlag:
    """A flag before export: its ranges in version A's and version B's text (two documents, so
    offset pairs rather than one `Span`), what changed, and whether it is material."""

    kind: str
    a: tuple[int, int] | None
    b: tuple[int, int] | None
    detail: str
    material: bool = True


def _value(kind: str, s: str) -> str:
    t = to_halfwidth(s).lower()
    t = re.sub(r"\s+", " ", t).replace(",", "")
    for m in re.finditer(f"{CNN}+", t):
        v = chinese_to_int(m.group(0))
        if v is not None:
            t = t.replace(m.group(0), str(v), 1)
    t = re.sub(r"百分之\s?([\d.]+)", r"\1%", t).replace("per cent", "%").replace("percent", "%").replace(" %", "%")
    return t.strip()


def extract(text: str, start: int, end: int) -> list[tuple[str, str, int, int]]:
    """(kind, normalised value, start, end) of every figure in text[start:end], longest kinds first."""
    seg = text[start:end]
    taken: list[tuple[int, int]] = []
    out = []
    for kind, rx in PATTERNS:
        for m in rx.finditer(to_halfwidth(seg)):
            s, e = m.start(), m.end()
            if any(s < te and ts < e for ts, te in taken):
                continue
            taken.append((s, e))
            out.append((kind, _value(kind, m.group(0)), start + s, start + e))
    return sorted(out, key=lambda x: x[2])


def _changed_ranges(ops: list[Op]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    ca = [(o.a_start, o.a_end) for o in ops if o.op in {"replace", "delete", "insert"}]
    cb = [(o.b_start, o.b_end) for o in ops if o.op in {"replace", "delete", "insert"}]
    return ca, cb


def _touches(s: int, e: int, ranges: list[tuple[int, int]]) -> bool:
    return any(s < re_ and rs < e or (rs == re_ and s <= rs <= e) for rs, re_ in ranges)


def _excluded(c: Clause) -> list[tuple[int, int]]:
    """The clause's own number label and its cross-references: figures there are not amounts."""
    out = [(x.start, x.end) for x in c.xrefs]
    if c.label_start is not None:
        out.append((c.label_start, c.label_end))
    return out


def _figures(text: str, clauses: list[Clause]) -> list[tuple[str, str, int, int]]:
    out = []
    for c in clauses:
        ex = _excluded(c)
        out += [f for f in extract(text, c.start, c.end) if not any(f[2] < e and s < f[3] for s, e in ex)]
    return out


def figure_flags(text_a: str, ca: Clause | list[Clause], text_b: str, cb: Clause | list[Clause]) -> list[RawFlag]:
    """Figures whose value changed; for a split or merge, the clauses of each side are pooled."""
    fa = _figures(text_a, ca if isinstance(ca, list) else [ca])
    fb = _figures(text_b, cb if isinstance(cb, list) else [cb])
    flags = []
    for kind in ("amount", "percentage", "date", "duration", "number"):
        va = [f for f in fa if f[0] == kind]
        vb = [f for f in fb if f[0] == kind]
        ca_, cb_ = Counter(f[1] for f in va), Counter(f[1] for f in vb)
        # the surplus occurrences on each side, in text order
        surplus_a = ca_ - cb_
        surplus_b = cb_ - ca_
        gone, new = [], []
        for f in va:
            if surplus_a[f[1]] > 0:
                gone.append(f)
                surplus_a[f[1]] -= 1
        for f in vb:
            if surplus_b[f[1]] > 0:
                new.append(f)
                surplus_b[f[1]] -= 1
        for k in range(max(len(gone), len(new))):
            g = gone[k] if k < len(gone) else None
            n = new[k] if k < len(new) else None
            detail = f"{text_a[g[2]:g[3]] if g else '—'} → {text_b[n[2]:n[3]] if n else '—'}"
            flags.append(RawFlag(kind, (g[2], g[3]) if g else None, (n[2], n[3]) if n else None, detail))
    return flags


CHANGED_OPS = {"replace", "insert", "delete"}
DISCLAIMER_EN = re.compile(
    r"\b(?:(?:is|are|will|shall)\s+not\s+(?:be\s+)?(?:liable|responsible)|no\s+(?:liability|responsibility)|"
    r"disclaims?|as\s+is|without\s+warrant(?:y|ies)|makes?\s+no\s+warrant(?:y|ies)|"
    r"at\s+your\s+(?:own\s+|sole\s+)?risk)\b", re.I)
DISCLAIMER_ZH = re.compile(r"不承担[^。；;]{0,12}责任|不负[^。；;]{0,6}责任|免除[^。；;]{0,8}责任|免责|概不负责")
SENTENCE_END = re.compile(r"[.。!?！？\n]")


def _by_op(occ: list[tuple[str, int, int]], ops: list[Op], side: str) -> dict[int, list[tuple[str, int, int]]]:
    """Occurrences grouped by the changed op they touch on `side` ("a" or "b"), each in one op only."""
    out: dict[int, list[tuple[str, int, int]]] = {}
    for x in occ:
        for k, o in enumerate(ops):
            s, e = (o.a_start, o.a_end) if side == "a" else (o.b_start, o.b_end)
            if o.op in CHANGED_OPS and s < e and x[1] < e and s < x[2]:
                out.setdefault(k, []).append(x)
                break
    return out


def _sentence(text: str, s: int, e: int, lo: int, hi: int) -> tuple[int, int]:
    """The sentence around text[s:e], kept inside [lo, hi)."""
    left = max((m.end() for m in SENTENCE_END.finditer(text, lo, s)), default=lo)
    m = SENTENCE_END.search(text, e, hi)
    right = m.end() if m else hi
    while left < right and text[left].isspace():
        left += 1
    return left, right


def _disclaimers(text_a: str, text_b: str, ops: list[Op], lang: str) -> tuple[list[RawFlag], list[tuple[int, int]]]:
    """A disclaimer or limitation of liability removed (or added) by a changed op: a `disclaimer`
    flag "deleted “…”" (read "disclaimer: deleted …") quoting its sentence; also the sentences' ranges in A and B, whose negations it explains."""
    rx = DISCLAIMER_ZH if lang == "zh" else DISCLAIMER_EN
    flags: list[RawFlag] = []
    covered: list[tuple[int, int]] = []
    for o in ops:
        if o.op not in CHANGED_OPS:
            continue
        old = [m for m in rx.finditer(text_a, o.a_start, o.a_end)] if o.op != "insert" else []
        new = [m for m in rx.finditer(text_b, o.b_start, o.b_end)] if o.op != "delete" else []
        if old and not new:
            s, e = _sentence(text_a, old[0].start(), old[0].end(), o.a_start, o.a_end)
            flags.append(RawFlag("disclaimer", (s, e), None, f"deleted {_quote(text_a[s:e], 90)}"))
            covered += [_sentence(text_a, m.start(), m.end(), o.a_start, o.a_end) for m in old]
        elif new and not old:
            s, e = _sentence(text_b, new[0].start(), new[0].end(), o.b_start, o.b_end)
            flags.append(RawFlag("disclaimer", None, (s, e), f"added {_quote(text_b[s:e], 90)}"))
            covered += [_sentence(text_b, m.start(), m.end(), o.b_start, o.b_end) for m in new]
    return flags, covered


def word_flags(text_a: str, ca: Clause, text_b: str, cb: Clause, ops: list[Op], lang: str,
               terms: set[str]) -> list[RawFlag]:
    """Obligation strength, negation, disclaimers, parties and defined terms in the changed words.

    A flag compares only words of the same changed op (the words at aligned positions) and names
    them: "may → must (stronger)" when one op replaces one with the other, "must → —" when an op
    removes it. Obligation and negation words are reported only when their count in the clause
    changed (a word that merely moved inside the clause is not a change). A removed (added)
    disclaimer is flagged "disclaimer: deleted “…”" ("added"), and the negations inside it are not reported
    again. A defined term swapped for another in a replaced phrase is material; a word capitalised
    into a defined term ("account" → "Account", "accounts" → "Accounts") is reported, not material."""
    flags: list[RawFlag] = []
    obl = OBLIGATION_ZH if lang == "zh" else OBLIGATION_EN
    neg = NEGATION_ZH if lang == "zh" else NEGATION_EN

    def hits(rx, text, clause, fold=True):
        out = []
        for m in rx.finditer(text, clause.start, clause.end):
            out.append((m.group(0).lower() if fold and lang != "zh" else m.group(0), m.start(), m.end()))
        return out

    def per_op(kind, occ_a, occ_b, describe, skip=()):
        na, nb = Counter(x[0] for x in occ_a), Counter(x[0] for x in occ_b)
        if na == nb:
            return
        gone, new = set((na - nb).keys()), set((nb - na).keys())
        outside = [x for x in occ_a + occ_b if not any(x[1] < e and s < x[2] for s, e in skip)]
        ga = _by_op([x for x in occ_a if x in outside and x[0] in gone], ops, "a")
        gb = _by_op([x for x in occ_b if x in outside and x[0] in new], ops, "b")
        for k in sorted(set(ga) | set(gb)):
            g, n = ga.get(k, []), gb.get(k, [])
            flags.append(RawFlag(kind, (g[0][1], g[0][2]) if g else None, (n[0][1], n[0][2]) if n else None,
                                 describe([x[0] for x in g], [x[0] for x in n])))

    def obligation(gone, new):
        sa = max((STRENGTH.get(w, 1) for w in gone), default=None)
        sb = max((STRENGTH.get(w, 1) for w in new), default=None)
        d = "" if sa is None or sb is None else (" (weaker)" if sb < sa else " (stronger)" if sb > sa else "")
        return f"{', '.join(_uniq(gone)) or '—'} → {', '.join(_uniq(new)) or '—'}{d}"

    disclaimers, covered = _disclaimers(text_a, text_b, ops, lang)
    flags += disclaimers
    per_op("obligation", _bound(hits(obl, text_a, ca), text_a, lang), _bound(hits(obl, text_b, cb), text_b, lang),
           obligation)
    per_op("negation", hits(neg, text_a, ca), hits(neg, text_b, cb),
           lambda g, n: "; ".join(([f"added {', '.join(_uniq(n))}"] if n else [])
                                  + ([f"removed {', '.join(_uniq(g))}"] if g else [])), skip=covered)
    flags += _term_flags(text_a, ca, text_b, cb, ops, lang, terms)
    pa, pb = hits(COMPANY, text_a, ca, fold=False), hits(COMPANY, text_b, cb, fold=False)
    na, nb = Counter(x[0] for x in pa), Counter(x[0] for x in pb)
    if na != nb:
        gone, new = sorted((na - nb).keys()), sorted((nb - na).keys())
        ra, rb = _changed_ranges(ops)
        xa = next((x for x in pa if x[0] in gone and _touches(x[1], x[2], ra)), next((x for x in pa if x[0] in gone), None))
        xb = next((x for x in pb if x[0] in new and _touches(x[1], x[2], rb)), next((x for x in pb if x[0] in new), None))
        flags.append(RawFlag("party", (xa[1], xa[2]) if xa else None, (xb[1], xb[2]) if xb else None,
                             f"{', '.join(gone) or '—'} → {', '.join(new) or '—'}"))
    return flags


PERSON_BEFORE = re.compile(r"(?:\b(?:you|we|they|he|she|each|either|neither|party|parties|user|users)|\b[A-Z][\w’'.-]*)\s+$")


def _bound(occ: list[tuple[str, int, int]], text: str, lang: str) -> list[tuple[str, int, int]]:
    """Obligation words that bind someone: "is required to", "has the right to" and the like only
    after a party, a pronoun or a capitalised name ("you are required to", "Customer is entitled
    to"), not after a thing ("when access is required to maintain …")."""
    if lang == "zh":
        return occ
    return [x for x in occ if not x[0].startswith(("is ", "are ", "has ", "have "))
            or PERSON_BEFORE.search(text, max(0, x[1] - 40), x[1])]


def _uniq(words: list[str]) -> list[str]:
    return list(dict.fromkeys(words))


def _term_flags(text_a: str, ca: Clause, text_b: str, cb: Clause, ops: list[Op], lang: str,
                terms: set[str]) -> list[RawFlag]:
    """Defined terms and party words inside replaced phrases: swapped for another (material), or a
    common word capitalised into the defined term, singular and plural alike (one flag per word
    pair, not material)."""
    rxs = [rx for rx in (_term_regex(terms, lang, plural=True), PARTY_WORDS) if rx is not None]
    flags: list[RawFlag] = []
    capitalised: dict[tuple[str, str], list] = {}
    for o in ops:
        if o.op != "replace":
            continue
        old, new = text_a[o.a_start:o.a_end], text_b[o.b_start:o.b_end]
        ta = [(m.group(0), m.start(), m.end()) for rx in rxs for m in rx.finditer(text_a, o.a_start, o.a_end)]
        tb = [(m.group(0), m.start(), m.end()) for rx in rxs for m in rx.finditer(text_b, o.b_start, o.b_end)]
        if Counter(x[0] for x in ta) == Counter(x[0] for x in tb):
            continue
        if old.casefold() == new.casefold() and lang != "zh":
            if tb:
                capitalised.setdefault((old.strip(), new.strip()), []).append(o)
            continue
        gone = sorted((Counter(x[0] for x in ta) - Counter(x[0] for x in tb)).keys())
        added = sorted((Counter(x[0] for x in tb) - Counter(x[0] for x in ta)).keys())
        xa = next((x for x in ta if x[0] in gone), None)
        xb = next((x for x in tb if x[0] in added), None)
        flags.append(RawFlag("defined_term", (xa[1], xa[2]) if xa else None, (xb[1], xb[2]) if xb else None,
                             f"{', '.join(gone) or '—'} → {', '.join(added) or '—'}"))
    for (old, new), occ in capitalised.items():
        o = occ[0]
        times = f" ×{len(occ)}" if len(occ) > 1 else ""
        flags.append(RawFlag("defined_term", (o.a_start, o.a_end), (o.b_start, o.b_end),
                             f"{old} → {new}{times} (capitalised: now the defined term)", material=False))
    return flags


def _quote(text: str, limit: int = 40) -> str:
    t = re.sub(r"\s+", " ", text).strip()
    return f"“{t if len(t) <= limit else t[:limit - 1] + '…'}”"


def standard_flags(text_a: str, text_b: str, ops: list[Op], lang: str) -> list[RawFlag]:
    """A change whose words name a measure or basis of calculation (an income or expenditure
    standard, a rate, a fee): one material flag per changed op, quoting the words removed and added."""
    rx = MEASURE_ZH if lang == "zh" else MEASURE_EN
    flags = []
    for o in ops:
        if o.op not in {"replace", "insert", "delete"}:
            continue
        old = text_a[o.a_start:o.a_end] if o.op != "insert" else ""
        new = text_b[o.b_start:o.b_end] if o.op != "delete" else ""
        if not (rx.search(old) or rx.search(new)):
            continue
        detail = (f"removed {_quote(old)}" if not new.strip() else f"added {_quote(new)}" if not old.strip()
                  else f"{_quote(old)} → {_quote(new)}")
        flags.append(RawFlag("standard", (o.a_start, o.a_end) if old else None, (o.b_start, o.b_end) if new else None,
                             detail))
    return flags


def wording_flag(text_a: str, text_b: str, ops: list[Op], editorial: list[tuple[int, int]]) -> RawFlag | None:
    """A change of words that no other flag explains: one material flag quoting the first changed
    op whose words differ beyond capitalisation, spacing and punctuation; ops inside `editorial`
    ranges of B (references that only follow a renumbering) do not count."""
    def words(t: str) -> str:
        return re.sub(r"[\W_]+", "", t.casefold())

    found = []
    for o in ops:
        if o.op not in CHANGED_OPS or any(s <= o.b_start and o.b_end <= e for s, e in editorial if o.b_end > o.b_start):
            continue
        old = text_a[o.a_start:o.a_end] if o.op != "insert" else ""
        new = text_b[o.b_start:o.b_end] if o.op != "delete" else ""
        if words(old) != words(new):
            found.append((o, old, new))
    if not found:
        return None
    o, old, new = found[0]
    detail = (f"removed {_quote(old)}" if not new.strip() else f"added {_quote(new)}" if not old.strip()
              else f"{_quote(old)} → {_quote(new)}")
    if len(found) > 1:
        detail += f" (+{len(found) - 1} more)"
    return RawFlag("wording", (o.a_start, o.a_end) if old else None, (o.b_start, o.b_end) if new else None, detail)


def _term_regex(terms: set[str], lang: str, plural: bool = False) -> re.Pattern | None:
    good = sorted((t for t in terms if len(t) >= 2), key=len, reverse=True)
    if not good:
        return None
    alt = "|".join(re.escape(t) for t in good)
    tail = "(?:s|es)?" if plural else ""
    return re.compile(alt if lang == "zh" else rf"(?<![\w])(?:{alt}){tail}(?![\w])")


def term_regex(terms: set[str], lang: str) -> re.Pattern | None:
    """A regex finding any of `terms` as whole words (English, case-sensitive) or substrings (Chinese)."""
    return _term_regex(terms, lang)
