"""Lab results and vital signs, inline ("WBC 15.2 x10^9/L ↑", "血红蛋白 98 g/L", "T 38.6 ℃", "temperature
is 100.3") and as table rows (name | value | unit | reference range | flag, separated by tabs, pipes or
runs of spaces). A table whose header row names its columns is read by column
(`find_table_measurements`): a flowsheet of vital signs (Time | T | HR | BP | RR, 时间 体温 脉搏 血压) or
a lab table with a date/time column (Date | Time | Test | Result | Unit, 采集时间 项目 结果); each
measurement keeps its row's date/time cells (`row_time`), the row's own collection time.

Each hit carries name, canonical analyte, value, unit (normalised: ×109/L -> x10^9/L), reference
range, abnormal flag and where the flag came from: the report itself (↑, H, 偏高), the reference
range printed next to it, or a default adult range (`ranges`, sources named there) when the report
gives none; a result printed without a unit takes the unit its value fits (`unit_inferred`), and
conventional units get their SI value (`value_si`, `unit_si`). Vital signs: temperature, pulse, respiration, blood pressure, SpO2; a temperature of 38.0 ℃
(100.4 °F) or more is flagged high (fever).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipelines.documents import Document, HasSpan, Span
from pipelines.medical.lexicon import LAB_NAMES, VITAL_NAMES
from pipelines.medical.ranges import infer_unit, reference_range, to_si
from pipelines.text.intervals import Intervals

_NUM = r"[<>≤≥]?\s*\d+(?:\.\d+)?"
_UNIT = (r"(?:[x×X*]\s*10\s*(?:\^|\*\*)?\s*(?:9|12|⁹|¹²)\s*/\s*L|[x×X*]\s*10(?:9|12)\s*/\s*L|10\^(?:9|12)/L|"
         r"K/u[Ll]|10\^3/u[Ll]|/u[Ll]|/HP|/高倍视野|mmol/L|umol/L|μmol/L|µmol/L|nmol/L|pmol/L|mg/dL|g/dL|g/L|mg/L|"
         r"ng/mL|ng/ml|pg/mL|pg/ml|mIU/L|μIU/mL|uIU/mL|IU/L|U/L|mEq/L|mg/dl|g/dl|fL|fl|pg|%|％|s|sec|秒|mm/h|mmHg)")
_REF = r"(?:(?:ref(?:erence)?(?:[ \t]*range)?|normal|参考值|参考范围|正常值)[:：]?[ \t]*)?[(\[（]?[ \t]*(\d+(?:\.\d+)?)[ \t]*(?:-|–|—|~|～|to)[ \t]*(\d+(?:\.\d+)?)[ \t]*[)\]）]?"
_FLAG = r"(↑|↓|\(H\)|\(L\)|\bH\b|\bL\b|\bHH\b|\bLL\b|\bhigh\b|\blow\b|偏高|偏低|升高|降低|\*)"

_names = sorted(LAB_NAMES, key=len, reverse=True)
_NAME_ALT = "|".join(re.escape(n) for n in _names)
_LAB_INLINE = re.compile(
    rf"(?<![A-Za-z])(?P<name>{_NAME_ALT})(?:\s*(?:[A-Z]{{2,5}}))?(?![A-Za-z])(?:\s*\([A-Za-z]+\))?\s*(?:[:：=]|was|of|is|为)?\s*"
    rf"(?P<value>{_NUM})(?:[ \t]*(?P<unit>{_UNIT}))?(?:[ \t]*(?P<flag>{_FLAG}))?(?:[ \t]*(?P<ref>{_REF}))?(?:[ \t]*(?P<flag2>{_FLAG}))?",
    re.I,
)
_CELL_SPLIT = re.compile(r"\t+|\s*\|\s*|\s{2,}")

# a verb or word between an English label and its value: "temperature is 100.3", "heart rate of 84",
# "temperature today 96.5", "O2 sat is 98%"
_LINK = r"(?:\s+(?:is|was|were|of|today|at|on admission|now))*\s*"
_VITAL_RX = [
    ("temperature", re.compile(
        r"(?P<label>(?:体温|(?i:temperature|temp)|Tmax|BT|T)(?:\s*max)?)(?:" + _LINK + r"|\s*(?:最高|高达|达|为|约)?\s*)[:：]?\s*(?:T\s*)?(?P<value>\d{2,3}(?:\.\d)?)\s*(?P<unit>℃|°\s*C|°\s*F|º\s*C|C\b|F\b|度)?")),
    ("pulse", re.compile(r"(?P<label>脉搏|心率|(?i:heart rate|pulse rate|pulse)|HR|PR|P)(?:" + _LINK + r"|\s*(?:为|约|达)?\s*)[:：]?\s*(?P<value>\d{2,3})\s*(?P<unit>次\s*[/／]\s*分|bpm|/min|beats/min)?")),
    ("respiration", re.compile(r"(?P<label>呼吸频率|呼吸|(?i:respiratory rate|respirations|resp)|RR|R)(?:" + _LINK + r"|\s*(?:为|约)?\s*)[:：]?\s*(?P<value>\d{1,2})\s*(?P<unit>次\s*[/／]\s*分|/min|breaths/min|\s/min)?")),
    ("blood_pressure", re.compile(r"(?P<label>血压|(?i:blood pressure)|B/P|BP|Bp)(?:" + _LINK + r"|\s*(?:波动于|控制在|为|约|达)?\s*)[:：]?\s*(?P<value>\d{2,3}\s*[/／]\s*\d{2,3})\s*(?P<unit>mmHg|mm Hg)?")),
    ("spo2", re.compile(r"(?P<label>SpO2|SaO2|(?i:O2 sat(?:uration)?s?|oxygen saturation)|血氧饱和度|氧饱和度)(?:" + _LINK + r"|\s*(?:为)?\s*)[:：]?\s*(?P<value>\d{2,3})\s*(?P<unit>%|％)")),
]


@dataclass
class Measurement(HasSpan):
    """A lab result or vital sign: its `Span` of the document's text and what it measured."""

    kind: str  # "lab" | "vital"
    span: Span
    name: str
    analyte: str
    value: str
    unit: str | None
    ref_low: float | None = None
    ref_high: float | None = None
    flag: str | None = None  # high | low | normal | None
    flag_source: str | None = None  # report | reference_range | default_range | threshold
    extra: dict = field(default_factory=dict)
    row_time: tuple[int, int] | None = None  # the date/time cells of its table row (the collection time)

    def normalized(self) -> dict:
        d = {"analyte": self.analyte, "name": self.name, "value": self.value, "unit": self.unit,
             "ref_low": self.ref_low, "ref_high": self.ref_high, "flag": self.flag, "flag_source": self.flag_source}
        d.update(self.extra)
        return d


