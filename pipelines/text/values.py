"""What kind of value a question asks for, and the values of that kind in a passage.

`question_kind(question)` reads an English or Chinese question with ordered patterns and returns
one of: date, period, money, number, lab, law, claim, party, drug, name, place, or "text" when it
asks for a sentence rather than a value ("What does clause 5 say?", "Why ...?"). The rule whose
match starts first in the question wins ("Which antibiotic was started when ...?" asks for a drug,
"When was the antibiotic started?" for a date); at the same place the one listed first in
`_KIND_RULES` (most specific first).

`value_spans(text, kind)` gives the (start, end) character ranges in `text` of every value of
that kind, by documented, dependency-free patterns on the text (NFKC applied per character, so
offsets stay those of `text`): dates, money, percentages and numbers from
`pipelines.text.entities`; periods ("30 days", "thirty (30) days", "12 months", "3天", "六个月",
"2周"); laws ("the laws of the State of California", "the Data Protection Act 2018", 《民法典》,
"中华人民共和国民法典"); claim references ("claim 3", "claims 1 to 4", "权利要求1"); drug names
(English words ending in a pharmacological stem such as -cillin, -mycin, -azole, -pril, -olol,
-statin, -sartan, -prazole, -floxacin, -zolid, -mab; Chinese names ending in 西林, 霉素, 沙星, 头孢…,
or a product form 片, 胶囊, 注射液); lab values (a number with a unit of measure, "120/80");
parties and names (Title-case names and quoted defined terms of `entities`). What the patterns
miss — a drug with an unusual stem, a lower-case name — has no value span; the passage still
answers.
"""

from __future__ import annotations

import re
import unicodedata

from pipelines.text.entities import extract_entities

KINDS = ("date", "period", "money", "number", "lab", "law", "claim", "party", "drug", "name", "place", "text")

_I = re.IGNORECASE
_KIND_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("claim", re.compile(r"\bwhich claims?\b|\bclaims? (?:does|do|is|are)\b.*\bdepend|\bdepends? on\b|"
                         r"\bindependent claims?\b|哪[些个一]?(?:项)?权利要求|从属于|引用.*权利要求|独立权利要求", _I)),
    ("law", re.compile(r"\b(?:which|what) (?:law|laws|statute|act|regulation|jurisdiction)s?\b|\bgoverning law\b|"
                       r"\bgoverned by\b|\blaws? of which\b|哪(?:部|个|一)?(?:法律|法规)|适用.*法律|依据.*法", _I)),
    ("date", re.compile(r"\bwhen\b|\bwhat (?:date|day|year|month)\b|\bon which (?:date|day)\b|\bdate of\b|"
                        r"\beffective date\b|\bin what year\b|何时|什么时候|哪一?天|哪一?年|日期|何日|几月几日|起施行", _I)),
    ("period", re.compile(r"\bhow long\b|\bhow many (?:days|weeks|months|years|hours|minutes)\b|\bfor how long\b|"
                          r"\bwithin (?:how|what)\b|\b(?:what|which) (?:is the )?(?:period|term|duration|deadline)\b|"
                          r"\bnotice period\b|多长时间|多久|多少天|几天|多少年|几年|多少个月|几个月|期限|年限|时效|期间多长|持续", _I)),
    ("money", re.compile(r"\bhow much\b|\b(?:fee|fees|price|cost|costs|amount|revenue|salary|payment|cap)\b.*\?|"
                         r"\bwhat (?:is|was) the (?:\w+ )?(?:fee|price|cost|amount|revenue|cap)\b|多少钱|金额|费用|收入|营收|利润|价格", _I)),
    ("drug", re.compile(r"\b(?:medications?|medicines?|drugs?|antibiotics?|prescri\w+|dose|dosage|"
                        r"anticoagula\w+|analgesi\w+|treated with|given)\b|用药|药物|药品|抗生素|服用|给予|予以.*治疗", _I)),
    ("lab", re.compile(r"\b(?:level|count|pressure|rate|saturation|temperature|hemoglobin|haemoglobin|glucose|"
                       r"creatinine|cholesterol|a1c|bmi|weight|height|lab|labs|value of)\b|血压|体温|心率|脉搏|呼吸|"
                       r"血红蛋白|白细胞|血糖|化验|检验|指标", _I)),
    ("number", re.compile(r"\bhow many\b|\bwhat (?:is|was|are|were) the (?:\w+ ){0,3}(?:value|number|rate|ratio|"
                          r"percentage|size|range|parameter|coefficient|threshold)s?\b|\bwhat percentage\b|"
                          r"\bwhat (?:value|number)\b|多少|几个|几项|百分之|比例|数值|参数", _I)),
    ("party", re.compile(r"\bwho\b|\bwhom\b|\bwhich party\b|\bwhat party\b|\bwhich (?:company|entity|person|side)\b|"
                         r"谁|哪一方|何方|哪个单位|哪家", _I)),
    ("place", re.compile(r"\bwhere\b(?! (?:is|are) (?:figure|table|fig\.))|\bin which (?:city|country|state|court)\b|"
                         r"在哪|何地|哪里|地点", _I)),
    ("name", re.compile(r"\bwhat (?:is|was) the (?:name|title|diagnosis|procedure|software|method|model)\b|"
                        r"\bwhich (?:software|method|model|procedure|diagnosis|package|tool|language)\b|"
                        r"叫什么|名称|诊断|什么病|哪种", _I)),
]


