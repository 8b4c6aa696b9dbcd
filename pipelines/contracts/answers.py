"""Questions the clause alignment answers exactly, answered from it in the evidence-first shape.

`structure_answer(result, docs, question)` recognises, in English and Chinese:
- what changed in a clause ("What changed in section 12.3?", "How was clause 5.1 amended?",
  "第二十四条有什么变化？", "第24条改了什么？"): "Clause 12.3: «Disclosing Party» → «Discloser»" from
  the alignment's word diff (the first changes; unchanged, added, deleted, moved and renumbered
  said as such), quoting the clause in the later version (and the earlier one), the first changed
  words in the later version being the value;
- which clauses were added or deleted ("Which clauses were added?", "删除了哪些条款？"), quoting each.
A clause number the versions do not have is said, never guessed. Any other question returns None
and goes to evidence search.
"""

from __future__ import annotations

import re
import unicodedata

from pipelines.contracts.model import AlignmentRow, ClauseOut, ContractResult
from pipelines.documents import Document, SourceSpan
from pipelines.llm.run import Answer, AnswerSpan, exact_answer, quoted
from pipelines.text.numerals import chinese_to_int

_CLAUSE = re.compile(r"\b(?:section|clause|article|paragraph|§)\s*(?P<num>\d+(?:\.\d+)*(?:\([a-z0-9]+\))*|"
                     r"(?-i:[A-Z])(?:\.\d+)*\b)|"
                     r"第\s*(?P<zh>[零〇一二三四五六七八九十百千两\d]+)\s*条", re.IGNORECASE)
_CHANGED = re.compile(r"\bchang|\bamend|\brevis|\bdiffer|\bmodif|\bedit|\bnew (?:title|heading|name|wording)\b|"
                      r"\brenam|变化|变更|修改|改了|不同|修订|区别|新标题", re.I)
_ADDED = re.compile(r"\b(?:clauses?|sections?|articles?)\b.*\b(?:added|new|inserted)\b|\bwhich (?:clauses?|sections?|"
                    r"articles?) (?:are|were) new\b|新增|增加了?哪些|添加", re.I)
_DELETED = re.compile(r"\b(?:clauses?|sections?|articles?)\b.*\b(?:deleted|removed|dropped)\b|删除|删去|去掉了?哪些", re.I)
MAX_OPS = 3  # changed stretches named in the answer's text


def _norm(num: str) -> str:
    return num.strip().rstrip(".").casefold()


def _clause_numbers(c: ClauseOut) -> set[str]:
    """The ways a question may name the clause: its printed number and its anchor (the number path:
    "D.3" for the "3." under section D), Chinese article numbers as integers."""
    out = set()
    for label in (c.number, c.anchor):
        if not label or label.startswith(("h:", "preamble")):
            continue
        m = re.fullmatch(r"第\s*([零〇一二三四五六七八九十百千两\d]+)\s*条", label.strip())
        out.add(str(_zh_int(m.group(1))) if m else _norm(label))
    return out


def _zh_int(s: str) -> int | str:
    if s.isdigit():
        return int(s)
    n = chinese_to_int(s)
    return s if n is None else n


def structure_answer(result: ContractResult, docs: list[Document], question: str) -> Answer | None:
    """The answer to `question` from the alignment of the two versions, or None."""
    q = unicodedata.normalize("NFKC", question)
    zh = any("\u4e00" <= ch <= "\u9fff" for ch in q)
    a_key, b_key = list(result.documents)[:2]
    clauses = {k: {c.anchor: c for c in cs} for k, cs in result.clauses.items()}

    def answer(text: str, spans: list[AnswerSpan], value: SourceSpan | None = None, status: str = "answered"
               ) -> Answer:
        return exact_answer(question, text, spans, value, status=status)

    m = _CLAUSE.search(q)
    if m is not None and _CHANGED.search(q):
        want = str(_zh_int(m.group("zh"))) if m.group("zh") else _norm(m.group("num"))
        row = _row_for(result, clauses, a_key, b_key, want)
        label = m.group(0)
        label = label[:1].upper() + label[1:]
        if row is None:
            return answer(f"两个版本中都没有{label}。" if zh else f"Neither version has {label}.", [],
                          status="not_stated")
        return _change_answer(answer, row, clauses, a_key, b_key, docs, label, zh)
    for pattern, change in ((_ADDED, "added"), (_DELETED, "deleted")):
        if pattern.search(q) and m is None:
            key = b_key if change == "added" else a_key
            rows = [r for r in result.alignment if r.change == change]
            cs = [clauses[key][r.b if change == "added" else r.a] for r in rows
                  if (r.b if change == "added" else r.a) in clauses[key]]
            names = [c.number.strip() if c.number else (c.heading or c.anchor) for c in cs]
            if not cs:
                text = ("两个版本之间没有" + ("新增" if change == "added" else "删除") + "的条款。" if zh
                        else f"No clause was {change}.")
                return answer(text, [])
            text = (("新增" if change == "added" else "删除") + "的条款：" + "、".join(names) + "。" if zh
                    else f"{change.capitalize()}: " + "; ".join(names) + ".")
            return answer(text, [quoted(docs, c.span, 300) for c in cs[:10]])
    return None


def _row_for(result: ContractResult, clauses, a_key: str, b_key: str, want: str) -> AlignmentRow | None:
    for r in result.alignment:
        for key, anchor in ((b_key, r.b), (a_key, r.a)):
            c = clauses[key].get(anchor) if anchor else None
            if c is not None and want in _clause_numbers(c):
                return r
    return None


def _change_answer(answer, row: AlignmentRow, clauses, a_key: str, b_key: str, docs: list[Document], label: str,
                   zh: bool):
    a = clauses[a_key].get(row.a) if row.a else None
    b = clauses[b_key].get(row.b) if row.b else None
    spans = [quoted(docs, c.span) for c in (b, a) if c is not None]
    if row.change == "unchanged":
        return answer(f"{label}在两个版本中相同。" if zh else f"{label} is the same in both versions.", spans)
    if row.change == "added":
        title = f": «{b.heading}»" if b is not None and b.heading else ""
        return answer(f"{label}是新版本新增的{title}。" if zh else f"{label} was added in the later version{title}.",
                      spans, value=b.span if b is not None else None)
    if row.change == "deleted":
        title = f": «{a.heading}»" if a is not None and a.heading else ""
        return answer(f"{label}在新版本中被删除{title}。" if zh else f"{label} was deleted in the later version{title}.",
                      spans)
    ops = [d for d in row.diff if d.op in ("replace", "insert", "delete")]
    parts = []
    for d in ops[:MAX_OPS]:
        old = " ".join(d.a_span.text.split()) if d.a_span else ""
        new = " ".join(d.b_span.text.split()) if d.b_span else ""
        parts.append(f"«{old}» → «{new}»" if old and new else f"+«{new}»" if new else f"−«{old}»")
    more = len(ops) - len(parts)
    head = f"{label}：" if zh else f"{label}: "
    what = "; ".join(parts) if parts else ("仅编号或格式变化" if zh else "renumbered or reformatted only")
    if row.renumbered and parts:
        what += "（并重新编号）" if zh else " (and renumbered)"
    if more > 0:
        what += f"（另有{more}处）" if zh else f" (and {more} more)"
    value = next((d.b_span for d in ops if d.b_span is not None), None)
    return answer(head + what, spans, value=value)
