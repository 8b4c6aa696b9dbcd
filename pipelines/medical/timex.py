"""Time expressions in clinical text and their normalisation to ISO intervals.

Found: absolute dates and times (2024-03-05, 2024/3/5, 03/05/2024 and 03/05/24 — US month-first
unless the first number is over 12 —, 5 Mar 2024, March 5, 2024, March 2024, 2024年3月5日,
3月5日 14:30, 3月5日14时30分; a time of day alone, 06:00 or 2:30 pm, on the latest date before it), anchored relative times (POD 3, POD 3, 14:00, post-operative day #3, 术后第3天, 术后第3天 14:00,
hospital day 2, 入院第2天, 3 days prior to admission, 入院前1年, on admission, 入院时), times
relative to the document (yesterday, 昨日, 今晨, 3 days ago, 3小时前, 2周来, 一个月来) and
durations (for 2 weeks, x3 days, 3小时, 2年余).

Normalisation (`normalize`) turns each into `start`/`end` (ISO date or datetime, end exclusive),
a `granularity` (minute, hour, day, week, month, year) and `anchored_to`: absolute, document
(the note's own date), admission, surgery, discharge — or `unanchored` when the anchor it needs is
unknown (then start/end stay empty). Frequencies ("every 8 hours", "q6h") and offsets from
non-anchor events ("餐后2小时") are not time expressions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from pipelines.documents import Document, Span
from pipelines.text.entities import MONTH
from pipelines.text.numerals import CN_DIGITS, CN_UNITS

MONTHS = {m: i + 1 for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"])}
MONTHS.update({k[:3]: v for k, v in list(MONTHS.items())})
MONTHS["sept"] = 9
_MON = MONTH + r"\.?"
_QTY = r"(?:\d+(?:\.\d+)?|[一二两三四五六七八九十半]{1,3}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|several|few)"
_EN_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
           "nine": 9, "ten": 10, "several": 3, "few": 3}
_EN_UNIT = r"(?:minutes?|mins?|hours?|hrs?|days?|d|weeks?|wks?|months?|mos?|years?|yrs?)"
_ZH_UNIT = r"(?:分钟|小时|个?钟头|天|日|周|星期|个月|月|年)"
# a time of day after a date on the same line ("2024-03-08 07:30", "07/07/09 at\n08:31" wrapped after "at";
# not the "06:00" that starts the next row)
_TIME = r"(?:(?:[ \t]*(?:at|@)\s+|[ \t]*)(?P<hh>[01]?\d|2[0-3])[:：](?P<mm>[0-5]\d)(?::[0-5]\d)?|[ \t]*(?P<zhh>[01]?\d|2[0-3])时(?:(?P<zmm>[0-5]?\d)分)?)?"

PATTERNS: list[tuple[str, re.Pattern]] = [
    ("iso", re.compile(r"(?<!\d)(?P<y>(?:19|20)\d{2})[-/.](?P<m>0?[1-9]|1[0-2])[-/.](?P<d>0?[1-9]|[12]\d|3[01])(?!\d)T?" + _TIME)),
    ("zh_full", re.compile(r"(?P<y>(?:19|20)\d{2})\s*年\s*(?P<m>0?[1-9]|1[0-2])\s*月\s*(?P<d>0?[1-9]|[12]\d|3[01])\s*[日号]" + _TIME)),
    ("zh_month", re.compile(r"(?P<y>(?:19|20)\d{2})\s*年\s*(?P<m>0?[1-9]|1[0-2])\s*月(?![\d份]*\s*[日号\d])")),
    ("zh_md", re.compile(r"(?<![\d年])(?P<m>0?[1-9]|1[0-2])\s*月\s*(?P<d>0?[1-9]|[12]\d|3[01])\s*[日号]" + _TIME)),
    ("us", re.compile(r"(?<![\d/])(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<y>\d{4}|\d{2})(?![\d/])" + _TIME)),
    # month/day without a year, only with a time of day ("03/09 06:00": a flowsheet row)
    ("us_md", re.compile(r"(?<![\d/.])(?P<a>\d{1,2})/(?P<b>\d{1,2})[ \t]+(?P<hh>[01]?\d|2[0-3])[:：](?P<mm>[0-5]\d)(?![\d:])")),
    # a time of day alone ("06:00", "2:30 pm"): a row of a flowsheet or a timed entry; its date is the
    # latest date before it (or the note's)
    ("clock", re.compile(r"(?<![\w:：/.])(?:(?P<hh>[01]\d|2[0-3])[:：](?P<mm>[0-5]\d)(?![\d:：])(?:[ \t]*(?P<ap>[ap]\.?m\.?)(?!\w))?"
                         r"|(?P<hh2>0?[1-9]|1[0-2])[:：](?P<mm2>[0-5]\d)[ \t]*(?P<ap2>[ap]\.?m\.?)(?!\w))", re.I)),
    ("dmy", re.compile(r"(?<!\w)(?P<d>[0-3]?\d)(?:st|nd|rd|th)?\s+(?P<mon>" + _MON + r"),?\s+(?P<y>(?:19|20)\d{2})(?!\d)" + _TIME, re.I)),
    ("mdy", re.compile(r"(?<!\w)(?P<mon>" + _MON + r")\s+(?P<d>[0-3]?\d)(?:st|nd|rd|th)?(?:,\s*|\s+)(?P<y>(?:19|20)\d{2})(?!\d)" + _TIME, re.I)),
    ("md", re.compile(r"(?<!\w)(?P<mon>" + _MON + r")\s+(?P<d>[0-3]?\d)(?:st|nd|rd|th)?(?![\d,]*\s*(?:19|20)\d{2})(?!\w)" + _TIME, re.I)),
    ("my", re.compile(r"(?<!\w)(?P<mon>" + _MON + r")\s+(?P<y>(?:19|20)\d{2})(?!\d)", re.I)),
    ("pod", re.compile(r"(?<!\w)(?:POD|post[- ]?op(?:erative)?\s+day|postop\s+day)\s*#?\s*(?P<n>\d{1,3})(?!\d)"
                       r"(?:,?\s*(?:at\s+)?(?P<hh>[01]?\d|2[0-3])[:：](?P<mm>[0-5]\d)(?!\d))?", re.I)),
    ("zh_pod", re.compile(r"术后\s*第?\s*(?P<n>\d{1,3}|[一二两三四五六七八九十]{1,3})\s*[天日]"
                          r"(?:[，,]?\s*(?P<hh>[01]?\d|2[0-3])[:：](?P<mm>[0-5]\d)(?!\d))?")),
    ("hd", re.compile(r"(?<!\w)(?:hospital\s+day|HD)\s*#?\s*(?P<n>\d{1,3})(?!\d)", re.I)),
    ("zh_hd", re.compile(r"(?:入院|住院)(?:后)?\s*第\s*(?P<n>\d{1,3}|[一二两三四五六七八九十]{1,3})\s*[天日]")),
    ("before_anchor", re.compile(r"(?<!\w)(?P<n>" + _QTY + r")\s*(?P<u>" + _EN_UNIT + r")\s+(?:prior\s+to|before|preceding)\s+(?:the\s+)?(?P<anchor>admission|presentation|surgery|the operation|operation|discharge)", re.I)),
    ("after_anchor", re.compile(r"(?<!\w)(?P<n>" + _QTY + r")\s*(?P<u>" + _EN_UNIT + r")\s+(?:after|following|post)\s+(?:the\s+)?(?P<anchor>admission|surgery|the operation|operation|discharge)", re.I)),
    ("zh_before_anchor", re.compile(r"(?P<anchor>入院|术|手术|出院)前\s*(?P<n>\d+(?:\.\d+)?|[一二两三四五六七八九十半]{1,3})\s*(?P<u>" + _ZH_UNIT + r")(?:余|多)?")),
    ("zh_after_anchor", re.compile(r"(?P<anchor>入院|手术|出院)后\s*(?P<n>\d+(?:\.\d+)?|[一二两三四五六七八九十半]{1,3})\s*(?P<u>" + _ZH_UNIT + r")(?:余|多)?")),
    ("at_anchor", re.compile(r"(?<!\w)(?P<anchor>on admission|at admission|upon admission|on arrival|at discharge|on discharge|upon discharge|day of surgery|intraoperatively|入院时|入院当天|入院当日|出院时|手术当天|手术当日|术中)", re.I)),
    ("doc_rel", re.compile(r"(?<!\w)(?P<w>yesterday|today|tonight|tomorrow|last night|this morning|this evening|overnight)(?!\w)|(?P<zw>昨日|昨天|昨晚|昨夜|今日|今天|今晨|今早|明日|明天|前天|前日)", re.I)),
    ("ago", re.compile(r"(?<!\w)(?P<n>" + _QTY + r")\s*(?P<u>" + _EN_UNIT + r")\s+ago(?!\w)", re.I)),
    ("zh_ago", re.compile(r"(?<![\d.入院术手出])(?P<n>\d+(?:\.\d+)?|[一二两三四五六七八九十半]{1,3})\s*(?P<u>" + _ZH_UNIT + r")(?P<yu>余|多)?\s*(?P<dir>前|来|以来)")),
    ("for_dur", re.compile(r"(?<!\w)(?:for|x|×|over the (?:past|last)|in the (?:past|last)|past|last)\s*(?:the\s+)?(?:past\s+|last\s+)?(?P<n>" + _QTY + r")\s*(?P<u>" + _EN_UNIT + r")(?!\w)", re.I)),
    ("zh_dur", re.compile(r"(?<![\d.第])(?P<n>\d+(?:\.\d+)?|[一二两三四五六七八九十半]{1,3})\s*(?P<u>" + _ZH_UNIT + r")(?P<yu>余|多)?(?![前来后\d])")),
]
_NOT_TIME_BEFORE = re.compile(r"(?:每|q|every|餐后|饭后|服药后|注射后|静滴|持续|间隔|after meals?|within)\s*$", re.I)
_UNIT_DAYS = {"minute": 1 / 1440, "hour": 1 / 24, "day": 1, "week": 7, "month": 30, "year": 365}


def _unit(u: str) -> str:
    u = u.lower()
    if u.startswith("min") or u == "分钟":
        return "minute"
    if u.startswith("h") or "小时" in u or "钟头" in u:
        return "hour"
    if u.startswith("d") or u in ("天", "日"):
        return "day"
    if u.startswith("w") or u in ("周", "星期"):
        return "week"
    if u.startswith("mo") or "月" in u:
        return "month"
    return "year"


def _zh_digit(s: str, default: float) -> float:
    """One Chinese digit's value (十 is 10, 半 is 0.5); `default` for anything else."""
    if s == "半":
        return 0.5
    return CN_UNITS["十"] if s == "十" else CN_DIGITS.get(s, default)


