"""Figures, tables, exhibits and charts: captions told apart from mentions, the box of the whole
object (caption plus the drawn graphic, or the table's ruling/word block), table rows, and a
plain-text description of each.

A caption is a line that starts with a label and a number ("Figure 3: …", "Table II.", "图 2-1
示例图片", "图表5：…") and is supported by evidence: a caption-like separator or text, a paragraph
start, a graphic or table beside it, a centred line. A line that merely starts with a mention
("Fig. 3 proved much more challenging", "图1的源代码") does not collect enough evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from pipelines.documents import Document, HasSpan, Span
from pipelines.reports.labels import (
    DOT_LEADER,
    EN_LABEL_RE,
    NUM_RE,
    NUM_RE_ZH,
    ZH_LABEL_RE,
    label_kind,
    norm_number,
)
from pipelines.reports.layout import BBox, Layout, Line, overlaps, union
from pipelines.text.script import HAN_EXT, count_cjk

# a caption's start: label, number, separator and the rest (Chinese tried first)
_CAPTION_STARTS = (
    re.compile(rf"^\s*(?P<label>{ZH_LABEL_RE})\s*(?P<num>{NUM_RE_ZH})(?P<sep>\s*[.:：、．]\s*|\s*)(?P<rest>.*)$"),
    re.compile(rf"^\s*(?P<label>{EN_LABEL_RE})\s*(?P<num>{NUM_RE})(?P<panel>[a-h](?![a-z]))?(?P<sep>\s*[.:|—–]\s*|\s+|$)(?P<rest>.*)$"),
)
# what follows a number when the line is a sentence that begins with a mention, not a caption
_EN_SENTENCE = re.compile(r"^(?:[a-z(,;)\]]|and\b|or\b|to\b|in\b|of\b|shows?\b|presents?\b|is\b|are\b|was\b|were\b)")
_ZH_SENTENCE = re.compile(
    r"^(?:[的为是和及与、，,。；;）)里]|中(?:[的可，,所看显展列给描我各]|$)|所示|可以|可见|可知|给出|显示|表明|表示|展示|列出|列举|"
    r"说明|描述|反映|揭示|呈现|对比|比较|总结|汇总|统计|记录|包含|包括|至|到|-|~|～)"
)
_CONTINUED = re.compile(r"(?:^续表)|\((?:continued|cont\.?|续)\)|\bcontinued\b", re.IGNORECASE)


@dataclass
class Caption(HasSpan):
    """A figure, table, exhibit or chart caption: its `Span` of the document's text (from the label
    to the caption's end), the parsed label and number, and what was found around it."""

    kind: str
    label: str  # label as printed up to the number: "Figure 3", "图 2-1"
    number: str
    line: Line
    span: Span
    caption: str  # caption text after the label and number, whitespace runs joined
    score: int
    evidence: list[str]
    continued: bool
    bbox: BBox | None = None
    rows: list[list[str]] = field(default_factory=list)
    inner_words: list[str] = field(default_factory=list)
    continued_on: list[int] = field(default_factory=list)
    label_spans: list[tuple[int, int]] = field(default_factory=list)  # this label and its continuations'


def parse_caption_start(text: str) -> tuple[str, str, str, str, str] | None:
    """(kind, label, number, separator, rest) when `text` starts with a float label and number."""
    for rx in _CAPTION_STARTS:
        m = rx.match(text)
        if m:
            kind = label_kind(m.group("label"))
            if kind is None:
                continue
            label = text[m.start("label"):m.end("num")].strip()
            return kind, label, norm_number(m.group("num")), m.group("sep"), m.group("rest")
    return None


def _graphics_near(layout: Layout, line: Line, margin: float = 36.0) -> list[BBox]:
    pl = layout.pages.get(line.page)
    if pl is None or line.bbox is None:
        return []
    x0, _, x1, _ = line.bbox
    top = _reach(layout, line, "above")
    bottom = _reach(layout, line, "below")
    return [g for g in pl.graphics if g[2] > x0 - 80 and g[0] < x1 + 80 and (top - margin < g[3] and g[1] < bottom + margin)]


def text_width(layout: Layout, page: int) -> float:
    cache = layout.__dict__.setdefault("_text_width", {})
    if page not in cache:
        boxes = [ln.bbox for ln in layout.lines_on(page) if ln.bbox]
        cache[page] = (max(b[2] for b in boxes) - min(b[0] for b in boxes)) if boxes else 0.0
    return cache[page]