def question_kind(question: str) -> str:
    """The kind of value `question` asks for (see the module docstring); "text" when none."""
    q = unicodedata.normalize("NFKC", question)
    best: tuple[int, int, str] | None = None
    for order, (kind, pat) in enumerate(_KIND_RULES):
        m = pat.search(q)
        if m is not None and (best is None or (m.start(), order) < best[:2]):
            best = (m.start(), order, kind)
    return best[2] if best is not None else "text"


_CN_NUM = "零〇一二三四五六七八九十百千万两半"
_PERIOD = [
    re.compile(r"\b(?:[a-z]+(?:[- ][a-z]+)?\s+\(\d+\)|\d+(?:\.\d+)?|a|one|two|three|four|five|six|seven|eight|nine|"
               r"ten|eleven|twelve|fifteen|twenty|thirty|forty|forty-five|sixty|ninety)\s*(?:-\s*)?"
               r"(?:calendar\s+|business\s+|working\s+|consecutive\s+)?"
               r"(?:days?|weeks?|months?|years?|hours?|minutes?)\b", _I),
    re.compile(rf"(?<![\d月年.])(?:\d{{1,3}}(?:\.\d+)?|[{_CN_NUM}]+)\s*"
               r"(?:个月|个工作日|工作日|周岁|年(?![\d月度])|日(?!起)|天|周|星期|小时|分钟)(?:以?[内来后前])?"),
]
_LAW = [
    re.compile(r"\b(?:the\s+)?laws?\s+of\s+(?:the\s+)?(?:State\s+of\s+|Commonwealth\s+of\s+|Province\s+of\s+)?"
               r"[A-Z][A-Za-z]+(?:\s+[A-Z][A-Za-z]+){0,3}"),
    re.compile(r"\b(?:[A-Z][A-Za-z]+\s+){1,6}(?:Act|Code|Regulation|Directive|Law|Convention)(?:\s+(?:of\s+)?\d{4})?\b"),
    re.compile(r"\b(?:GDPR|CCPA|HIPAA|UCC)\b"),
    re.compile(r"《[^》\n]{1,60}》"),
    re.compile(r"(?:中华人民共和国)?[\u4e00-\u9fff]{1,12}(?:法|法典|条例)(?![律院官定人])"),
]
_CLAIM = [
    re.compile(r"\bclaims?\s+\d+(?:\s*(?:-|–|to|through|and|or|,)\s*\d+)*", _I),
    re.compile(r"权利要求\s*\d+(?:\s*(?:-|－|~|～|至|到|或|和|、|,|，)\s*\d+)*"),
]
_DRUG_STEMS = ("cillin", "mycin", "micin", "azole", "pril", "olol", "statin", "sartan", "prazole", "formin",
               "cycline", "floxacin", "zolid", "ximab", "zumab", "mumab", "navir", "clovir", "dipine", "triptan",
               "oxetine", "parin", "xaban", "gatran", "isone", "asone", "olone", "profen", "adone", "orphine",
               "caine", "dronate", "glitazone", "gliptin", "lukast", "tidine", "setron", "tropium", "terol",
               "zosin", "thiazide", "semide", "cetamol", "azepam", "azolam", "ephrine", "oxacin", "amycin",
               "penem", "bactam", "tadine", "triptyline", "pramine", "idone", "apine", "etine", "aline")