def _qty(n: str) -> float:
    """A quantity as written: 3, 2.5, three, 三, 十二, 二十, 半 (0.5); digits side by side add up
    (两三 -> 5)."""
    n = n.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", n):
        return float(n)
    if n in _EN_NUM:
        return float(_EN_NUM[n])
    if n == "半":
        return 0.5
    if "十" in n:
        a, _, b = n.partition("十")
        return float((_zh_digit(a, 1) if a else 1) * 10 + (_zh_digit(b, 0) if b else 0))
    return float(sum(_zh_digit(c, 0) for c in n)) or 1.0


@dataclass(frozen=True, slots=True, eq=False, kw_only=True)
class TimeMention(Span):
    """A time expression: a `Span` of the document's text with what it says."""

    kind: str  # date | datetime | time (of day alone) | month | year | anchored | document_relative | duration
    pattern: str
    value: dict = field(default_factory=dict)  # y/m/d/hh/mm, or n/unit/anchor/direction


def find_times(doc: Document) -> list[TimeMention]:
    """All time expressions in the document's text, longest first, non-overlapping, in order."""
    text = doc.text
    hits: list[TimeMention] = []
    for name, rx in PATTERNS:
        for m in rx.finditer(text):
            s, e = m.start(), m.end()
            while e > s and text[e - 1].isspace():
                e -= 1
            if e <= s:
                continue
            g = m.groupdict()
            if name in ("for_dur", "zh_dur", "zh_ago", "ago") and _NOT_TIME_BEFORE.search(text[max(0, s - 12):s]):
                continue
            val: dict = {}
            kind = "date"
            if name == "clock":
                hh = int(g["hh"] if g["hh"] is not None else g["hh2"])
                ap = (g["ap"] or g["ap2"] or "").lower()
                if ap.endswith(".") and "." not in ap[:-1]:
                    e -= 1  # "2:30 pm." : the sentence's full stop
                if ap.startswith("p") and hh < 12:
                    hh += 12
                elif ap.startswith("a") and hh == 12:
                    hh = 0
                hits.append(TimeMention(doc, s, e, kind="time", pattern=name,
                                        value={"hh": hh, "mm": int(g["mm"] if g["mm"] is not None else g["mm2"])}))
                continue
            if name in ("iso", "zh_full", "zh_md", "us", "us_md", "dmy", "mdy", "md"):
                if name in ("us", "us_md"):
                    a, b = int(g["a"]), int(g["b"])
                    mo, d = (a, b) if a <= 12 else (b, a)
                    if mo > 12 or d > 31:
                        continue
                    y = int(g["y"]) if name == "us" else None
                    if y is not None:
                        y = y + (2000 if y < 50 else 1900) if y < 100 else y
                    val = {"y": y, "m": mo, "d": d}
                elif name in ("dmy", "mdy", "md"):
                    mon = MONTHS.get(g["mon"].lower().rstrip(".")[:4] if g["mon"].lower().startswith("sept") else g["mon"].lower().rstrip(".")[:3])
                    if name == "md" and g["mon"].lower().rstrip(".") == "may" and not re.match(r"\s+\d", text[m.end("mon"):]):
                        continue
                    val = {"y": int(g["y"]) if g.get("y") else None, "m": mon, "d": int(g["d"])}
                else:
                    val = {"y": int(g["y"]) if g.get("y") else None, "m": int(g["m"]), "d": int(g["d"])}
                if not 1 <= val["d"] <= 31:
                    continue
                hh = g.get("hh") or g.get("zhh")
                if hh is not None:
                    val["hh"] = int(hh)
                    val["mm"] = int(g.get("mm") or g.get("zmm") or 0)
                    kind = "datetime"
            elif name in ("zh_month", "my"):
                mon = int(g["m"]) if name == "zh_month" else MONTHS.get(g["mon"].lower().rstrip(".")[:3])
                val = {"y": int(g["y"]), "m": mon}
                kind = "month"
            elif name in ("pod", "zh_pod"):
                val = {"anchor": "surgery", "n": _qty(g["n"]), "unit": "day", "direction": 1, "ordinal": True}
                if g.get("hh") is not None:  # "POD 3, 14:00"
                    val["hh"], val["mm"] = int(g["hh"]), int(g["mm"])
                kind = "anchored"
            elif name in ("hd", "zh_hd"):
                val = {"anchor": "admission", "n": _qty(g["n"]) - 1, "unit": "day", "direction": 1, "ordinal": True}
                kind = "anchored"
            elif name in ("before_anchor", "after_anchor", "zh_before_anchor", "zh_after_anchor"):
                a = g["anchor"].lower()
                anchor = "admission" if a in ("admission", "presentation", "入院") else "discharge" if a in ("discharge", "出院") else "surgery"
                val = {"anchor": anchor, "n": _qty(g["n"]), "unit": _unit(g["u"]), "direction": -1 if "before" in name else 1}
                kind = "anchored"
            elif name == "at_anchor":
                a = g["anchor"].lower()
                anchor = "admission" if ("admission" in a or "arrival" in a or "入院" in a) else "discharge" if ("discharge" in a or "出院" in a) else "surgery"
                val = {"anchor": anchor, "n": 0, "unit": "day", "direction": 1}
                kind = "anchored"
            elif name == "doc_rel":
                w = (g.get("w") or g.get("zw") or "").lower()
                off = {"yesterday": -1, "last night": -1, "昨日": -1, "昨天": -1, "昨晚": -1, "昨夜": -1, "tomorrow": 1,
                       "明日": 1, "明天": 1, "前天": -2, "前日": -2}.get(w, 0)
                val = {"n": abs(off), "unit": "day", "direction": -1 if off < 0 else 1, "calendar": True}
                kind = "document_relative"
            elif name in ("ago", "zh_ago"):
                direction = g.get("dir")
                val = {"n": _qty(g["n"]), "unit": _unit(g["u"]), "direction": -1,
                       "since": direction in ("来", "以来"), "approx": bool(g.get("yu"))}
                kind = "document_relative" if not val["since"] else "duration"
            elif name in ("for_dur", "zh_dur"):
                val = {"n": _qty(g["n"]), "unit": _unit(g["u"]), "approx": bool(g.get("yu"))}
                kind = "duration"
            hits.append(TimeMention(doc, s, e, kind=kind, pattern=name, value=val))
    hits.sort(key=lambda h: (h.start, -(h.end - h.start)))
    out: list[TimeMention] = []
    for h in hits:
        if out and h.start < out[-1].end:
            continue
        out.append(h)
    return out