def is_prose(layout: Layout, ln: Line) -> bool:
    """A line of running text: long (>= 60% of the page's text width), few characters per gap."""
    if ln.bbox is None:
        return len(ln.text) > 60
    if (ln.bbox[2] - ln.bbox[0]) < 0.6 * text_width(layout, ln.page):
        return False
    tokens = ln.text.split()
    wordy = [t for t in tokens if sum(ch.isalpha() for ch in t) >= 2]
    return (len(wordy) >= 6 and len(wordy) >= 0.5 * len(tokens)) or count_cjk(ln.text, HAN_EXT) >= 15


def _reach(layout: Layout, line: Line, direction: str) -> float:
    """How far a figure's own text (axis labels, legends, sub-captions) extends from a caption:
    short non-prose lines stacked closely above (or below) it on the same page."""
    if line.bbox is None:
        return 0.0
    x0, top, x1, bottom = line.bbox
    same = [x for x in layout.lines_on(line.page) if x.bbox and x is not line and x.bbox[2] > x0 - 120 and x.bbox[0] < x1 + 120]
    if direction == "above":
        edge = top
        for x in sorted((x for x in same if x.bbox[3] <= top + 1), key=lambda x: -x.bbox[3]):
            if edge - x.bbox[3] > 2.5 * max(x.height, layout.body_height, 6.0) or is_prose(layout, x) or parse_caption_start(x.text):
                break
            edge = min(edge, x.bbox[1])
        return edge
    edge = bottom
    for x in sorted((x for x in same if x.bbox[1] >= bottom - 1), key=lambda x: x.bbox[1]):
        if x.bbox[1] - edge > 2.5 * max(x.height, layout.body_height, 6.0) or is_prose(layout, x) or parse_caption_start(x.text):
            break
        edge = max(edge, x.bbox[3])
    return edge


def find_captions(doc: Document, layout: Layout) -> list[Caption]:
    """Every caption of a figure/table/exhibit/chart, with duplicates settled and continuations merged."""
    out: list[Caption] = []
    lines = layout.lines
    candidates: list[tuple[int, Line, bool]] = []
    for i, ln in enumerate(lines):
        if DOT_LEADER.search(ln.text) or not re.search(rf"{ZH_LABEL_RE}|{EN_LABEL_RE}", ln.text):
            continue  # nothing to see, or a table of contents / list of figures line
        parts = _side_by_side(doc, ln)
        candidates.extend((i, part, len(parts) > 1) for part in parts)
    for i, ln, beside in candidates:
        parsed = parse_caption_start(ln.text)
        if parsed is None:
            continue
        kind, label, number, sep, rest = parsed
        evidence: list[str] = []
        score = 0
        zh = bool(re.match(rf"\s*{ZH_LABEL_RE}", ln.text))
        rest_s = rest.strip()
        if zh:
            if sep.strip() in {":", "：", "."}:  # "图1：…" never starts a sentence
                score += 2
                evidence.append("separator after the number")
            elif _ZH_SENTENCE.match(rest_s):
                score -= 3
            elif sep.strip():
                score += 2
                evidence.append("separator after the number")
            elif rest_s:
                score += 1
                evidence.append("caption text after the number")
        else:
            if _EN_SENTENCE.match(rest_s):
                score -= 3
            elif sep.strip() in {".", ":", "|", "—", "–"}:
                score += 2
                evidence.append(f"'{sep.strip()}' after the number")
            elif rest_s[:1].isupper() or not rest_s:
                score += 1
                evidence.append("capitalised text after the number")
        if ln.blank_before or i == 0 or lines[i - 1].page != ln.page or _gap_above(lines, i) > 1.2 * max(ln.height, 1.0):
            score += 1
            evidence.append("starts a block")
        if _graphics_near(layout, ln):
            score += 2
            evidence.append("graphic beside it")
        elif kind in ("table", "exhibit") and any(_table_near(tb, ln) for tb, _ in layout.tables_on(ln.page)):
            score += 2
            evidence.append("table beside it")
        if not beside and _in_caption_list(lines, i):
            score -= 2
            evidence.append("in a list of captions (a list of figures?)")
        if _stands_alone(layout, lines, i, ln):
            score += 1
            evidence.append("a short line standing alone")
        pl = layout.pages.get(ln.page)
        if pl and pl.width and ln.bbox:
            centre = (ln.bbox[0] + ln.bbox[2]) / 2
            if abs(centre - pl.width / 2) < 0.06 * pl.width and (ln.bbox[2] - ln.bbox[0]) < 0.75 * pl.width:
                score += 1
                evidence.append("centred")
        continued = bool(_CONTINUED.search(ln.text[:40]))
        if score < 3:
            continue
        end = ln.end if beside else _caption_end(lines, i)
        text = (rest + doc.text[ln.end:end]).strip()
        text = re.sub(r"\s*\n\s*", " ", text)
        out.append(Caption(kind, label, number, ln, Span(doc, ln.start, end), text, score, evidence, continued))
    return _settle(out)


