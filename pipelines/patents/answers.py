"""Questions the claim tree answers exactly, answered from it in the evidence-first shape.

`structure_answer(result, doc, question)` recognises, in English and Chinese:
- which claims are independent ("Which claims are independent?", "独立权利要求有哪些？");
- what claim N depends on ("What claim does claim 5 depend on?", "权利要求5引用哪项权利要求？");
- which claims depend on claim N ("Which claims depend on claim 1?", "哪些权利要求引用权利要求1？");
- the elements of claim N ("What are the elements of claim 3?", "权利要求3包括哪些技术特征？").
The answer is a `pipelines.llm.Answer` with `route` "structure": its text says the result, its
quoted passages are the claim text that shows it (each independent claim's opening; the reference
phrase of claim N, its value span; the dependents' reference phrases; claim N's elements), and its
confidence is the parser's (1.0: the tree is exact for the claims it read; a claim it could not
link is said, not guessed). Any other question returns None and goes to evidence search.
"""

from __future__ import annotations

import re
import unicodedata

from pipelines.documents import Document, SourceSpan
from pipelines.llm.run import Answer, AnswerSpan, exact_answer, quoted
from pipelines.patents.model import PatentResult

_N = r"(\d{1,4})"
_INDEPENDENT = re.compile(r"\bindependent claims?\b|\bwhich claims? (?:is|are) independent\b|独立权利要求", re.I)
_PARENT = [re.compile(rf"\bclaim {_N}\b.*\bdepends? (?:on|from)\b|\bdoes claim {_N} depend\b|"
                      rf"\bparent (?:claim )?of claim {_N}\b|\bclaim {_N} (?:refers?|is dependent) (?:to|on)\b", re.I),
           re.compile(rf"权利要求\s*{_N}\s*(?:引用|从属于|依赖于?)|权利要求\s*{_N}\s*(?:所)?引用的?是?哪")]
_CHILDREN = [re.compile(rf"\bwhich claims? depends? (?:on|from) claim {_N}\b|\bdependents? of claim {_N}\b|"
                        rf"\bclaims? (?:that )?(?:depend|refer) (?:on|from|to) claim {_N}\b", re.I),
             re.compile(rf"哪些?(?:项)?权利要求(?:引用|从属于)(?:了)?权利要求\s*{_N}|引用(?:了)?权利要求\s*{_N}的")]
_ELEMENTS = [re.compile(rf"\b(?:what are|list) the (?:elements|limitations|features) of claim {_N}\b|"
                        rf"\bwhat does claim {_N} (?:comprise|include|recite|require)\?|"
                        rf"^\s*(?:the )?(?:elements|limitations) of claim {_N}\b", re.I),
             re.compile(rf"权利要求\s*{_N}\s*(?:包括|包含|的技术特征|有哪些(?:技术)?特征)")]


def _number(patterns: list[re.Pattern[str]], q: str) -> int | None:
    for pat in patterns:
        m = pat.search(q)
        if m:
            return int(next(g for g in m.groups() if g))
    return None


def _list(nums: list[int], zh: bool = False) -> str:
    if not nums:
        return "无" if zh else "none"
    if len(nums) == 1:
        return str(nums[0])
    if zh:
        return "、".join(map(str, nums[:-1])) + "和" + str(nums[-1])
    return ", ".join(map(str, nums[:-1])) + " and " + str(nums[-1])


def structure_answer(result: PatentResult, doc: Document, question: str) -> Answer | None:
    """The answer to `question` from the claim tree, or None when the tree does not answer it."""
    q = unicodedata.normalize("NFKC", question)
    claims = {c.number: c for c in result.claims if not c.cancelled}
    zh = any("\u4e00" <= ch <= "\u9fff" for ch in q)

    def answer(text: str, spans: list[AnswerSpan], value: SourceSpan | None = None) -> Answer:
        return exact_answer(question, text, spans, value, kind="claim")

    def missing(n: int) -> Answer:
        text = f"权利要求{n}不在权利要求书中。" if zh else f"There is no claim {n} in the claim set."
        return exact_answer(question, text, [], status="not_stated", kind="claim")

    n = _number(_CHILDREN, q)
    if n is not None:
        if n not in claims:
            return missing(n)
        kids = sorted(c.number for c in claims.values() if n in c.depends_on)
        refs = [quoted(doc, r.span, 300) for c in claims.values() if n in c.depends_on
                for r in c.references if n in r.claims][:10]
        text = (f"权利要求{_list(kids, True)}引用权利要求{n}。" if zh and kids else f"权利要求{n}没有从属权利要求。" if zh
                else f"Claims {_list(kids)} depend on claim {n}." if len(kids) > 1
                else f"Claim {kids[0]} depends on claim {n}." if kids else f"No claim depends on claim {n}.")
        return answer(text, refs or [quoted(doc, claims[n].span, 300)])
    n = _number(_PARENT, q)
    if n is not None:
        if n not in claims:
            return missing(n)
        c = claims[n]
        if c.independent or not c.depends_on:
            text = f"权利要求{n}是独立权利要求，不引用其他权利要求。" if zh else \
                f"Claim {n} is independent: it depends on no other claim."
            return answer(text, [quoted(doc, c.span, 300)])
        refs = [r for r in c.references if r.kind != "external"]
        text = (f"权利要求{n}引用权利要求{_list(c.depends_on, True)}。" if zh
                else f"Claim {n} depends on claim{'s' if len(c.depends_on) > 1 else ''} {_list(c.depends_on)}.")
        spans = [quoted(doc, r.span, 300) for r in refs] or [quoted(doc, c.span, 300)]
        return answer(text, spans, value=refs[0].span if refs else None)
    if _INDEPENDENT.search(q):
        ind = sorted(c.number for c in claims.values() if c.independent)
        text = (f"独立权利要求：{_list(ind, True)}。" if zh
                else f"Claim{'s' if len(ind) != 1 else ''} {_list(ind)} {'are' if len(ind) != 1 else 'is'} independent.")
        return answer(text, [quoted(doc, claims[k].span, 200) for k in ind])
    n = _number(_ELEMENTS, q)
    if n is not None:
        if n not in claims:
            return missing(n)
        c = claims[n]
        parts = [quoted(doc, e) for e in c.elements] or [quoted(doc, c.span, 300)]
        text = (f"权利要求{n}的技术特征：" if zh else f"Claim {n} recites: ") + "; ".join(
            " ".join(p.text.split()) for p in parts)
        return answer(text, parts)
    return None