# ---------------------------------------------------------------------------------------------
# normalisation


@dataclass
class TimeValue:
    start: str | None
    end: str | None
    granularity: str | None
    anchored_to: str  # absolute | document | admission | surgery | discharge | unanchored
    approximate: bool = False

    def as_dict(self) -> dict:
        return {"start": self.start, "end": self.end, "granularity": self.granularity, "anchored_to": self.anchored_to}


def _iso(d: date | datetime, gran: str) -> str:
    if gran in ("minute", "hour") and isinstance(d, datetime):
        return d.strftime("%Y-%m-%dT%H:%M")
    if isinstance(d, datetime):
        d = d.date()
    return d.isoformat()


def _shift(d: date, n: float, unit: str, sign: int) -> date:
    if unit == "month" and float(n).is_integer():
        total = d.year * 12 + d.month - 1 + sign * int(n)
        y, m = divmod(total, 12)
        import calendar
        return date(y, m + 1, min(d.day, calendar.monthrange(y, m + 1)[1]))
    if unit == "year" and float(n).is_integer():
        try:
            return d.replace(year=d.year + sign * int(n))
        except ValueError:
            return d.replace(year=d.year + sign * int(n), day=28)
    return d + timedelta(days=sign * n * _UNIT_DAYS[unit])


def _span_for(d: date, gran: str) -> tuple[str, str]:
    if gran == "year":
        return f"{d.year:04d}", f"{d.year + 1:04d}"
    if gran == "month":
        y, m = (d.year + 1, 1) if d.month == 12 else (d.year, d.month + 1)
        return f"{d.year:04d}-{d.month:02d}", f"{y:04d}-{m:02d}"
    if gran == "week":
        return d.isoformat(), (d + timedelta(days=7)).isoformat()
    return d.isoformat(), (d + timedelta(days=1)).isoformat()


