"""Questions the patient's lists answer exactly, answered from them in the evidence-first shape.

`structure_answer(result, docs, question)` recognises, in English and Chinese, a question for the
whole list:
- the medications ("What medications is the patient on?", "List the medications", "患者用了哪些药？",
  "用药清单"): every drug of the medication list with its latest dose, route and frequency and when
  it started and stopped, quoting the note that starts it (and the one that last names it);
- the problems ("What problems does the patient have?", "What is the problem list?", "患者有哪些诊断？"):
  every problem with its status and first and last dated mention, quoting them;
- the labs out of range ("Which labs were abnormal?", "What lab results were out of range?",
  "患者有哪些检验结果异常？"): every lab result flagged high or low (by the report's own flag or
  reference range, else the adult range the pipeline knows), with its value, range and date,
  quoting the line that reports it.
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
_LABS = re.compile(r"\b(?:abnormal|out[- ]of[- ]range|flagged)\b.{0,30}\b(?:labs?|laborator(?:y|ies)|results?|values?|tests?)\b|"
                   r"\b(?:labs?|laboratory (?:results?|values?|tests?)|lab (?:results?|values?|tests?))\b.{0,30}"
                   r"\b(?:abnormal|out[- ]of[- ]range|flagged|high or low)\b|"
                   r"(?:检验|化验|实验室检查|检查)(?:结果|指标)?.{0,6}(?:异常|超出|偏高|偏低)|异常的?(?:检验|化验|指标|结果)|"
                   r"哪些指标(?:异常|升高|降低)", re.I)
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
    if _LABS.search(q):
        return _labs_answer(result, docs, question, zh)
    if _PROBLEMS.search(q):
        probs = result.problems[:MAX_ITEMS]
        if not probs:
            return answer("病历中没有记录诊断。" if zh else "No problem is recorded in the notes.", [])
        lines = [f"{p.text} ({p.status}, {_dates(p.first, p.last, zh)})" for p in probs]
        spans = [quoted(docs, p.first_evidence) for p in probs]
        return answer(("诊断：" if zh else "Problems: ") + "; ".join(lines) + ".", spans)
    return None


def _labs_answer(result: MedicalResult, docs: list[Document], question: str, zh: bool) -> Answer:
    """The lab results flagged high or low, each once (the same analyte, value and date read twice
    — a table and the narrative — are one), in record order, quoting the line that reports each."""
    from pipelines.medical.ranges import reference_range

    seen, lines, spans = set(), [], []
    for e in result.entities:
        n = e.normalized
        if e.type != "lab" or n.get("flag") not in ("high", "low") or e.assertion != "present":
            continue
        when = e.time.start if e.time is not None and e.time.start else None
        key = (n.get("analyte"), str(n.get("value")), (when or "")[:10])
        if key in seen:
            continue
        seen.add(key)
        lo, hi = n.get("ref_low"), n.get("ref_high")
        if lo is None and hi is None:
            lo, hi = reference_range(str(n.get("analyte")), n.get("unit")) or (None, None)
        flag = ("偏高" if n["flag"] == "high" else "偏低") if zh else n["flag"]
        what = " ".join(x for x in (n.get("name") or n.get("analyte"), str(n.get("value")), n.get("unit")) if x)
        rng = f"{lo:g}–{hi:g}" if lo is not None and hi is not None else None
        detail = ", ".join(x for x in (flag, (("参考范围 " if zh else "reference ") + rng) if rng else None,
                                       when or ("未注明日期" if zh else "undated")) if x)
        lines.append(f"{what} ({detail})")
        spans.append(quoted(docs, e.span))
        if len(lines) >= MAX_ITEMS:
            break
    if not lines:
        return exact_answer(question, "病历中没有超出范围的检验结果。" if zh else "No lab result out of range is recorded.", [])
    return exact_answer(question, ("异常检验结果：" if zh else "Labs out of range: ") + "; ".join(lines) + ".", spans)