def _side_by_side(doc: Document, ln: Line) -> list[Line]:
    """A line holding two captions side by side ("图2：… 图3：…" under two figures) as two lines."""
    if doc.char_boxes is None:
        return [ln]
    starts = [ln.start]
    last_x1 = None
    for k in range(ln.start, ln.end):
        b = doc.char_boxes[k]
        if np.isnan(b[0]):
            continue
        if last_x1 is not None and b[0] - last_x1 > 2.0 * max(ln.height, 1.0):
            starts.append(k)
        last_x1 = float(b[2])
    if len(starts) < 2:
        return [ln]
    bounds = list(zip(starts, starts[1:] + [ln.end], strict=True))
    heads = [a for a, b in bounds if parse_caption_start(doc.text[a:b])]
    if len(heads) < 2:
        return [ln]
    cuts = heads if heads[0] == ln.start else [ln.start] + heads
    out = []
    for a, b in zip(cuts, cuts[1:] + [ln.end], strict=True):
        while b > a and doc.text[b - 1].isspace():
            b -= 1
        out.append(Line(doc, a, b, index=ln.index, page=ln.page, bbox=doc.bbox_of(a, b), height=ln.height,
                        blank_before=ln.blank_before))
    return out


def _in_caption_list(lines: list[Line], i: int) -> bool:
    """A caption-like line stacked tightly on another one, left edges aligned: an entry of a list
    of figures/tables, not a caption (a caption sits next to its drawing). PDF input only."""
    ln = lines[i]
    if ln.bbox is None:
        return False
    for k in (i - 1, i + 1):
        if not 0 <= k < len(lines) or lines[k].page != ln.page or lines[k].bbox is None:
            continue
        o = lines[k]
        gap = ln.bbox[1] - o.bbox[3] if k < i else o.bbox[1] - ln.bbox[3]
        if gap < 1.0 * max(ln.height, 1.0) and abs(o.bbox[0] - ln.bbox[0]) < 5 and parse_caption_start(o.text):
            return True
    return False


def _stands_alone(layout: Layout, lines: list[Line], i: int, ln: Line) -> bool:
    """A short line with a paragraph break after it (a one-line caption, as in plain text)."""
    nxt = lines[i + 1] if i + 1 < len(lines) else None
    breaks = nxt is None or nxt.blank_before or nxt.page != ln.page
    if ln.bbox is not None:
        width = text_width(layout, ln.page)
        short = width > 0 and (ln.bbox[2] - ln.bbox[0]) < 0.6 * width
    else:
        short = len(ln.text) < 50
    return breaks and short


def _gap_above(lines: list[Line], i: int) -> float:
    if i == 0 or lines[i].bbox is None or lines[i - 1].bbox is None or lines[i - 1].page != lines[i].page:
        return 1e9
    return lines[i].bbox[1] - lines[i - 1].bbox[3]


def _table_near(tb: BBox, ln: Line) -> bool:
    if ln.bbox is None:
        return False
    beside = tb[0] < ln.bbox[2] and ln.bbox[0] < tb[2]
    return beside and (-40 < tb[1] - ln.bbox[3] < 40 or -40 < ln.bbox[1] - tb[3] < 40)


