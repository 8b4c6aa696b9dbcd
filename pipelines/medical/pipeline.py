"""MedicalPipeline: all documents of one patient -> one MedicalResult.

Stages: per document (kind, date, sections, sentences, entities with assertions, time
expressions) -> identity (what each document says about whose record it is; disagreements are
`identity` conflicts, and `discover` / `patients` split a folder of several patients) -> patient
anchors (admission, surgery, discharge: stated dates first, then the
dates of admission notes, operative notes and discharge summaries) -> normalised times -> a time
for every entity -> events (mentions of one concept on one day merged across documents; past-history
re-mentions linked to the earlier event) -> relations on one timeline (networkx) -> conflicts
(affirmed and negated at the same time: within a few hours, or on one day when neither states a
time of day) -> evidence (for a question, and the evidence chain of
every discharge diagnosis). Deterministic; no engine needed (an optional engine re-ranking step
is off by default).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import networkx as nx

from pipelines.base import Pipeline, PipelineInput, is_candidate_file
from pipelines.documents import Document, IngestError, Span, load_document
from pipelines.medical import context
from pipelines.medical.entities import Mention, extract
from pipelines.medical.evidence import Candidate, EvidenceIndex
from pipelines.medical.identity import (
    Identity,
    PatientGroup,
    consensus,
    group_documents,
    identity_conflicts,
    read_identity,
)
from pipelines.medical.lexicon import DRUGS
from pipelines.medical.models import (
    SCHEMA_VERSION,
    Anchor,
    Conflict,
    Entity,
    Event,
    Evidence,
    EvidenceItem,
    MedicalDocument,
    MedicalResult,
    MedicationItem,
    Patient,
    ProblemItem,
    Relation,
    SectionOut,
    TimeExpression,
    TimeInterval,
)
from pipelines.medical.sections import Section, find_sections
from pipelines.medical.text import sentences
from pipelines.medical.timex import TimeMention, TimeValue, absolute_date, find_times, normalize
from pipelines.text.script import detect_language

_DOC_KINDS = [
    ("discharge_summary", r"discharge summary|出院小结|出院记录|discharge_summary|discharge"),
    ("operative_note", r"operative (?:note|report)|\bop(?:eration)? note|operation report|procedure note|手术记录|^operative"),
    ("admission_note", r"admission (?:note|h&p)|history and physical|\bh&p\b|入院记录|admission|入院"),
    ("nursing_note", r"nursing|护理记录|护理"),
    ("lab_report", r"lab(?:oratory)? (?:report|results)|检验报告|化验|检验|\blabs?\b"),
    ("imaging_report", r"radiology|imaging|ct report|x-ray|影像|超声报告|ultrasound report|echocardiogram"),
    ("progress_note", r"progress note|病程记录|daily note|progress"),
    ("consult_note", r"consult"),
]
_ANCHOR_RX = {
    "admission": re.compile(r"(?:admission date|date of admission|admit date|admitted(?: to (?:the )?hospital)?(?: on)?|入院日期|入院时间)\s*[:：]?\s*", re.I),
    "surgery": re.compile(r"(?:date of (?:surgery|operation|procedure)|surgery date|operation date|operative date|"
                          r"手术日期|手术时间)\s*[:：]?\s*", re.I),
    "discharge": re.compile(r"(?:discharge date|date of discharge|discharged(?: from (?:the )?hospital)?(?: home)?(?: on)?|"
                            r"出院日期|出院时间)\s*[:：]?\s*", re.I),
}
_SURGERY_SENT = re.compile(r"taken to the (?:OR|operating room)|underwent|operation was|surgery was|行.{0,12}术|手术", re.I)
_DATE_HEADER = re.compile(r"(?:date|日期|时间|collected|reported|service)", re.I)
_ANTIBIOTICS = {"amoxicillin", "clavulanate", "ampicillin", "sulbactam", "penicillin", "cefazolin", "ancef", "ceftriaxone",
                "cefuroxime", "cefepime", "cephalexin", "keflex", "piperacillin", "tazobactam", "zosyn", "meropenem",
                "vancomycin", "linezolid", "daptomycin", "clindamycin", "metronidazole", "ciprofloxacin", "levofloxacin",
                "azithromycin", "doxycycline", "gentamicin", "trimethoprim", "sulfamethoxazole", "bactrim", "nitrofurantoin",
                "头孢唑林", "头孢曲松", "头孢呋辛", "头孢哌酮", "舒巴坦", "万古霉素", "美罗培南", "亚胺培南", "哌拉西林", "他唑巴坦",
                "左氧氟沙星", "莫西沙星", "阿莫西林", "克林霉素", "甲硝唑", "奥硝唑", "阿奇霉素", "青霉素", "庆大霉素"}
# findings that support a diagnosis (evidence tracing): concept -> related evidence concepts
_RELATED = {
    "wound infection": {"fever", "erythema", "purulent drainage", "wound drainage", "tenderness", "induration", "swelling",
                        "WBC high", "CRP high", "procalcitonin high", "wound culture", "culture", "antibiotic", "infection",
                        "neutrophils % high"},
    "infection": {"fever", "WBC high", "CRP high", "procalcitonin high", "culture", "blood culture", "antibiotic", "chills",
                  "neutrophils % high"},
    "sepsis": {"fever", "WBC high", "tachycardia", "hypotension", "blood culture", "lactate high", "antibiotic"},
    "pneumonia": {"fever", "cough", "sputum", "dyspnea", "crackles", "chest x-ray", "WBC high", "antibiotic"},
    "appendicitis": {"abdominal pain", "fever", "WBC high", "tenderness", "rebound tenderness", "nausea", "vomiting",
                     "ct", "ultrasound", "appendectomy", "neutrophils % high"},
    "cellulitis": {"erythema", "swelling", "edema", "tenderness", "fever", "WBC high", "antibiotic"},
    "abscess": {"erythema", "swelling", "tenderness", "purulent drainage", "incision and drainage", "fever", "culture"},
    "anemia": {"hemoglobin low", "fatigue", "transfusion", "hematocrit low"},
    "cholelithiasis": {"abdominal pain", "ultrasound", "jaundice", "total bilirubin high", "cholecystectomy"},
    "choledocholithiasis": {"abdominal pain", "jaundice", "total bilirubin high", "ALT high", "AST high", "ct", "ultrasound"},
    "bowel obstruction": {"abdominal pain", "vomiting", "abdominal distension", "constipation", "x-ray", "ct"},
    "covid-19": {"fever", "cough", "fatigue", "loss of taste", "headache", "dyspnea", "suspected covid-19"},
    "heart failure": {"dyspnea", "edema", "BNP high", "crackles", "echocardiogram", "furosemide"},
    "urinary tract infection": {"dysuria", "fever", "hematuria", "WBC high", "culture", "antibiotic"},
}


@dataclass
class _Doc:
    doc: Document
    order: int
    kind: str
    date: date | None
    date_source: str
    language: str
    sections: list[Section]
    sents: list[Span]
    mentions: list[Mention]
    times: list[TimeMention]
    time_values: list[TimeValue] = field(default_factory=list)
    entity_ids: list[str] = field(default_factory=list)
    _by_start: tuple[list[int], list[tuple[TimeMention, TimeValue]]] | None = field(default=None, repr=False)

    def times_by_start(self) -> tuple[list[int], list[tuple[TimeMention, TimeValue]]]:
        """(starts, (time, value) pairs) sorted by start, built once: a mention's times are found by
        bisection, not by a scan over every time of the note (quadratic on a long note of dates)."""
        if self._by_start is None:
            pairs = sorted(zip(self.times, self.time_values, strict=True), key=lambda x: x[0].start)
            self._by_start = ([t.start for t, _ in pairs], pairs)
        return self._by_start

    def times_in(self, a: int, b: int) -> list[tuple[TimeMention, TimeValue]]:
        """The (time, value) pairs starting in [a, b), in order."""
        starts, pairs = self.times_by_start()
        return pairs[bisect.bisect_left(starts, a):bisect.bisect_left(starts, b)]


def _doc_kind(doc: Document) -> str:
    """Kind from the title line, then the file name, then the first lines."""
    title = next((ln.strip() for ln in doc.text.splitlines() if ln.strip()), "").lower()[:80]
    name = doc.source_name.replace("\\", "/").rsplit("/", 1)[-1].lower()
    for head in (title, name, doc.text[:300].lower()):
        for kind, rx in _DOC_KINDS:
            if re.search(rx, head):
                return kind
    return "note"


def _doc_date(doc: Document, times: list[TimeMention], kind: str = "note") -> tuple[date | None, str]:
    """The note's date: from a file name like 003_2024-03-05.txt, else the best-labelled date in the
    header (a discharge summary's discharge date, a record/collection/service date, an admission
    note's admission date, else the first full date near the top)."""
    name = doc.source_name.replace("\\", "/").rsplit("/", 1)[-1]
    m = re.search(r"(?<!\d)((?:19|20)\d{2})[-_.]?(0[1-9]|1[0-2])[-_.]?(0[1-9]|[12]\d|3[01])(?!\d)", name)
    if m:
        try:
            return date(int(m.group(1)), int(m.group(2)), int(m.group(3))), "filename"
        except ValueError:
            pass
    cands: list[tuple[int, int, date]] = []
    for t in times:
        if t.start > 400:
            break
        d = absolute_date(t)
        if d is None or not t.value.get("y"):
            continue
        line_start = doc.text.rfind("\n", 0, t.start) + 1
        label = doc.text[max(line_start, t.start - 40):t.start].lower()
        if not label.strip() and doc.text.count("\n", 0, t.start) > 5:
            label = "(wrapped prose)"  # a date at the start of a wrapped line deep in the text is not a header
        if re.search(r"discharge|出院", label):
            prio = 0 if kind == "discharge_summary" else 4
        elif re.search(r"admission|admit|入院", label):
            prio = 1 if kind == "admission_note" else 3
        elif re.search(r"surgery|operation|手术", label):
            prio = 1 if kind == "operative_note" else 3
        elif _DATE_HEADER.search(label) or not label.strip():
            prio = 2
        else:
            prio = 5 if t.start < 200 else 9
        cands.append((prio, t.start, d))
    cands = [c for c in cands if c[0] < 9]
    if cands:
        return min(cands)[2], "header"
    return None, "none"


class MedicalPipeline(Pipeline):
    name = "medical"
    title = "Medical evidence tracing"
    version = "0.1.0"
    schema_version = SCHEMA_VERSION
    result_model = MedicalResult

    def __init__(self, use_embeddings: bool = True, engine_rerank: bool = False):
        """engine_rerank: deprecated, the same as running with `llm=LLMRun("on")` (every LLM step of
        pipelines/medical/llm_steps.py) when run_documents gets no `llm`."""
        self.use_embeddings = use_embeddings
        self.engine_rerank = engine_rerank

    # ----------------------------------------------------------------------------------------
    def discover(self, folder: Path) -> list[PipelineInput]:
        """One input per patient: each subfolder (all document files under it, recursively); the
        files directly in `folder` form one more patient when there are any."""
        folder = Path(folder)

        def files_under(p: Path, recursive: bool) -> tuple[Path, ...]:
            it = p.rglob("*") if recursive else p.iterdir()
            out = []
            for f in sorted(it):
                rel = f.relative_to(p).parts
                if any(part.startswith(".") for part in rel) or not is_candidate_file(f):
                    continue
                if f.name.upper().startswith(("PROVENANCE", "README", "LICENSE")):
                    continue
                out.append(f)
            return tuple(out)

        inputs = []
        direct = files_under(folder, False)
        if direct:
            inputs.append(PipelineInput(folder.name or "patient", direct))
        for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
            files = files_under(sub, True)
            if files:
                inputs.append(PipelineInput(sub.name, files))
        return [part for inp in inputs for part in self.split_by_patient(inp)]

    def split_by_patient(self, inp: PipelineInput) -> list[PipelineInput]:
        """The input as one input per patient (`identity.group_documents` over its documents'
        identity evidence); the input itself when it holds one patient or a file cannot be read
        (running it then reports the file)."""
        try:
            docs = [load_document(p) for p in inp.paths]
        except IngestError:
            return [inp]
        groups = self.patients(docs)
        if len(groups) <= 1:
            return [inp]
        return [PipelineInput(f"{inp.input_id}-{inp.paths[g.members[0]].stem}", tuple(inp.paths[i] for i in g.members))
                for g in groups]

    def patients(self, docs: list[Document]) -> list[PatientGroup]:
        """`docs` grouped by patient: one group when nothing sets them apart, else one per patient,
        each with the reason it stands apart (see `pipelines.medical.identity`)."""
        return group_documents(self._identities(docs))

    @staticmethod
    def _identities(docs: list[Document], prepared: list[_Doc] | None = None) -> list[Identity]:
        out = []
        for i, doc in enumerate(docs):
            if prepared is not None:
                times, d = prepared[i].times, prepared[i].date
            else:
                times = find_times(doc)
                d, _ = _doc_date(doc, times, _doc_kind(doc))
            out.append(read_identity(doc, times, d))
        return out

    def structure_answerer(self, result: MedicalResult, docs: list[Document]):  # type: ignore[override]
        """Questions for the whole medication or problem list (pipelines.medical.answers)."""
        from pipelines.medical.answers import structure_answer

        return lambda question: structure_answer(result, docs, question)

    def summary_line(self, result: MedicalResult) -> str:  # type: ignore[override]
        return (f"{len(result.documents)} documents, {len(result.entities)} entities, {len(result.events)} events, "
                f"{len(result.conflicts)} conflicts")

    # ----------------------------------------------------------------------------------------
    def run_documents(self, docs: list[Document], input_sha256: str = "", question: str | None = None,
                      questions: list[str] | None = None, *, llm=None) -> MedicalResult:
        """llm: a pipelines.llm.LLMRun running the LLM steps (pipelines/medical/llm_steps.py); None or
        mode off: rules only, and the result carries no LLM fields."""
        if llm is None and self.engine_rerank:
            from pipelines.llm import LLMRun

            llm = LLMRun("on")
        qs = list(questions or []) + ([question] if question else [])
        prepared = self._prepare(docs)
        anchors = self._anchors(prepared)
        stated = {"discharge_summary": "discharge", "admission_note": "admission", "operative_note": "surgery"}
        for pd in prepared:  # a note without a header date takes the date it states for its own event
            a = anchors.get(stated.get(pd.kind, ""))
            if pd.date is None and a is not None and a.source is not None and a.source.doc_id == pd.doc.doc_id:
                pd.date, pd.date_source = date.fromisoformat(a.date), f"stated {stated[pd.kind]} date"
        warnings: list[str] = []
        anchor_dates = {k: date.fromisoformat(a.date) for k, a in anchors.items()}
        times_out: list[TimeExpression] = []
        n = 0
        for pd in prepared:
            ref: tuple[int, date] | None = None  # the last resolved date of the current paragraph
            last_day: date | None = None  # the last resolved date of the note (a time of day alone is on it)
            for t in pd.times:
                past = True
                sec = next((s for s in pd.sections if s.start <= t.start < max(s.body_end, s.end)), None)
                if sec is not None and sec.key in ("assessment_plan", "discharge_instructions", "discharge_medications"):
                    past = False
                if ref is not None and "\n\n" in pd.doc.text[ref[0]:t.start]:
                    ref = None
                base = ref[1] if (ref is not None and t.kind == "document_relative") else pd.date
                if t.kind == "time":
                    base = last_day or pd.date
                tv = normalize(t, base, anchor_dates, past_context=past)
                if t.kind in ("date", "datetime", "anchored") and tv.start and tv.granularity in ("day", "minute", "hour"):
                    last_day = date.fromisoformat(tv.start[:10])
                line_start = pd.doc.text.rfind("\n", 0, t.start) + 1
                at_line_start = not pd.doc.text[line_start:t.start].strip(" \t-*•")
                if (t.kind in ("date", "datetime", "anchored") and tv.start and tv.granularity in ("day", "minute", "hour")
                        and at_line_start):
                    ref = (t.end, date.fromisoformat(tv.start[:10]))  # a dated entry: "POD 4: ... this morning"
                pd.time_values.append(tv)
                n += 1
                times_out.append(TimeExpression(id=f"T{n}", text=t.text, span=pd.doc.span(t.start, t.end), kind=t.kind,
                                                time=TimeInterval(**tv.as_dict())))
        self._clock = {pd.doc.doc_id: _header_clock(pd) for pd in prepared}
        self._stay = (anchor_dates.get("admission"), anchor_dates.get("discharge"))
        self._surgery = anchor_dates.get("surgery")
        entities = self._entities(prepared)
        events, mention_event = self._events(prepared, entities)
        relations = self._relations(events)
        conflicts = self._conflicts(events, entities)
        index = EvidenceIndex(self._candidates(prepared, entities), use_embeddings=self.use_embeddings)
        self._plans = []
        evidence = [self._evidence(q, index, entities, None) for q in qs]
        evidence += self._diagnosis_chains(prepared, entities, index)
        evidence = [self._with_chain(ev, events, mention_event) for ev in evidence]
        llm_fields: dict = {}
        if llm is not None and llm.active:
            from pipelines.medical.llm_steps import Plan, run_steps

            plans = [Plan(ev.claim, ev.kind, scored,
                          lambda sup, con, method, att=None, b=build: self._with_chain(b(sup, con, method, att), events,
                                                                                      mention_event))
                     for ev, (scored, build) in zip(evidence, self._plans, strict=True)]
            fused, ctx, answers = run_steps(llm, [(pd.doc, pd.kind, pd.date) for pd in prepared], index.cands, plans, qs)
            if fused is not None:
                evidence = fused
            if ctx is not None and ctx.strategy != "whole patient":
                warnings.append(f"LLM steps: {ctx.note}")
            llm_fields = {"llm": llm.report(), "llm_context": ctx, "answers": answers}
        if not any(pd.date for pd in prepared):
            warnings.append("no document date found (file name or header): relative times stay unanchored")
        header = self.header(docs, input_sha256)
        idents = self._identities([pd.doc for pd in prepared], prepared)
        patient = self._patient(idents, anchors, header["input_sha256"])  # its id: the input hash's first 12
        for key, desc, spans in identity_conflicts(idents):
            conflicts.append(Conflict(id=f"C{len(conflicts) + 1}", kind="identity", concept=f"patient {key}", date=None,
                                      description=desc, entities=[], sources=[s.source() for s in spans]))
        if any(c.kind == "identity" for c in conflicts):
            warnings.append("the documents disagree about the patient's identity (see the identity conflicts): they may be "
                            "the records of several patients")
        return MedicalResult(
            **header,
            patient=patient,
            problems=_problem_list(entities),
            medications=_medication_list(entities, prepared),
            documents=[self._doc_out(pd) for pd in prepared],
            entities=entities,
            times=times_out,
            events=events,
            relations=relations,
            conflicts=conflicts,
            evidence=evidence,
            warnings=warnings,
            **llm_fields,
        )

    # ----------------------------------------------------------------------------------------
    def _prepare(self, docs: list[Document]) -> list[_Doc]:
        out = []
        for doc in docs:
            times = find_times(doc)
            kind = _doc_kind(doc)
            d, src = _doc_date(doc, times, kind)
            sections = find_sections(doc)
            sents = sentences(doc)
            mentions = extract(doc, sections, sents)
            lang = detect_language(doc.text, 0.1, "text")  # Han > 10% of all characters: notes are full of digits
            out.append(_Doc(doc, 0, kind, d, src, lang, sections, sents, mentions, times))
        out.sort(key=lambda p: (p.date or date.max, p.doc.doc_id))
        for i, p in enumerate(out):
            p.order = i
        return out

    def _anchors(self, prepared: list[_Doc]) -> dict[str, Anchor]:
        found: dict[str, Anchor] = {}
        for key, rx in _ANCHOR_RX.items():
            for pd in prepared:
                if key in found:
                    break
                for m in rx.finditer(pd.doc.text):
                    t = next((t for t in pd.times if m.end() <= t.start <= m.end() + 3), None)
                    d = absolute_date(t, pd.date) if t else None
                    if d:
                        found[key] = Anchor(date=d.isoformat(), source=pd.doc.span(m.start(), t.end), how="stated")
                        break
        kinds = {"admission": "admission_note", "surgery": "operative_note", "discharge": "discharge_summary"}
        for key, kind in kinds.items():
            if key in found:
                continue
            pd = next((p for p in prepared if p.kind == kind and p.date), None)
            if pd:
                found[key] = Anchor(date=pd.date.isoformat(), source=None, how=f"date of {kind} {pd.doc.doc_id}")
        if "surgery" not in found:
            for pd in prepared:
                for s in pd.sents:
                    seg = pd.doc.text[s.start:s.end]
                    if _SURGERY_SENT.search(seg):
                        t = next((t for t in pd.times if s.start <= t.start < s.end and t.kind in ("date", "datetime")), None)
                        d = absolute_date(t, pd.date) if t else None
                        if d:
                            found["surgery"] = Anchor(date=d.isoformat(), source=pd.doc.span(s.start, s.end), how="date in a sentence about the operation")
                            break
                if "surgery" in found:
                    break
        return dict(sorted(found.items()))

    def _entity_time(self, pd: _Doc, m: Mention) -> TimeInterval:
        text = pd.doc.text
        if m.row_time is not None:
            # a lab or vital of a table row: the row's own date/time cells (its collection time)
            a, b = m.row_time
            row = [tv for t, tv in pd.times_in(a, b) if tv.start]
            if row:
                order = {"minute": 0, "hour": 1, "day": 2}
                return TimeInterval(**min(row, key=lambda tv: order.get(tv.granularity or "", 3)).as_dict())
        sent = m.sentence if m.sentence is not None else m.span
        s0, s1 = sent.start, sent.end
        best = None
        for t, tv in pd.times_in(s0, s1):
            if tv.start is not None:
                dist = abs(t.start - m.start)
                lo, hi = sorted((t.start, m.start))
                between = text[lo:hi]
                if m.assertion in (context.HISTORICAL, context.FAMILY) and re.search(r"[,;，；]", between):
                    continue  # "h/o HTN, DM2, s/p lap chole 3/6/2023": the date belongs to its own item
                if re.search(r"\b(?:now|currently|today|presently)\b|目前|现在", between, re.I):
                    continue  # "s/p lap chole 3/6/2023, now with cholangitis"
                if best is None or dist < best[0]:
                    best = (dist, tv)
        if best:
            return TimeInterval(**best[1].as_dict())
        # the nearest earlier time in the same paragraph (or, for labs and vitals, the same section)
        sec = next((s for s in pd.sections if s.start <= m.start < max(s.body_end, s.end)), None)
        for t, tv in reversed(pd.times_in(-1, m.start)):  # the nearest earlier first
            if tv.start is None or t.kind == "duration":
                continue
            between = text[t.end:m.start]
            same_sec = sec is None or sec.start <= t.start
            same_par = "\n\n" not in between and "\n \n" not in between and same_sec
            line_start = text.rfind("\n", 0, t.start) + 1
            dated_entry = not text[line_start:t.start].strip(" \t-*•")  # "POD 3, 14:00: ...", "5月12日 08:00 ..."
            if dated_entry and t.kind == "time":
                # a time of day alone starts an entry only in a list of timed entries ("06:00 T 37.2\n14:00 T
                # 38.6"), not where a wrapped sentence's line happens to begin with one
                prev = text[text.rfind("\n", 0, max(0, line_start - 1)) + 1:max(0, line_start - 1)]
                dated_entry = (not prev.strip() or bool(re.match(r"\s*[-*•]?\s*(?:\d{1,4}[-/.:：年月]|POD|术后)", prev))
                               or bool(re.match(r"\s*(?:[ap]\.?m\.?)?\s*[:：\-–]", text[t.end:t.end + 8], re.I)))
            header = t.start < 300 and t.kind in ("date", "datetime")
            label = re.match(r"\s*[)）]?\s*[:：]", text[t.end:t.end + 4]) is not None  # "Labs 03/08: WBC ...", "(03/08):"
            # a lab or vital takes the time of its table, report header or dated entry, not a date in an
            # earlier sentence of prose ("... EKG done on 11/02/07 ... BNP shows 3788")
            if (same_par and dated_entry) or (m.type in ("lab", "vital") and (
                    pd.kind == "lab_report" or header or (same_sec and (dated_entry or label)))):
                return TimeInterval(**tv.as_dict())
            if same_par and dated_entry is False and t.kind in ("date", "datetime", "anchored", "document_relative"):
                continue  # a date inside an earlier sentence of prose does not date this one
            break
        course = _med_course(text, s0, s1, m) if m.type == "medication" else None
        if course in ("started", "stopped"):
            # "On post-operative day 3 he developed fever ... Cefazolin was changed to vancomycin": a
            # medication started or stopped in an undated sentence of a dated narrative happened on or
            # after the paragraph's latest earlier date, not across the whole stay
            par = text.rfind("\n\n", 0, s0)
            floor = None
            for _, tv in pd.times_in(par + 1, s0):
                if tv.start is not None and tv.granularity in ("day", "hour", "minute"):
                    floor = tv
            if floor is not None:
                d0 = date.fromisoformat(floor.start[:10])
                dis = self._stay[1]
                end = _next_day(dis) if (course == "started" and dis is not None and dis >= d0) else _next_day(d0)
                return TimeInterval(start=d0.isoformat(), end=end, granularity="day" if course == "stopped" else "stay",
                                    anchored_to=floor.anchored_to)
        if pd.kind == "discharge_summary" and m.section in ("hospital_course", "labs", "procedures") and self._stay:
            # an undated hospital-course statement happened during the stay, not on the discharge day
            adm, dis = self._stay
            if dis is not None or adm is not None:
                return TimeInterval(start=adm.isoformat() if adm else None, end=_next_day(dis) if dis else None,
                                    granularity="stay", anchored_to="admission" if adm else "discharge")
        if pd.date is None:
            return TimeInterval(anchored_to="unanchored")
        if m.assertion in (context.HISTORICAL, context.FAMILY):
            return TimeInterval(start=None, end=pd.date.isoformat(), granularity=None, anchored_to="document")
        return TimeInterval(start=pd.date.isoformat(), end=_next_day(pd.date), granularity="day", anchored_to="document")

    def _entities(self, prepared: list[_Doc]) -> list[Entity]:
        out: list[Entity] = []
        for pd in prepared:
            for m in pd.mentions:
                eid = f"E{len(out) + 1}"
                pd.entity_ids.append(eid)
                trig = m.trigger.source() if m.trigger is not None else None
                norm = dict(m.normalized)
                if m.type == "medication":
                    sent = m.sentence if m.sentence is not None else m.span
                    course = _med_course(pd.doc.text, sent.start, sent.end, m)
                    if course:
                        norm["course"] = course
                out.append(Entity(id=eid, type=m.type, text=m.text, span=m.span.source(), doc_id=pd.doc.doc_id,
                                  assertion=m.assertion, normalized=_round(norm), concept=_concept_key(m),
                                  section=m.section, trigger=trig, time=self._entity_time(pd, m)))
        return out

    def _events(self, prepared: list[_Doc], entities: list[Entity]) -> tuple[list[Event], dict[str, str]]:
        groups: dict[tuple, list[Entity]] = {}
        later: list[Entity] = []
        stay: list[Entity] = []
        for e in entities:
            pol = "neg" if e.assertion == context.NEGATED else "pos"
            t = e.time
            if t.start is None and e.assertion in (context.HISTORICAL,) and t.end:
                later.append(e)
                continue
            if t.granularity == "stay":
                stay.append(e)
                continue
            else:
                day = t.start[:10] if t.start else (f"before {t.end}" if t.end else None)
            groups.setdefault((e.concept, pol, day), []).append(e)
        # past-history re-mentions join the latest earlier event of the same concept
        for e in later:
            cands = [k for k in groups if k[0] == e.concept and k[1] == "pos" and k[2] and k[2][:4].isdigit() and k[2] < e.time.end]
            if cands:
                groups[max(cands, key=lambda k: k[2])].append(e)
            else:
                groups.setdefault((e.concept, "pos", f"before {e.time.end}"), []).append(e)
        # an undated hospital-course mention joins the dated event of the same concept during the stay
        # ("the wound culture grew MRSA" -> the lab report's culture of 03-08); else it keeps the stay interval
        for e in stay:
            pol = "neg" if e.assertion == context.NEGATED else "pos"
            lo, hi = e.time.start or "0000", e.time.end or "9999"
            cands = [k for k in groups if k[0] == e.concept and k[1] == pol and k[2] and k[2][:4].isdigit() and lo <= k[2] < hi]
            if cands:
                groups[min(cands, key=lambda k: k[2])].append(e)
            else:
                groups.setdefault((e.concept, pol, f"stay {e.time.start or ''}/{e.time.end or ''}"), []).append(e)
        events: list[Event] = []
        mention_event: dict[str, str] = {}

        def sort_key(item):
            k, ms = item
            t = _best_time(ms)
            return (t.start or "9999", t.end or "9999", k[0], k[1], ms[0].id)

        for k, ms in sorted(groups.items(), key=sort_key):
            eid = f"V{len(events) + 1}"
            t = _best_time(ms)
            statuses = sorted({m.assertion for m in ms})
            types = sorted({m.type for m in ms}, key=lambda x: (-sum(1 for m in ms if m.type == x), x))
            for m in ms:
                mention_event[m.id] = eid
            events.append(Event(id=eid, type=types[0], concept=k[0], status=statuses[0] if len(statuses) == 1 else "mixed",
                                time=t, mentions=[m.id for m in ms], sources=[m.span for m in ms],
                                documents=sorted({m.doc_id for m in ms}, key=lambda d: next(
                                    pd.order for pd in prepared if pd.doc.doc_id == d))))
        return events, mention_event

    def _relations(self, events: list[Event]) -> list[Relation]:
        g = nx.DiGraph()
        placed = [e for e in events if e.time.start]
        groups: dict[tuple[str, str], list[Event]] = {}
        for e in placed:
            groups.setdefault((e.time.start[:16], (e.time.end or e.time.start)[:16]), []).append(e)
        keys = sorted(groups)
        for k in keys:
            rep = groups[k][0]
            g.add_node(rep.id)
            for other in groups[k][1:]:
                g.add_edge(rep.id, other.id, type="overlap")
        for a, b in zip(keys, keys[1:], strict=False):
            ra, rb = groups[a][0], groups[b][0]
            rel = "before" if _le(a[1], b[0]) else "overlap"
            g.add_edge(ra.id, rb.id, type=rel)
        before = nx.DiGraph((u, v) for u, v, d in g.edges(data=True) if d["type"] == "before")
        assert nx.is_directed_acyclic_graph(before)
        order = {e.id: i for i, e in enumerate(events)}
        rels = [Relation(a=u, b=v, type=d["type"]) for u, v, d in g.edges(data=True)]
        rels.sort(key=lambda r: (order[r.a], order[r.b], r.type))
        return rels

    def _conflicts(self, events: list[Event], entities: list[Entity]) -> list[Conflict]:
        by_id = {e.id: e for e in entities}
        pos: dict[tuple[str, str], list[Event]] = {}
        neg: dict[tuple[str, str], list[Event]] = {}
        for ev in events:
            if not ev.time.start or ev.time.granularity not in ("day", "hour", "minute"):
                continue  # only same-day statements can contradict each other
            day = ev.time.start[:10]
            (neg if ev.status == context.NEGATED else pos).setdefault((ev.concept, day), []).append(ev)
        out: list[Conflict] = []
        for key in sorted(set(pos) & set(neg)):
            ps = [m for ev in pos[key] for m in ev.mentions if by_id[m].assertion in (context.PRESENT, context.POSSIBLE)]
            ns = [m for ev in neg[key] for m in ev.mentions]
            # statements hours apart can both be true ("no fever" at 07:30, 38.6 °C at 14:00): a pair
            # contradicts when both times of day are known and within the tolerance, or neither is known
            # (the same day is then the same time); a day-level statement is not compared with a timed one
            clocks = {i: self._clock_of(by_id[i]) for i in ns + ps}
            pairs = [(n_, p_, _hours_apart(clocks[n_], clocks[p_])) for n_ in ns for p_ in ps
                     if (clocks[n_] is None and clocks[p_] is None)
                     or (clocks[n_] and clocks[p_] and _hours_apart(clocks[n_], clocks[p_]) <= _CONFLICT_TOLERANCE_H)]
            if not pairs:
                continue
            pairs.sort(key=lambda x: (x[2] is None, x[2] or 0))
            a, b, gap = by_id[pairs[0][0]], by_id[pairs[0][1]], pairs[0][2]
            ns = list(dict.fromkeys(x[0] for x in pairs))
            ps = list(dict.fromkeys(x[1] for x in pairs))
            cross = a.doc_id != b.doc_id
            when = (f"{gap:g} h apart, within the {_CONFLICT_TOLERANCE_H} h a clinician would call the same time"
                    if gap is not None else "on the same day, neither time of day stated")
            desc = (f"'{a.text}' ({a.doc_id}) says no {key[0]}, but '{b.text}' ({b.doc_id}) records it on {key[1]}, "
                    f"{when}" + (" — in different documents" if cross else " — in the same document"))
            ids = ns + ps
            out.append(Conflict(id=f"C{len(out) + 1}", kind="negated_and_affirmed_same_day", concept=key[0], date=key[1],
                                description=desc, entities=ids, sources=[by_id[i].span for i in ids]))
        return out

    def _clock_of(self, e: Entity) -> str | None:
        """The entity's time to the minute: its own, or its note's header time when it is dated to the
        note's day ("Date: 2024-03-08 07:30 ... POD 3 ... No fever")."""
        t = e.time
        if t is not None and t.granularity in ("minute", "hour") and t.start:
            return t.start
        clock = self._clock.get(e.doc_id)
        if t is not None and t.granularity == "day" and t.start and clock and clock[:10] == t.start[:10]:
            return clock
        return None

    # ----------------------------------------------------------------------------------------
    def _candidates(self, prepared: list[_Doc], entities: list[Entity]) -> list[Candidate]:
        by_doc: dict[str, list[Entity]] = {}
        for e in entities:
            by_doc.setdefault(e.doc_id, []).append(e)
        cands = []
        for pd in prepared:
            ents = sorted(by_doc.get(pd.doc.doc_id, []), key=lambda e: e.span.char_start)
            starts = [e.span.char_start for e in ents]
            heads = {(s.start, s.end) for s in pd.sections}
            for s in pd.sents:
                if len(pd.doc.text[s.start:s.end].strip()) < 3 or any(h0 <= s.start and s.end <= h1 + 1 for h0, h1 in heads):
                    continue
                inside = ents[bisect.bisect_left(starts, s.start):bisect.bisect_left(starts, s.end)]
                ms = [(e.id, c, e.assertion, e.type, e.time.end if e.time else None) for e in inside
                      for c in _evidence_concepts(e)]
                sec = next((x.key for x in reversed(pd.sections) if x.start <= s.start), None)
                cands.append(Candidate(pd.doc, s.start, s.end, section=sec, doc_order=pd.order, mentions=ms))
        self._docs = {pd.doc.doc_id: pd.doc for pd in prepared}
        return cands

    def _claim_concepts(self, claim: str) -> dict[str, float]:
        ms = extract(Document.from_text(claim, doc_id="claim"), [], None)
        concepts = {m.canonical: 1.0 for m in ms if m.type not in ("lab", "vital")}
        low = claim.lower()
        if re.search(r"antibiotic|抗生素|抗菌", low):
            concepts["antibiotic"] = 1.0
        if re.search(r"\bwbc\b|white (?:blood )?count|白细胞", low):
            concepts["WBC high"] = 1.0
        for c in list(concepts):
            for r in sorted(_RELATED.get(c, ())):
                concepts.setdefault(r, 0.6)
        return concepts

    def _evidence(self, claim: str, index: EvidenceIndex, entities: list[Entity], target: Entity | None) -> Evidence:
        concepts = self._claim_concepts(target.concept if target is not None and target.concept else claim)
        if target is not None:
            for k, w in self._claim_concepts(claim).items():
                concepts[k] = max(w, concepts.get(k, 0.0))
            concepts[target.concept] = 1.0
        exclude = {(target.doc_id, *_sentence_of(index, target))} if target is not None else set()
        after = None
        if re.search(r"post-?\s?operative|postop|after (?:the )?(?:surgery|operation)|术后|切口|wound infection|"
                     r"surgical site|incision(?!al pain)", claim, re.I) and self._surgery:
            after = self._surgery.isoformat()  # a postoperative conclusion: pre-operative findings weigh less
        sup, con, method = index.rank(claim, concepts, exclude, after=after)
        docs = self._docs

        def item(c, score, parts) -> EvidenceItem:
            ids = sorted({m[0] for m in c.mentions if m[1] in concepts}, key=lambda x: int(x[1:]))
            return EvidenceItem(span=docs[c.doc_id].span(c.start, c.end), score=score, doc_id=c.doc_id, section=c.section,
                                entities=ids, scores=parts)

        def build(sup, con, method, attention=None) -> Evidence:
            return Evidence(claim=claim, kind="diagnosis" if target is not None else "question",
                            target=target.id if target is not None else None,
                            supporting=[item(*x) for x in sup], contradicting=[item(*x) for x in con], method=method,
                            attention=attention)

        # for the LLM step medical.attention_evidence: the same ranking before its cut, and how to build it
        self._plans.append((lambda: index.scored(claim, concepts, exclude, after), build))
        return build(sup, con, method)

    @staticmethod
    def _with_chain(ev: Evidence, events: list[Event], mention_event: dict[str, str]) -> Evidence:
        """The events behind the supporting sentences' matching entities, oldest first."""
        order = {e.id: (e.time.start or "9999", e.time.end or "9999", i) for i, e in enumerate(events)}
        ids = {mention_event[x] for it in ev.supporting for x in it.entities if x in mention_event}
        return ev.model_copy(update={"chain": sorted(ids, key=lambda i: order[i])})

    def _diagnosis_chains(self, prepared: list[_Doc], entities: list[Entity], index: EvidenceIndex) -> list[Evidence]:
        problems = [e for e in entities if e.type == "problem" and e.assertion != context.NEGATED]
        targets = [e for e in problems if e.section == "discharge_diagnosis"]
        if not targets and prepared:
            # no discharge diagnoses: the problem list of the latest document stands for the conclusions
            last = prepared[-1].doc.doc_id
            targets = [e for e in entities if e.doc_id == last and e.type in ("problem", "symptom")
                       and e.assertion in (context.PRESENT, context.HISTORICAL, context.POSSIBLE)]
        seen: set[str] = set()
        out = []
        for e in targets:
            key = e.concept
            if key in seen:
                continue
            seen.add(key)
            out.append(self._evidence(e.text, index, entities, e))
        return out

    # ----------------------------------------------------------------------------------------
    def _patient(self, idents: list[Identity], anchors: dict[str, Anchor], sha: str) -> Patient:
        facts = consensus(idents)
        return Patient(id=(sha[:12] if sha else "patient"), name=facts.get("name"), record_number=facts.get("record"),
                       sex=facts.get("sex"), age=facts.get("age"), anchors=anchors)

    def _doc_out(self, pd: _Doc) -> MedicalDocument:
        doc = pd.doc
        secs = [SectionOut(key=s.key, label=s.label, heading=doc.span(s.start, s.end),
                           body=doc.span(s.body_start, s.body_end) if s.body_end > s.body_start else None) for s in pd.sections]
        return MedicalDocument(info=doc.info(), kind=pd.kind, date=pd.date.isoformat() if pd.date else None,
                               date_source=pd.date_source, language=pd.language, sections=secs)


# -------------------------------------------------------------------------------------------------
def _next_day(d: date) -> str:
    from datetime import timedelta

    return (d + timedelta(days=1)).isoformat()


def _mention_order(e: Entity) -> tuple:
    t = e.time
    return (t.start or t.end or "9999", e.doc_id, e.span.char_start)


def _problem_list(entities: list[Entity]) -> list[ProblemItem]:
    """The problem list: each problem concept stated present, possible, historical or resolved."""
    by: dict[str, list[Entity]] = {}
    for e in entities:
        if e.type == "problem" and e.assertion not in (context.FAMILY, context.HYPOTHETICAL):
            by.setdefault(e.concept, []).append(e)
    out = []
    for concept, ms in by.items():
        ms = sorted(ms, key=_mention_order)
        if all(m.assertion == context.NEGATED for m in ms):
            continue  # only ever denied: not a problem of the patient
        seen = [m for m in ms if m.assertion != context.NEGATED]
        last = ms[-1]
        if all(m.assertion == context.HISTORICAL for m in seen) and last.assertion != context.NEGATED:
            status = "historical"
        elif last.assertion == context.NEGATED or re.search(r"\bresolved\b|痊愈|治愈|消退", last.span.text, re.I):
            status = "resolved"
        else:
            status = "active"
        dated = [m.time.start[:10] for m in ms if m.time and m.time.start]
        out.append(ProblemItem(concept=concept, text=seen[0].text, status=status, first=min(dated) if dated else None,
                               last=max(dated) if dated else None, first_evidence=seen[0].span,
                               last_evidence=ms[-1].span, entities=[m.id for m in ms]))
    rank = {"active": 0, "resolved": 1, "historical": 2}
    return sorted(out, key=lambda p: (rank[p.status], p.first or "9999", p.concept))


def _medication_list(entities: list[Entity], prepared: list[_Doc]) -> list[MedicationItem]:
    """The medication list: each drug with its latest dose, route and frequency, start and stop."""
    kinds = {pd.doc.doc_id: pd.kind for pd in prepared}
    by: dict[str, list[Entity]] = {}
    for e in entities:
        if e.type == "medication" and e.assertion not in (context.NEGATED, context.FAMILY, context.HYPOTHETICAL):
            by.setdefault(e.concept, []).append(e)
    out = []
    for drug, ms in by.items():
        ms = sorted(ms, key=_mention_order)
        courses = [m.normalized.get("course") for m in ms]
        starts = [m for m in ms if m.normalized.get("course") == "started"]
        stops = [m for m in ms if m.normalized.get("course") == "stopped"]
        first = starts[0] if starts else ms[0]
        home = any(m.section == "medications" and kinds.get(m.doc_id) == "admission_note" or m.assertion == context.HISTORICAL
                   for m in ms) and "started" not in courses
        stopped = bool(stops) and (not starts or _mention_order(stops[-1]) >= _mention_order(starts[-1]))
        latest = next((m for m in reversed(ms) if m.normalized.get("dose")), ms[-1])
        n = latest.normalized
        dose = f"{n['dose']} {n['dose_unit']}".strip() if n.get("dose") else None
        out.append(MedicationItem(drug=drug, dose=dose, route=n.get("route"), frequency=n.get("frequency"),
                                  start=first.time.start[:10] if first.time and first.time.start else None,
                                  stop=(stops[-1].time.start[:10] if stopped and stops[-1].time and stops[-1].time.start
                                        else None),
                                  status="continued" if home else "new", stopped=stopped, first_evidence=ms[0].span,
                                  last_evidence=ms[-1].span, entities=[m.id for m in ms]))
    return sorted(out, key=lambda m: (m.stopped, m.start or "9999", m.drug))


_CONFLICT_TOLERANCE_H = 4  # hours within which a finding's absence and presence contradict each other


def _header_clock(pd: _Doc) -> str | None:
    """The note's time of day, from a header datetime on the note's date ("Date: 2024-03-08 07:30")."""
    if pd.date is None:
        return None
    for t, tv in zip(pd.times, pd.time_values, strict=True):
        if t.start > 300:
            break
        if tv.granularity == "minute" and tv.start and tv.start[:10] == pd.date.isoformat():
            return tv.start
    return None


_MED_START = re.compile(r"\b(?:start(?:ed|ing)?|initiat(?:ed|ing)|begun|began|commenced|(?:changed|switched|converted|"
                        r"escalated|de-?escalated|transitioned) (?:over )?to|added|new(?:ly)? (?:started|prescribed)|"
                        r"placed on|put on)\b|开始|改为|换为|加用|予以?|给予", re.I)
_MED_STOP = re.compile(r"\b(?:discontinu(?:ed|e|ing)|stopp?(?:ed|ing)?|d/c'?d|held|withheld|ceased|completed)\b|停用|停药|撤除",
                       re.I)
_MED_CONT = re.compile(r"\b(?:continu(?:e|ed|es|ing)|remain(?:s|ed)? on|resume[ds]?)\b|继续|维持", re.I)


def _med_course(text: str, s0: int, s1: int, m: Mention) -> str | None:
    """What the sentence does with the medication: started, stopped, continued, or None (a mention).
    The verb counts when it stands before the drug in its clause ("changed to vancomycin") or
    right after it ("vancomycin was discontinued")."""
    before = re.split(r"[;；。]|\.\s", text[s0:m.start])[-1]
    after = re.split(r"[;；。,，]|\.\s", text[m.end:s1])[0][:40]
    if _MED_STOP.search(after) or _MED_STOP.search(before[-40:]):
        return "stopped"
    if "changed to" not in before.lower() and re.search(r"\bchanged\b|\bswitched\b|改为|换为", after):
        return "stopped"  # "Cefazolin was changed to vancomycin": cefazolin stops
    if _MED_START.search(before[-50:]) or re.match(r"\s*(?:was |were )?(?:started|initiated|begun|added)\b", after, re.I):
        return "started"
    if _MED_CONT.search(before[-40:]) or _MED_CONT.search(after):
        return "continued"
    return None


def _hours_apart(a: str | None, b: str | None) -> float | None:
    from datetime import datetime

    if not a or not b or len(a) < 16 or len(b) < 16:
        return None
    return round(abs((datetime.fromisoformat(a[:16]) - datetime.fromisoformat(b[:16])).total_seconds()) / 3600, 2)


def _le(a: str, b: str) -> bool:
    return a <= b


def _round(d: dict) -> dict:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in sorted(d.items())}