def normalize_unit(unit: str | None) -> str | None:
    if not unit:
        return None
    u = re.sub(r"\s+", "", unit)
    if re.match(r"^[x×X*]?10(\^|\*\*)?(9|⁹)/L$", u) or re.match(r"^[x×X*]109/L$", u):
        return "x10^9/L"
    if re.match(r"^[x×X*]?10(\^|\*\*)?(12|¹²)/L$", u) or re.match(r"^[x×X*]1012/L$", u):
        return "x10^12/L"
    u = u.replace("μ", "u").replace("µ", "u").replace("％", "%")
    return {"mg/dl": "mg/dL", "g/dl": "g/dL", "ng/ml": "ng/mL", "pg/ml": "pg/mL", "fl": "fL", "k/ul": "K/uL",
            "sec": "s", "秒": "s"}.get(u.lower(), u)


def _flag_word(f: str | None) -> str | None:
    if not f:
        return None
    f = f.strip().lower()
    if f in ("↑", "(h)", "h", "hh", "high", "偏高", "升高", "*"):
        return "high"
    if f in ("↓", "(l)", "l", "ll", "low", "偏低", "降低"):
        return "low"
    return None


def _num(v: str) -> float | None:
    m = re.search(r"\d+(?:\.\d+)?", v)
    return float(m.group(0)) if m else None


