"""The rules-only side of the claim summaries: each claim's head words (`element_head`), the
deterministic scaffold summary built from the parsed preamble, transition and elements
(`scaffold`), the content words of a text (`content_words`, for the grounding measures) and the
claim's own spans a summary rests on (`supporting_spans`).

No model here: `pipelines.patents.llm_steps` builds its prompts from the scaffold, and the
evaluator (`benchmarks/eval/patents_evaluate.py --llm`) scores the scaffold as the rules-only
baseline of the `patents.claim_summaries` step.
"""

from __future__ import annotations

import re

from pipelines.documents import SourceSpan
from pipelines.patents.model import Claim
from pipelines.text.script import has_cjk

# where an element's head noun phrase (or a step's verb phrase) ends
_CUT_EN = re.compile(
    r"\s*(?:[,;:]|\bwhich\b|\bthat\b|\bwherein\b|\bwhereby\b|\bwhere\b|\bsuch that\b|\bso as\b|\bin which\b|"
    r"\bconfigured\b|\badapted\b|\barranged\b|\boperable\b|\bhaving\b|\bcomprising\b|\bincluding\b|"
    r"\bbeing\b|\bfor\b|\bwith\b|\bwhen\b|\bif\b|\bby\b|\bto form\b)",
    re.IGNORECASE,
)
# a clause ("the base is weighted with sand") ends only at a relative pronoun or punctuation
_CUT_CLAUSE = re.compile(r"\s*(?:[;:]|\bwhich\b|\bthat\b|\bwherein\b|\bwhereby\b|\bsuch that\b|\bso as\b|\bin which\b)",
                         re.IGNORECASE)
_CLAUSE = re.compile(r"^\s*(?:wherein|whereby)\b|^(?:(?!\bwhich\b|\bthat\b)[^,;:])*?\b(?:is|are|comprises|has|have|"
                     r"includes|contains|consists|extends|forms|lies|rests)\b", re.IGNORECASE)
_RELATIVE = re.compile(r"\s+(?:which|that)\b[^,;:]*(?=[,;:]|$)", re.IGNORECASE)
_LEAD_EN = re.compile(r"^\s*(?:(?:wherein|whereby|and|further|comprising|including|characterized in that|"
                      r"characterised in that|in that|the method|the step of|the steps of)\b[\s,:]*)+", re.IGNORECASE)
_SAID = re.compile(r"\bsaid\b", re.IGNORECASE)
_CUT_ZH = re.compile(r"[，,；;：:。]")
_LEAD_ZH = re.compile(r"^(?:(?:其特征在于|其中|还包括|包括|并且|且|所述)[，,：:\s]*)*")
STOPWORDS = frozenset(
    """a an the said and or of to in on at by for with from into onto over under between within without
    is are be been being was were has have having it its this that these those which wherein whereby
    where such as so than then claim claims adds add covers cover further comprising comprises
    comprise including includes include plain words summary according any one more least also""".split())
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9\-]*|\d+(?:\.\d+)?")
_HAN = re.compile(r"[\u4e00-\u9fff]")


def _words(text: str, n: int) -> str:
    w = text.split()
    return " ".join(w[:n]).rstrip(" ,;:.") + ("…" if len(w) > n else "")


def element_head(text: str, zh: bool = False, n_words: int = 8) -> str:
    """The head of an element: "a throttle valve which is disposed at …" -> "a throttle valve";
    a clause (a verb before any "which"/"that") without its relative clauses, up to a semicolon
    or "wherein": "wherein said second drive means comprises a pulley which is fixed to …, a wire
    which …, and a lever which …" -> "the second drive means comprises a pulley, a wire, and a
    lever"; a Chinese
    element up to its first comma (at most 16 characters)."""
    t = " ".join(text.split())
    if zh or has_cjk(t[:12]):
        t = _LEAD_ZH.sub("", t)
        t = _CUT_ZH.split(t, maxsplit=1)[0]
        return t[:16] + ("…" if len(t) > 16 else "")
    clause = bool(_CLAUSE.match(t))
    t = _LEAD_EN.sub("", t)
    if clause:  # "comprises a pulley which is fixed to …, a wire which …, and a lever which …": the items kept
        t = _RELATIVE.sub("", t).strip()
    m = (_CUT_CLAUSE if clause else _CUT_EN).search(t, 1)
    head = t[: m.start()] if m and m.start() > 0 else t
    head = _SAID.sub(lambda m: "The" if m.group(0)[0] == "S" else "the", head).strip(" ,;:.")
    return _words(head, n_words) or _words(t, n_words)