def _caption_end(lines: list[Line], i: int) -> int:
    """End offset of a caption starting at line i: following lines of the same block (<= 6)."""
    end = lines[i].end
    first = lines[i]
    if first.bbox is None:
        return end  # plain text (docx, txt): a caption is its paragraph, one line
    for j in range(i + 1, min(i + 7, len(lines))):
        ln = lines[j]
        if ln.page != first.page or ln.blank_before or parse_caption_start(ln.text):
            break
        prev = lines[j - 1].bbox
        if ln.bbox and prev and (ln.bbox[1] < prev[3] - 1 or ln.bbox[0] > first.bbox[2] or ln.bbox[2] < first.bbox[0] - 40):
            break  # not the next line down in the caption's own column
        if ln.bbox and first.bbox and (ln.bbox[1] - lines[j - 1].bbox[3] > 0.8 * max(first.height, 1) if lines[j - 1].bbox else False):
            break
        # a caption's continuation lines sit within its horizontal extent (no wider than a column)
        if ln.bbox and first.bbox and (ln.bbox[0] < first.bbox[0] - 30 or abs(ln.height - first.height) > 1.5):
            break
        if first.bbox and ln.bbox and ln.bbox[2] - ln.bbox[0] < 0.5 * (first.bbox[2] - first.bbox[0]) and j > i + 1:
            end = ln.end
            break
        end = ln.end
    return end


def _settle(caps: list[Caption]) -> list[Caption]:
    """One caption per (kind, number): continuations merge into the first; otherwise the best
    evidence wins and, on a tie, every candidate is kept (mentions of it become ambiguous)."""
    by_key: dict[tuple[str, str], list[Caption]] = {}
    for c in caps:
        by_key.setdefault((c.kind, c.number), []).append(c)
    out: list[Caption] = []
    for group in by_key.values():
        main = [c for c in group if not c.continued] or group[:1]
        best = max(c.score for c in main)
        kept = [c for c in main if c.score == best]
        for c in group:
            if c not in kept and (c.continued or c.score < best):
                kept[0].continued_on.append(c.line.page)
                kept[0].label_spans.append(_label_span(c))
        for c in kept:
            c.label_spans.insert(0, _label_span(c))
        out.extend(kept)
    return sorted(out, key=lambda c: c.start)


def _label_span(c: Caption) -> tuple[int, int]:
    """Offsets of the printed label and number at the start of a caption line ('续表 2-3' included)."""
    off = c.line.text.find(c.label)
    start = c.line.start + max(off, 0)
    while start > c.line.start and c.line.text[start - c.line.start - 1] in "续附":
        start -= 1
    return start, c.line.start + max(off, 0) + len(c.label)


def attach_objects(doc: Document, layout: Layout, caps: list[Caption]) -> None:
    """Box of the whole object, rows of tables, words inside figures."""
    for c in caps:
        ln = c.line
        if ln.bbox is None:
            if c.kind in ("table", "exhibit"):  # plain text: tab-separated rows right after the caption
                following = [x for x in layout.lines if x.index > ln.index][:200]
                for x in following:
                    if "\t" not in x.text:
                        break
                    c.rows.append([cell.strip() for cell in x.text.split("\t")])
            continue
        cap_box = doc.bbox_of(c.start, c.end) or ln.bbox
        pl = layout.pages.get(ln.page)
        tables = layout.tables_on(ln.page) if c.kind in ("table", "exhibit") else []
        table = _nearest_table(tables, cap_box)
        if table is not None:
            c.bbox = union([cap_box, table[0]])
            c.rows = table[1]
            continue
        region = None
        if pl is not None and pl.graphics:
            # the drawing on the caption's side that is nearer; ties go to the usual side
            # (figures: caption under the drawing; tables: caption over it)
            above = _grow(layout, cap_box, pl.graphics, "above", caps, c)
            below = _grow(layout, cap_box, pl.graphics, "below", caps, c)
            d_above = cap_box[1] - above[3] if above else float("inf")
            d_below = below[1] - cap_box[3] if below else float("inf")
            if c.kind == "table":
                region = above if above and d_above + 6 < d_below else below or above
            else:
                region = below if below and d_below + 6 < d_above else above or below
        # a table (or an exhibit that is not a chart) printed as text: its rows
        chart = region is not None and c.kind == "exhibit" and any(
            g[2] - g[0] > 3 and g[3] - g[1] > 3 and overlaps(g, region) for g in pl.graphics)
        if c.kind == "table" or (c.kind == "exhibit" and not chart):
            block = _table_block(doc, layout, c)
            if block:
                rules = [g for g in (pl.graphics if pl else []) if _within_rows(g, cap_box, block)]
                c.bbox = union([cap_box] + [x.bbox for x in block if x.bbox] + rules)
                c.rows = _rows_from_lines(doc, block)
                continue
        if region is not None:
            region = _with_labels(layout, region, c)
            c.bbox = union([cap_box, region])
            inner = [x for x in layout.lines_on(ln.page) if x.bbox and overlaps(x.bbox, region, -1) and not (c.start <= x.start < c.end)]
            words: list[str] = []
            for x in inner:
                for w in x.text.split():
                    if w not in words and any(ch.isalpha() for ch in w) and not (len(w) > 2 and len(set(w)) == 1):
                        words.append(w)
            c.inner_words = words[:40]
            if c.kind == "table" and not c.rows:
                c.rows = _rows_from_lines(doc, inner)
        elif c.kind in ("table", "exhibit"):
            block = _word_block_below(layout, c)
            if block:
                c.bbox = union([cap_box] + [x.bbox for x in block if x.bbox])
                c.rows = _rows_from_lines(doc, block)
            else:
                c.bbox = cap_box
        else:
            c.bbox = cap_box