def _concept_key(m: Mention) -> str:
    if m.type == "vital":
        if m.canonical == "temperature" and m.normalized.get("flag") == "high":
            return "fever"
        return f"vital:{m.canonical}"
    if m.type == "lab":
        return f"lab:{m.canonical}"
    if m.type == "medication":
        return m.canonical.lower()
    return re.sub(r"\s+", " ", re.sub(r"\s*\((?:finding|disorder|procedure|situation|physical object|organism|substance|"
                                      r"record artifact)\)\s*$", "", m.canonical.lower())).strip()


def _evidence_concepts(e: Entity) -> list[str]:
    out = [e.concept]
    if e.type == "lab" and e.normalized.get("flag") in ("high", "low"):
        out.append(f"{e.normalized['analyte']} {e.normalized['flag']}")
    if e.type == "medication":
        drug = str(e.normalized.get("drug", e.concept)).lower()
        if any(a in drug for a in _ANTIBIOTICS) or drug in DRUGS and drug in _ANTIBIOTICS:
            out.append("antibiotic")
    if e.type == "procedure" and "culture" in e.concept:
        out.append("culture")
    return out


def _best_time(ms: list[Entity]) -> TimeInterval:
    rank = {"minute": 0, "hour": 1, "day": 2, "week": 3, "month": 4, "year": 5, "stay": 6, None: 7}
    return sorted((m.time for m in ms), key=lambda t: (t.start is None, rank.get(t.granularity, 6), t.start or "", t.end or ""))[0]


def _sentence_of(index: EvidenceIndex, e: Entity) -> tuple[int, int]:
    for c in index.cands:
        if c.doc_id == e.doc_id and c.start <= e.span.char_start < c.end:
            return c.start, c.end
    return e.span.char_start, e.span.char_end