def _finish(m: Measurement, flag_text: str | None, ref: tuple[str, str] | None) -> Measurement:
    m.flag = _flag_word(flag_text)
    if m.flag:
        m.flag_source = "report"
    if ref:
        m.ref_low, m.ref_high = float(ref[0]), float(ref[1])
    val = _num(m.value)
    unit = m.unit
    if unit is None and m.ref_low is None and val is not None:
        unit = infer_unit(m.analyte, val, conventional=m.name.isascii())
        if unit:
            m.unit = unit
            m.extra["unit_inferred"] = True
    if m.flag is None and val is not None:
        lo_hi = (m.ref_low, m.ref_high) if m.ref_low is not None else reference_range(m.analyte, unit)
        if lo_hi and lo_hi[0] is not None:
            m.flag = "high" if val > lo_hi[1] else "low" if val < lo_hi[0] else "normal"
            m.flag_source = "reference_range" if m.ref_low is not None else "default_range"
            if m.ref_low is None:
                m.extra["default_range"] = [lo_hi[0], lo_hi[1]]
    si = to_si(m.analyte, val, m.unit) if val is not None else None
    if si is not None:
        m.extra["value_si"], m.extra["unit_si"] = si
    return m


def find_labs(doc: Document, in_lab_section: list[tuple[int, int]] | None = None) -> list[Measurement]:
    """Lab results of the document: table rows first, then inline mentions outside them."""
    text = doc.text
    out: list[Measurement] = [m for m in find_table_measurements(doc) if m.kind == "lab"]
    taken = Intervals((m.span.start, m.span.end) for m in out)
    table_lines = Intervals(_table_lines(doc))
    pos = 0
    for line in text.split("\n"):
        if table_lines.covers(pos):
            pos += len(line) + 1
            continue
        row = _table_row(doc, line, pos)
        if row:
            out.append(row)
            taken.add(row.span.start, row.span.end)
        pos += len(line) + 1
    for m in _LAB_INLINE.finditer(text):
        s, e = m.start(), m.end()
        if taken.overlaps(s, e):
            continue
        name = m.group("name")
        unit = m.group("unit")
        if len(name) <= 2 and name.isascii() and not unit:
            continue  # "N 5", "K 3" without a unit: too ambiguous
        if not name.isascii() and not unit and not m.group("ref"):
            continue
        if name.isascii() and name.islower() and len(name) <= 3:
            continue  # "na", "ca", "pt" as ordinary words
        # trim trailing whitespace from the match
        while e > s and text[e - 1].isspace():
            e -= 1
        ref = (m.group(m.re.groupindex["ref"] + 1), m.group(m.re.groupindex["ref"] + 2)) if m.group("ref") else None
        meas = Measurement("lab", Span(doc, s, e), name, LAB_NAMES[name.lower()], m.group("value").replace(" ", ""),
                           normalize_unit(unit))
        out.append(_finish(meas, m.group("flag") or m.group("flag2"), ref))
        taken.add(s, e)
    return sorted(out, key=lambda x: x.span.start)


