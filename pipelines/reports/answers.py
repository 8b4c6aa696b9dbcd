"""Questions the report's resolved references answer exactly, answered from them in the
evidence-first shape.

`structure_answer(result, doc, question)` recognises, in English and Chinese, a question about a
numbered figure, table or exhibit of the report ("Figure 2", "Fig. 3", "Table 1", "图 2-1", "表3",
"附表1"):
- where it is cited ("Where is Figure 2 cited?", "Which sentences refer to Table 1?", "图1在哪里被引用？"):
  every mention the pipeline resolved to it, quoted in its sentence (page, box), the first mention
  the value, the pages named in the text;
- what it shows or its caption/title ("What does Figure 2 show?", "What is the title of Table 1?",
  "表 2-3 的标题是什么？"): its caption, quoted, the value being the caption;
- where it is ("On which page is Figure 3?", "图2在第几页？"): its page, quoting its caption.
A label the report does not have is said ("there is no Figure 9 in the report"), never guessed.
Any other question returns None and goes to evidence search. Mentions of other works' figures
(resolution "external") are not this report's citations and are left out.
"""

from __future__ import annotations

import re
import unicodedata

from pipelines.documents import Document, SourceSpan
from pipelines.llm.run import Answer, AnswerSpan, exact_answer, quoted
from pipelines.reports.models import ReportResult, Target

_LABEL = re.compile(r"(?P<word>figures?|figs?\.?|tables?|exhibits?|附表|图|表)\s*(?P<num>[0-9A-Za-z]+(?:[.\-][0-9A-Za-z]+)*)",
                    re.IGNORECASE)
_KINDS = {"fig": "figure", "figure": "figure", "figures": "figure", "figs": "figure", "图": "figure",
          "table": "table", "tables": "table", "表": "table", "附表": "table", "exhibit": "exhibit", "exhibits": "exhibit"}
_CITED = re.compile(r"\bcited\b|\brefer(?:s|red|ences?)? to\b|\bmention(?:s|ed)?\b|\bwhere\b.*\b(?:cited|referenced|"
                    r"discussed|mentioned)\b|\bwhich (?:sentences?|passages?|sections?)\b|引用|提到|提及|在哪里被", re.I)
_SHOWS = re.compile(r"\bshows?\b|\bcaption\b|\btitle\b|\bdepicts?\b|\billustrates?\b|\babout\b|\bwhat is in\b|"
                    r"标题|题目|展示|显示|说明了?什么|是什么|名称", re.I)
_PAGE = re.compile(r"\bwhich page\b|\bwhat page\b|\bon which page\b|\bwhere is\b|第几页|哪一页|在哪一?页", re.I)


def _norm_number(s: str) -> str:
    return re.sub(r"[\u00ad\u2010-\u2015\u2212]", "-", unicodedata.normalize("NFKC", s)).strip(".").casefold()


def _sentences(doc: Document, spans: list[SourceSpan]) -> list[AnswerSpan]:
    """The passage (`pipelines.llm.evidence.candidate_spans`) around each span, each once, in order:
    a citation is read in its sentence, not as "Fig. 2 a)" alone."""
    from bisect import bisect_right

    from pipelines.llm.evidence import candidate_spans

    passages = candidate_spans(doc)
    starts = [a for a, _ in passages]
    out: list[AnswerSpan] = []
    seen = set()
    for s in spans:
        k = bisect_right(starts, s.char_start) - 1
        a, b = passages[k] if k >= 0 and passages[k][1] >= s.char_end else (s.char_start, s.char_end)
        if (a, b) not in seen:
            seen.add((a, b))
            out.append(quoted(doc, doc.span(a, b)))
    return out


def _find(result: ReportResult, kind: str, number: str) -> Target | None:
    want = _norm_number(number)
    return next((t for t in result.targets if t.kind == kind and _norm_number(t.number) == want), None)


def structure_answer(result: ReportResult, doc: Document, question: str) -> Answer | None:
    """The answer to `question` from the report's targets and resolved mentions, or None."""
    q = unicodedata.normalize("NFKC", question).replace("\u00ad", "-")
    m = _LABEL.search(q)
    if m is None:
        return None
    word = m.group("word").casefold().rstrip(".")
    kind = _KINDS.get(word, _KINDS.get(word.rstrip("s")))
    if kind is None:
        return None
    zh = any("\u4e00" <= ch <= "\u9fff" for ch in q)
    asks = "cited" if _CITED.search(q) else "shows" if _SHOWS.search(q) else "page" if _PAGE.search(q) else None
    if asks is None:
        return None
    label = m.group(0)
    target = _find(result, kind, m.group("num"))

    def answer(text: str, spans: list[AnswerSpan], value: SourceSpan | None = None, status: str = "answered"
               ) -> Answer:
        return exact_answer(question, text, spans, value, status=status)

    if target is None:
        return answer(f"报告中没有{label}。" if zh else f"There is no {label} in the report.", [], status="not_stated")
    if asks == "cited":
        cites = [x for x in result.mentions if target.id in x.targets and x.resolution == "internal"]
        if not cites:
            text = f"{target.label}在正文中没有被引用。" if zh else f"{target.label} is not cited in the text."
            return answer(text, [quoted(doc, target.span, bbox=target.bbox)])
        pages = sorted({x.page for x in cites})
        sentences = _sentences(doc, [x.span for x in cites[:10]])
        first = " ".join(sentences[0].text.split())
        text = (f"{target.label}在第{'、'.join(map(str, pages))}页被引用{len(cites)}次，首次：“{first}”" if zh else
                f"{target.label} is cited {len(cites)} time{'s' if len(cites) != 1 else ''}, on page"
                f"{'s' if len(pages) != 1 else ''} {', '.join(map(str, pages))}; first: “{first}”")
        return answer(text, sentences, value=cites[0].span)
    cap = quoted(doc, target.span, bbox=target.bbox)
    if asks == "shows":
        caption = " ".join((target.caption or target.span.text).split())
        return answer(caption, [cap], value=target.span)
    text = f"{target.label}在第{target.page}页。" if zh else f"{target.label} is on page {target.page}."
    return answer(text, [cap])