def resolve_year(month: int, day: int, ref: date | None) -> int | None:
    """Year of a date written without one: the one that puts it nearest the reference date."""
    if ref is None:
        return None
    best = None
    for y in (ref.year - 1, ref.year, ref.year + 1):
        try:
            cand = date(y, month, day)
        except ValueError:
            continue
        if best is None or abs((cand - ref).days) < abs((best - ref).days):
            best = cand
    return best.year if best else None


def absolute_date(t: TimeMention, ref: date | None = None) -> date | None:
    """The calendar date of an absolute mention (None for other kinds or impossible dates)."""
    v = t.value
    if t.kind not in ("date", "datetime") or "d" not in v:
        return None
    y = v.get("y") or resolve_year(v["m"], v["d"], ref)
    if y is None:
        return None
    try:
        return date(y, v["m"], v["d"])
    except ValueError:
        return None


def normalize(t: TimeMention, doc_date: date | None, anchors: dict[str, date], *, past_context: bool = True) -> TimeValue:
    """ISO interval of a time mention, given the document date and the patient's anchor dates."""
    v = t.value
    if t.kind in ("date", "datetime"):
        d = absolute_date(t, doc_date)
        if d is None:
            return TimeValue(None, None, "day", "unanchored")
        anchored = "absolute" if v.get("y") else "document"
        if t.kind == "datetime":
            dt = datetime(d.year, d.month, d.day, v["hh"], v["mm"])
            return TimeValue(_iso(dt, "minute"), _iso(dt + timedelta(minutes=1), "minute"), "minute", anchored)
        s, e = _span_for(d, "day")
        return TimeValue(s, e, "day", anchored)
    if t.kind == "time":  # a time of day alone: on `doc_date` (the caller passes the latest date before it)
        if doc_date is None:
            return TimeValue(None, None, "minute", "unanchored")
        dt = datetime(doc_date.year, doc_date.month, doc_date.day, v["hh"], v["mm"])
        return TimeValue(_iso(dt, "minute"), _iso(dt + timedelta(minutes=1), "minute"), "minute", "document")
    if t.kind == "month":
        s, e = _span_for(date(v["y"], v["m"], 1), "month")
        return TimeValue(s, e, "month", "absolute")
    if t.kind == "anchored":
        base = anchors.get(v["anchor"])
        if base is None:
            return TimeValue(None, None, v["unit"], "unanchored")
        d = _shift(base, v["n"], v["unit"], v["direction"])
        if "hh" in v:
            dt = datetime(d.year, d.month, d.day, v["hh"], v["mm"])
            return TimeValue(_iso(dt, "minute"), _iso(dt + timedelta(minutes=1), "minute"), "minute", v["anchor"])
        gran = "day" if v["unit"] in ("minute", "hour", "day") else v["unit"]
        s, e = _span_for(d, gran)
        return TimeValue(s, e, gran, v["anchor"], approximate=v["unit"] in ("week", "month", "year"))
    if t.kind == "document_relative":
        if doc_date is None:
            return TimeValue(None, None, v["unit"], "unanchored")
        if v["unit"] in ("minute", "hour"):
            # without the note's time of day, "3小时前" is only known to the day (or the day before)
            d = _shift(doc_date, v["n"], v["unit"], -1)
            lo = d if d < doc_date else doc_date
            return TimeValue(lo.isoformat(), (doc_date + timedelta(days=1)).isoformat(), "day", "document", approximate=True)
        d = _shift(doc_date, v["n"], v["unit"], v["direction"])
        gran = "day" if v["unit"] == "day" else v["unit"]
        s, e = _span_for(d, gran)
        return TimeValue(s, e, gran, "document", approximate=gran != "day")
    if t.kind == "duration":
        if doc_date is None or not (past_context or v.get("since")):
            return TimeValue(None, None, v["unit"], "unanchored")
        d = _shift(doc_date, v["n"], v["unit"], -1)
        gran = "day" if v["unit"] in ("minute", "hour", "day") else v["unit"]
        return TimeValue(d.isoformat(), (doc_date + timedelta(days=1)).isoformat(), gran, "document", approximate=True)
    return TimeValue(None, None, None, "unanchored")


def parse_iso_date(s: str | None) -> date | None:
    if not s:
        return None
    try:
        if len(s) == 4:
            return date(int(s), 1, 1)
        if len(s) == 7:
            return date(int(s[:4]), int(s[5:7]), 1)
        return date.fromisoformat(s[:10])
    except ValueError:
        return None