def _table_row(doc: Document, line: str, offset: int) -> Measurement | None:
    """A lab row of a Markdown or pipe table: `line` starts at `offset` of the document's text."""
    stripped = line.strip().strip("|").strip()
    if not stripped or len(stripped) > 160:
        return None
    cells = [c for c in _CELL_SPLIT.split(stripped) if c.strip()]
    if len(cells) < 2:
        return None
    name = cells[0].strip()
    key = name.lower()
    key2 = re.sub(r"\s*\(.*?\)\s*$", "", key)
    key3 = re.sub(r"^[a-z]+\s*", "", key2) if not key2.isascii() else key2
    analyte = LAB_NAMES.get(key) or LAB_NAMES.get(key2) or LAB_NAMES.get(key3)
    if analyte is None:
        return None
    value = unit = flag = None
    ref = None
    for c in cells[1:]:
        c = c.strip()
        if value is None and re.fullmatch(_NUM + r"\s*(?:" + _FLAG + r")?", c):
            value = re.match(_NUM, c).group(0).replace(" ", "")
            f = c[len(value):].strip() if c[len(value):].strip() else None
            flag = flag or f
        elif value is None and re.fullmatch(_NUM + r"\s*" + _UNIT + r"(?:\s*" + _FLAG + r")?", c, re.I):
            mm = re.match(rf"({_NUM})\s*({_UNIT})\s*(.*)", c, re.I)
            value, unit = mm.group(1).replace(" ", ""), mm.group(2)
            flag = flag or (mm.group(3) or None)
        elif unit is None and re.fullmatch(_UNIT, c, re.I):
            unit = c
        elif ref is None and re.fullmatch(_REF, c, re.I):
            mm = re.fullmatch(_REF, c, re.I)
            ref = (mm.group(1), mm.group(2))
        elif re.fullmatch(_FLAG, c, re.I):
            flag = c
    if value is None:
        return None
    lead = len(line) - len(line.lstrip())
    start = offset + lead
    end = offset + len(line.rstrip())
    if line.lstrip().startswith("|"):
        start = offset + line.index("|") + 1
        while line[start - offset].isspace():
            start += 1
        body = line.rstrip().rstrip("|").rstrip()
        end = offset + len(body)
    meas = Measurement("lab", Span(doc, start, end), name, analyte, value, normalize_unit(unit), extra={"table_row": True})
    return _finish(meas, flag, ref)


def find_vitals(doc: Document) -> list[Measurement]:
    """Vital signs in the document's text."""
    text = doc.text
    out: list[Measurement] = [m for m in find_table_measurements(doc) if m.kind == "vital"]
    taken: list[tuple[int, int]] = list(_table_lines(doc))
    for vital, rx in _VITAL_RX:
        for m in rx.finditer(text):
            s, e = m.start(), m.end("unit") if m.group("unit") else m.end("value")
            label = m.group("label")
            if any(a < e and s < b for a, b in taken):
                continue
            # ASCII labels must start a word; single-letter labels need a unit
            if label.isascii():
                if s > 0 and (text[s - 1].isalnum()) and text[s - 1].isascii():
                    continue
                if len(label) == 1 and not m.group("unit"):
                    continue  # "T 38", "P 5" without a unit are not vital signs
                if label in ("PR",) and not m.group("unit"):
                    continue
            value = m.group("value").replace(" ", "").replace("／", "/")
            unit = m.group("unit")
            unit_n = re.sub(r"\s+", "", unit).replace("／", "/") if unit else None
            meas = _vital_flags(Measurement("vital", Span(doc, s, e), label, vital, value, unit_n))
            if meas is None:
                continue
            out.append(meas)
            taken.append((s, e))
    return sorted(out, key=lambda x: x.span.start)


def _vital_flags(meas: Measurement) -> Measurement | None:
    """Threshold flags of a vital sign; None when the value cannot be one (a temperature of 12)."""
    value, unit_n = meas.value, meas.unit
    if meas.analyte == "temperature":
        v = float(value)
        fahrenheit = (unit_n or "").endswith("F") or v > 45
        if not 30 <= (v - 32) * 5 / 9 <= 45 and fahrenheit:
            return None
        if not fahrenheit and not 30 <= v <= 45:
            return None
        c = (v - 32) * 5 / 9 if fahrenheit else v
        meas.extra["celsius"] = round(c, 1)
        meas.flag = "high" if c >= 38.0 else "low" if c < 35.0 else "normal"
        meas.flag_source = "threshold"
    elif meas.analyte == "pulse":
        v = float(value)
        meas.flag = "high" if v > 100 else "low" if v < 50 else "normal"
        meas.flag_source = "threshold"
    elif meas.analyte == "blood_pressure":
        sys_, dia = (float(x) for x in value.split("/"))
        meas.flag = "high" if sys_ >= 140 or dia >= 90 else "low" if sys_ < 90 else "normal"
        meas.flag_source = "threshold"
    return meas