def _nearest_table(tables: list[tuple[BBox, list[list[str]]]], cap: BBox) -> tuple[BBox, list[list[str]]] | None:
    best = None
    for tb, rows in tables:
        if tb[2] < cap[0] - 40 or tb[0] > cap[2] + 40:
            continue
        gap = min(abs(tb[1] - cap[3]), abs(cap[1] - tb[3]))
        if gap < 40 and (best is None or gap < best[0]):
            best = (gap, (tb, rows))
    return best[1] if best else None


def _grow(layout: Layout, cap: BBox, graphics: list[BBox], direction: str, caps: list[Caption], me: Caption) -> BBox | None:
    """Union of the drawn objects next to a caption, grown while the next object is close."""
    others = [c.line.bbox for c in caps if c is not me and c.line.page == me.line.page and c.line.bbox]
    cands = [g for g in graphics if g[2] > cap[0] - 120 and g[0] < cap[2] + 120]
    if direction == "above":
        reach = _reach(layout, me.line, "above")
        cands = [g for g in cands if g[1] < cap[1] - 1 and g[3] <= cap[1] + 6]
        cands = [g for g in cands if not any(o[3] <= cap[1] and g[3] < o[1] for o in others)]
        seed = [g for g in cands if reach - g[3] < 40 and g[2] > cap[0] - 20 and g[0] < cap[2] + 20]
    else:
        reach = _reach(layout, me.line, "below")
        cands = [g for g in cands if g[3] > cap[3] + 1 and g[1] >= cap[3] - 6]
        cands = [g for g in cands if not any(o[1] >= cap[3] and g[1] > o[3] for o in others)]
        seed = [g for g in cands if g[1] - reach < 40 and g[2] > cap[0] - 20 and g[0] < cap[2] + 20]
    if not seed:
        return None
    region = union(seed)
    grew = True
    while grew:
        grew = False
        for g in cands:
            if g[0] >= region[0] and g[1] >= region[1] and g[2] <= region[2] and g[3] <= region[3]:
                continue
            if overlaps(g, region, 14.0):
                region = union([region, g])
                grew = True
    return region


def _with_labels(layout: Layout, region: BBox, c: Caption) -> BBox:
    """The drawing's box grown by the text that belongs to it: tick labels, legends, a source line
    (short, non-prose lines touching it), never another caption."""
    lines = [x for x in layout.lines_on(c.line.page) if x.bbox and not (c.start <= x.start < c.end)]
    grew = True
    while grew:
        grew = False
        for x in lines:
            b = x.bbox
            if b[0] >= region[0] and b[1] >= region[1] and b[2] <= region[2] and b[3] <= region[3]:
                continue
            if b[2] < region[0] or b[0] > region[2]:
                continue
            reach = 1.5 * max(min(x.height, layout.body_height or 12.0), 6.0)
            near = -1 < b[1] - region[3] < reach or -1 < region[1] - b[3] < reach
            near = near and b[0] >= region[0] - 40 and b[2] <= region[2] + 40  # not a paragraph's last line
            inside = b[1] < region[3] and b[3] > region[1]
            if (near or inside) and not is_prose(layout, x) and not parse_caption_start(x.text):
                region = union([region, b])
                grew = True
    return region