def _join(items: list[str], zh: bool) -> str:
    items = [i for i in dict.fromkeys(items) if i]
    if zh:
        return "、".join(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def added_spans(c: Claim) -> list[SourceSpan]:
    """What a claim brings of its own: a dependent claim's elements (what its limitation holds), an
    independent claim's elements; the limitation or the claim itself when none were split out."""
    if c.elements:
        return list(c.elements)
    if c.limitation is not None:
        return [c.limitation]
    return [c.span]


def scaffold(c: Claim, zh: bool = False, max_items: int = 6) -> str:
    """The rules-only summary: an independent claim's subject and the heads of its elements ("A
    throttle apparatus with a throttle valve, a throttle shaft, …"); a dependent claim's added
    elements ("Claim 3 adds to claim 2: an angle detect sensor and …")."""
    spans = added_spans(c)
    heads = [element_head(e.text, zh, 8 if len(spans) > 1 else 20) for e in spans]
    more = len(heads) > max_items
    heads = heads[:max_items]
    if c.independent:
        subject = element_head(c.preamble.text, zh, 12) if c.preamble is not None else (c.subject or "")
        if zh:
            return f"权利要求{c.number}：{subject}，包括{_join(heads, zh)}{'等' if more else ''}。".replace("…。", "…")
        glue = ": " if c.category == "method" else " with "
        items = "; ".join(dict.fromkeys(heads)) if c.category == "method" else _join(heads, zh)
        return _stop(f"Claim {c.number}: {subject}{glue}{items}{', and more' if more else ''}")
    parents = _join([str(n) for n in c.depends_on], zh) or "?"
    if zh:
        return f"权利要求{c.number}在权利要求{parents}的基础上增加：{_join(heads, zh)}{'等' if more else ''}。".replace("…。", "…")
    claims = "claims" if len(c.depends_on) > 1 else "claim"
    return _stop(f"Claim {c.number} adds to {claims} {parents}: {_join(heads, zh)}{', and more' if more else ''}")


def _stop(text: str) -> str:
    return text if text.endswith("…") else text + "."


_LEAD = re.compile(r"^\s*(?:Claim \d+ (?:covers|adds(?: that| to claims? [\d, and]+:)?)|Claim \d+:|"
                   r"权利要求\d+(?:保护|增加了|在权利要求[\d、和]+的基础上增加：|：))\s*")


def body(text: str) -> str:
    """A summary without its template lead ("Claim 3 adds that", "权利要求3增加了", …)."""
    return _LEAD.sub("", text, count=1)


def content_words(text: str) -> set[str]:
    """The words a grounding measure compares: lower-case, a plural's s taken off, stop words and
    claim numbers left out; for Chinese, its Han character bigrams."""
    han = "".join(_HAN.findall(text))
    out = {han[i : i + 2] for i in range(len(han) - 1)}
    for w in _WORD.findall(text.lower()):
        if w in STOPWORDS or w.isdigit() or len(w) < 3:
            continue
        out.add(w[:-1] if w.endswith("s") and not w.endswith("ss") and len(w) > 3 else w)
    return out


def supporting_spans(c: Claim, text: str, limit: int = 4) -> list[tuple[SourceSpan, float]]:
    """The claim's own spans (preamble, transition, elements) that `text` takes words from, with the
    share of `text`'s content words each holds, best first; a dependent claim's preamble (it only
    names the parent) is left out. Empty when `text` uses none of the claim's words."""
    words = content_words(body(text))
    if not words:
        return []
    cands: list[SourceSpan] = []
    if c.independent and c.preamble is not None:
        cands.append(c.preamble)
    cands.extend(added_spans(c))
    scored = []
    for i, s in enumerate(cands):
        share = len(words & content_words(s.text)) / len(words)
        if share > 0:
            scored.append((-share, i, s))
    scored.sort(key=lambda t: (t[0], t[1]))
    return [(s, round(-neg, 4)) for neg, _, s in scored[:limit]]