# --------------------------------------------------------------------------- tables with a header row
# A header row names the columns; each row below it is read by column, so a row's own date/time cells
# are its collection time: flowsheets of vital signs ("Time  T  HR  BP  RR" / "06:00  37.2  88 ..."),
# lab tables with a date column ("Date | Test | Result | Unit"), Chinese ones (时间 体温 脉搏 血压; 采集时间 项目 结果).
_H_TIME = re.compile(r"^(?:date(?:/time)?|time|date and time|collected|collection(?: time| date)?|drawn|sampled|日期|时间|"
                     r"采集时间|采样时间|送检时间|检测时间|记录时间|日期时间)$", re.I)
_H_NAME = re.compile(r"^(?:test|tests|analyte|item|name|lab|test name|项目|项目名称|检验项目|检查项目)$", re.I)
_H_RESULT = re.compile(r"^(?:result|results|value|结果|检测结果|测定值)$", re.I)
_H_UNIT = re.compile(r"^(?:unit|units|单位)$", re.I)
_H_REF = re.compile(r"^(?:ref(?:erence)?(?: range| interval)?|range|normal range|参考范围|参考值|参考区间|正常值)$", re.I)
_H_FLAG = re.compile(r"^(?:flag|flags|abnormal|提示|标志)$", re.I)
_VITAL_CELL = {"temperature": r"\d{2,3}(?:\.\d)?", "pulse": r"\d{2,3}", "respiration": r"\d{1,2}",
               "blood_pressure": r"\d{2,3}\s*[/／]\s*\d{2,3}", "spo2": r"\d{2,3}", "weight": r"\d{1,3}(?:\.\d)?"}
_VITAL_UNIT = r"(?:℃|°\s*[CF]|º\s*C|C|F|度|次\s*[/／]\s*分|bpm|/min|breaths/min|mmHg|mm Hg|%|％|kg)"
_CELL = re.compile(r"[^\t|]+?(?=\t|\s{2,}|\s*\||\s*$)")


def _cells(line: str, offset: int) -> list[tuple[int, int, str]]:
    """(start, end, text) of each cell of a row: cells split by tabs, pipes or runs of two spaces."""
    out = []
    pos = 0
    for part in re.split(r"(\t+|\s*\|\s*|\s{2,})", line):
        if part and not re.fullmatch(r"\t+|\s*\|\s*|\s{2,}", part) and part.strip():
            lead = len(part) - len(part.lstrip())
            a = offset + pos + lead
            out.append((a, a + len(part.strip()), part.strip()))
        pos += len(part)
    return out


def find_table_measurements(doc: Document) -> list[Measurement]:
    """Vital signs and lab results of the tables that have a header row naming their columns."""
    return _tables(doc)[0]


def _table_lines(doc: Document) -> list[tuple[int, int]]:
    """(start, end) of the header and rows of each table `find_table_measurements` reads."""
    return _tables(doc)[1]


def _tables(doc: Document) -> tuple[list[Measurement], list[tuple[int, int]]]:
    text = doc.text
    out: list[Measurement] = []
    extents: list[tuple[int, int]] = []
    lines = []
    pos = 0
    for line in text.split("\n"):
        lines.append((pos, line))
        pos += len(line) + 1
    i = 0
    while i < len(lines):
        off, line = lines[i]
        head = _cells(line, off)
        roles = _header_roles(head)
        if roles is None:
            i += 1
            continue
        j = i + 1
        while j < len(lines):
            roff, row = lines[j]
            if not row.strip():
                break
            if re.fullmatch(r"[\s|:\-=+]+", row):  # |---|---|
                j += 1
                continue
            cells = _cells(row, roff)
            if len(cells) != len(head):
                break
            out.extend(_read_row(doc, cells, roles, [t for _, _, t in head]))
            j += 1
        if j > i + 1:
            last_off, last = lines[j - 1]
            extents.append((off, last_off + len(last)))
        i = j
    return out, extents