def _within_rows(g: BBox, cap: BBox, block: list[Line]) -> bool:
    boxes = [x.bbox for x in block if x.bbox]
    if not boxes:
        return False
    top = min([cap[1]] + [b[1] for b in boxes]) - 8
    bottom = max([cap[3]] + [b[3] for b in boxes]) + 8
    left = min(b[0] for b in boxes) - 60
    right = max(b[2] for b in boxes) + 60
    return g[1] >= top and g[3] <= bottom and g[0] >= left and g[2] <= right


def _table_block(doc: Document, layout: Layout, c: Caption) -> list[Line]:
    """Rows of a table printed as text: the closely stacked, non-prose lines below the caption
    (or above it, for a caption under its table)."""
    if c.line.bbox is None:
        return []
    cap_lines = [x for x in layout.lines_on(c.line.page) if c.start <= x.start < c.end]
    cap_top = min(x.bbox[1] for x in cap_lines if x.bbox)
    cap_bottom = max(x.bbox[3] for x in cap_lines if x.bbox)
    others = [x for x in layout.lines_on(c.line.page) if x.bbox and x not in cap_lines]
    for direction in ("below", "above"):
        block: list[Line] = []
        edge = cap_bottom if direction == "below" else cap_top
        seq = sorted((x for x in others if x.bbox[1] >= cap_bottom - 1), key=lambda x: x.bbox[1]) if direction == "below" else sorted(
            (x for x in others if x.bbox[3] <= cap_top + 1), key=lambda x: -x.bbox[3])
        for x in seq:
            gap = x.bbox[1] - edge if direction == "below" else edge - x.bbox[3]
            if gap > 3.0 * max(x.height, layout.body_height, 6.0) or parse_caption_start(x.text):
                break
            if is_prose(layout, x) and len(cells_of(doc, x)) < 2:
                break
            block.append(x)
            edge = x.bbox[3] if direction == "below" else x.bbox[1]
        if len(block) >= 2:
            return sorted(block, key=lambda x: x.bbox[1])
    return []




def _word_block_below(layout: Layout, c: Caption) -> list[Line]:
    lines = layout.lines
    start = next((k for k, ln in enumerate(lines) if ln.start >= c.end), len(lines))
    block: list[Line] = []
    for ln in lines[start:start + 80]:
        if ln.page != c.line.page or parse_caption_start(ln.text):
            break
        if block and ln.blank_before:
            break
        block.append(ln)
    return block if len(block) >= 2 else []


def cells_of(doc: Document, ln: Line) -> list[str]:
    """A line split at wide gaps between character boxes (> 1.2 x character height)."""
    boxes = doc.char_boxes
    if boxes is None:
        return [x for x in re.split(r"\s{2,}", ln.text) if x] or [ln.text]
    cells, cur, last_x1 = [], "", None
    for k in range(ln.start, ln.end):
        b = boxes[k]
        ch = doc.text[k]
        if np.isnan(b[0]):
            cur += ch
            continue
        if last_x1 is not None and b[0] - last_x1 > 1.2 * max(ln.height, 1.0) and cur.strip():
            cells.append(cur.strip())
            cur = ""
        cur += ch
        last_x1 = float(b[2])
    if cur.strip():
        cells.append(cur.strip())
    return cells


def _rows_from_lines(doc: Document, lines: list[Line]) -> list[list[str]]:
    return [cells_of(doc, ln) for ln in lines]


def describe(c: Caption) -> str:
    """Plain-text alt text: caption, words inside the figure, or table header and first rows."""
    parts = [f"{c.label}: {c.caption}".strip().rstrip(":")]
    if c.kind in ("table", "exhibit") and c.rows:
        header = [x for x in c.rows[0] if x]
        if header:
            parts.append("Columns: " + " | ".join(header) + ".")
        body = [" | ".join(x for x in r if x) for r in c.rows[1:3]]
        if body:
            parts.append("First rows: " + "; ".join(body) + ".")
        parts.append(f"{len(c.rows)} rows.")
    elif c.inner_words:
        parts.append("Text in the figure (axis labels, legend): " + ", ".join(c.inner_words) + ".")
    if c.continued_on:
        parts.append("Continued on page " + ", ".join(map(str, c.continued_on)) + ".")
    return " ".join(parts)
