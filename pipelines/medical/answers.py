"""Questions the patient's lists answer exactly, answered from them in the evidence-first shape.

`structure_answer(result, docs, question)` recognises, in English and Chinese, a question for the
whole list:
- the medications ("What medications is the patient on?", "List the medications", "患者用了哪些药？",
  "用药清单"): every drug of the medication list with its latest dose, route and frequency and when
  it started and stopped, quoting the note that starts it (and the one that last names it);
- the problems ("What problems does the patient have?", "What is the problem list?", "患者有哪些诊断？"):
  every problem with its status and first and last dated mention, quoting them.
A question about one drug or one problem ("Which antibiotic was started on admission?") is not a
list question: it goes to evidence search, which quotes the passage that holds it.
"""

from __future__ import annotations

import re
import unicodedata

from pipelines.documents import Document
from pipelines.llm.run import Answer, AnswerSpan, exact_answer, quoted
from pipelines.medical.models import MedicalResult

_MEDS = re.compile(r"\bmedication list\b|\blist (?:of )?(?:the |all )?(?:the patient'?s )?medications\b|"
                   r"\bwhat medications (?:is|was|does|did|has) the patient\b|\ball (?:of )?(?:the )?medications\b|"
                   r"用药清单|用了哪些药|服用了?哪些药|药物有哪些|用药情况", re.I)
_PROBLEMS = re.compile(r"\bproblem list\b|\bwhat (?:problems|conditions|diagnoses) (?:does|did|has|have|is|was)\b|"
                       r"\blist (?:of )?(?:the )?(?:problems|conditions|diagnoses)\b|有哪些诊断|问题清单|诊断有哪些",
                       re.I)
# a qualifier makes it a question about part of the list ("discharged on", "for the sinusitis", "in July"):
# evidence search answers it
_PART = re.compile(r"\bdischarg|\badmi(?:ssion|tted)\b|\bstart|\bstop|\bfor (?:the|his|her)\b|\bin (?:19|20)\d\d\b|"
                   r"\bin (?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)|出院|入院|术后|术前|因为|针对", re.I)
MAX_ITEMS = 20


def _dates(first: str | None, last: str | None, zh: bool = False) -> str:
    if first and last and first != last:
        return f"{first}{'至' if zh else ' to '}{last}"
    return first or last or ("未注明日期" if zh else "undated")


def structure_answer(result: MedicalResult, docs: list[Document], question: str) -> Answer | None:
    """The answer to `question` from the medication or problem list, or None."""
    q = unicodedata.normalize("NFKC", question)
    zh = any("\u4e00" <= ch <= "\u9fff" for ch in q)

    def answer(text: str, spans: list[AnswerSpan]) -> Answer:
        return exact_answer(question, text, spans)

    if _PART.search(q):
        return None
    if _MEDS.search(q):
        meds = result.medications[:MAX_ITEMS]
        if not meds:
            return answer("病历中没有记录用药。" if zh else "No medication is recorded in the notes.", [])
        lines = []
        for m in meds:
            how = " ".join(x for x in (m.dose, m.route, m.frequency) if x)
            when = _dates(m.start, m.stop if m.stopped else None, zh)
            state = ("已停用" if zh else "stopped") if m.stopped else ("新开" if zh else "new") if m.status == "new" \
                else ("继续" if zh else "continued")
            lines.append(f"{m.drug}{' ' + how if how else ''} ({state}, {when})")
        spans = []
        for m in meds:
            for s in (m.first_evidence, m.last_evidence):
                q_span = quoted(docs, s)
                if all((x.doc_id, x.char_start) != (q_span.doc_id, q_span.char_start) for x in spans):
                    spans.append(q_span)
        return answer(("用药：" if zh else "Medications: ") + "; ".join(lines) + ".", spans)
    if _PROBLEMS.search(q):
        probs = result.problems[:MAX_ITEMS]
        if not probs:
            return answer("病历中没有记录诊断。" if zh else "No problem is recorded in the notes.", [])
        lines = [f"{p.text} ({p.status}, {_dates(p.first, p.last, zh)})" for p in probs]
        spans = [quoted(docs, p.first_evidence) for p in probs]
        return answer(("诊断：" if zh else "Problems: ") + "; ".join(lines) + ".", spans)
    return None