def _header_roles(head: list[tuple[int, int, str]]) -> list[tuple[str, str | None]] | None:
    """Role of each column (time, name, result, unit, ref, flag, vital:<analyte>, other) when the line
    is a table header with a time column and vital columns, or with a name and a result column."""
    if len(head) < 2:
        return None
    roles: list[tuple[str, str | None]] = []
    for _, _, t in head:
        label = t.strip().rstrip(":：")
        low = label.lower()
        if _H_TIME.match(label):
            roles.append(("time", None))
        elif _H_NAME.match(label):
            roles.append(("name", None))
        elif _H_RESULT.match(label):
            roles.append(("result", None))
        elif _H_UNIT.match(label):
            roles.append(("unit", None))
        elif _H_REF.match(label):
            roles.append(("ref", None))
        elif _H_FLAG.match(label):
            roles.append(("flag", None))
        elif (low in VITAL_NAMES or re.sub(r"\s*[(（].*$", "", low) in VITAL_NAMES):
            roles.append(("vital", VITAL_NAMES.get(low) or VITAL_NAMES[re.sub(r"\s*[(（].*$", "", low)]))
        else:
            roles.append(("other", None))
    kinds = [r for r, _ in roles]
    if "time" in kinds and kinds.count("vital") >= 2:
        return roles
    if "name" in kinds and "result" in kinds:
        return roles
    return None


def _read_row(doc: Document, cells: list[tuple[int, int, str]], roles: list[tuple[str, str | None]],
              labels: list[str]) -> list[Measurement]:
    times = [(a, b) for (a, b, _), (r, _) in zip(cells, roles, strict=True) if r == "time"]
    row_time = (min(a for a, _ in times), max(b for _, b in times)) if times else None
    out: list[Measurement] = []
    if any(r == "vital" for r, _ in roles):
        for (a, b, t), (r, analyte), label in zip(cells, roles, labels, strict=True):
            if r != "vital" or analyte is None:
                continue
            m = re.fullmatch(rf"(?P<value>{_VITAL_CELL.get(analyte, _NUM)})\s*(?P<unit>{_VITAL_UNIT})?", t)
            if m is None:
                continue
            unit = re.sub(r"\s+", "", m.group("unit")).replace("／", "/") if m.group("unit") else None
            meas = _vital_flags(Measurement("vital", Span(doc, a, b), label, analyte,
                                            m.group("value").replace(" ", "").replace("／", "/"), unit))
            if meas is not None:
                meas.row_time = row_time
                meas.extra["table_row"] = True
                out.append(meas)
        return out
    col = {r: (a, b, t) for (a, b, t), (r, _) in zip(cells, roles, strict=True) if r != "other"}
    name = col["name"][2]
    key = name.lower()
    key2 = re.sub(r"\s*\(.*?\)\s*$", "", key)
    analyte = LAB_NAMES.get(key) or LAB_NAMES.get(key2)
    vm = re.fullmatch(rf"(?P<v>{_NUM})\s*(?P<u>{_UNIT})?\s*(?P<f>{_FLAG})?", col["result"][2], re.I)
    if analyte is None or vm is None:
        return out
    unit = vm.group("u") or (col["unit"][2] if "unit" in col else None)
    ref = None
    if "ref" in col and (rm := re.fullmatch(_REF, col["ref"][2], re.I)):
        ref = (rm.group(1), rm.group(2))
    flag = vm.group("f") or (col["flag"][2] if "flag" in col else None)
    parts = [col[k] for k in ("name", "result", "unit", "ref", "flag") if k in col]
    start, end = min(p[0] for p in parts), max(p[1] for p in parts)
    meas = _finish(Measurement("lab", Span(doc, start, end), name, analyte, vm.group("v").replace(" ", ""),
                               normalize_unit(unit), extra={"table_row": True}), flag, ref)
    meas.row_time = row_time
    return [meas]


VITAL_LABELS = VITAL_NAMES