_DRUG = [
    re.compile(r"\b(?:[A-Z]?[a-z]+(?:" + "|".join(s for s in _DRUG_STEMS) + r")|[Cc]ef[a-z]+|[Aa]spirin|[Ii]nsulin|"
               r"[Hh]eparin|[Ww]arfarin|[Mm]etformin|[Ll]isinopril|[Nn]itroglycerin|[Pp]rednisone|[Mm]orphine)\b"),
    re.compile(r"[\u4e00-\u9fff]{1,8}(?:西林|霉素|沙星|头孢[\u4e00-\u9fff]{0,6}|唑|普利|洛尔|他汀|沙坦|拉唑|双胍|"
               r"肝素|胰岛素|地平|替丁|司琼|片|胶囊|注射液|颗粒|口服液|滴丸)"),
]
_UNIT = (r"(?:mg/dL|g/dL|g/L|mg/L|mmol/L|μmol/L|umol/L|mEq/L|U/L|IU/L|ng/mL|pg/mL|mIU/L|×10\^?9/L|x10\^?9/L|"
         r"10\^?9/L|mmHg|mm\s?Hg|bpm|/min|次/分|breaths/min|°C|°F|℃|kg/m2|kg/m²|kg|cm|mm|mL|ml|L|%|mg|g|"
         r"cells/mcL|/mm3|/μL|/uL)")
_LAB = [
    re.compile(r"\d{2,3}/\d{2,3}(?:\s*mm\s?Hg)?"),
    re.compile(r"\d+(?:\.\d+)?\s*" + _UNIT),
]
_ENTITY_KINDS = {"date": {"date"}, "money": {"money"}, "number": {"number", "percent", "money"},
                 "lab": {"number", "percent"}, "party": {"name", "quoted"}, "name": {"name", "quoted"},
                 "place": {"name"}}


def value_spans(text: str, kind: str) -> list[tuple[int, int]]:
    """(start, end) of every value of `kind` in `text`, in order, overlaps resolved leftmost-longest;
    [] for "text" and unknown kinds."""
    if kind not in KINDS or kind == "text":
        return []
    norm = "".join((unicodedata.normalize("NFKC", c) or c)[:1] for c in text)
    found: list[tuple[int, int]] = []
    pats = {"period": _PERIOD, "law": _LAW, "claim": _CLAIM, "drug": _DRUG, "lab": _LAB,
            "number": _PERIOD + _LAB}.get(kind, [])
    for pat in pats:
        found += [m.span() for m in pat.finditer(norm) if m.end() > m.start()]
    wanted = _ENTITY_KINDS.get(kind, set())
    if wanted:
        found += [(e.start, e.end) for e in extract_entities(text) if e.kind in wanted]
    if kind == "drug":
        found = [(s, e) for s, e in found if not _common_word(norm[s:e])]
    found.sort(key=lambda se: (se[0], -(se[1] - se[0])))
    out: list[tuple[int, int]] = []
    end = -1
    for s, e in found:
        s, e = _trim(norm, s, e)
        if s >= e or s < end:
            continue
        out.append((s, e))
        end = e
    return out


_COMMON = {"saline", "guideline", "baseline", "discipline", "pipeline", "airline", "decline", "outline", "line"}


def _common_word(word: str) -> bool:
    w = word.casefold()
    return w in _COMMON or (len(w) <= 4 and not w.startswith("cef"))


def _trim(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s] in " \t\n,;:.。，；：":
        s += 1
    while e > s and text[e - 1] in " \t\n,;:.。，；：":
        e -= 1
    return s, e
