"""The development QA set for evidence-first answers (issue 45): loading and validation.

One JSON object per line in `benchmarks/eval/qa/<pipeline>.jsonl`:

    {"id": "contracts-007", "pipeline": "contracts", "lang": "en",
     "docs": ["data/samples/contracts/en-commonpaper-csa-1.0-to-1.1/v2.txt"],
     "question": "Which law governs the agreement?", "answerable": true,
     "answers": ["the laws of the State of Delaware", "Delaware"],
     "evidence": [{"doc": "data/samples/...", "quote": "This Agreement is governed by ..."}],
     "kind": "law", "structure": false, "split": "dev"}

- docs: paths relative to the repository root (`../shared/corpus/...` for the shared corpus); a
  question over several documents (a patient's notes, both versions of a contract) lists them all,
  in the order the product joins them.
- evidence: the passage(s) that hold the answer, each an exact quote of its document's ingested
  text (`pipelines.documents.load_document(path).text`) up to whitespace (runs of whitespace
  compare as one space).
- answers: accepted short answers (alternatives: any one is right); each appears in an evidence
  quote (case and whitespace ignored), so an answer can be scored by containment.
- answerable false: the document does not hold the answer; answers and evidence are empty.
- kind: the value the question asks for (date, period, number, money, party, law, claim, drug,
  lab, name, place) or "text" (a clause, a finding, a sentence).
- structure: the pipeline's own structure answers it exactly (a claim's dependencies, a clause's
  change, where a figure is cited, the patient's medications).
- split: "dev" (look at it while fixing) or "holdout" (whole documents kept apart: report, do not
  tune on).

`python -m benchmarks.eval.qa_set` validates every file and prints counts.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QA_DIR = Path(__file__).resolve().parent / "qa"
KINDS = {"date", "period", "number", "money", "party", "law", "claim", "drug", "lab", "name", "place", "text"}
PIPELINES = {"contracts", "medical", "patents", "reports"}
_WS = re.compile(r"\s+")


def norm(text: str) -> str:
    """Whitespace runs as one space, trimmed, case folded: how quotes and answers compare."""
    return _WS.sub(" ", text).strip().casefold()


@dataclass(frozen=True)
class Evidence:
    doc: str
    quote: str


@dataclass(frozen=True)
class Question:
    id: str
    pipeline: str
    lang: str
    docs: tuple[str, ...]
    question: str
    answerable: bool
    answers: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    kind: str = "text"
    structure: bool = False
    split: str = "dev"
    note: str = ""
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def from_dict(cls, d: dict) -> Question:
        known = {"id", "pipeline", "lang", "docs", "question", "answerable", "answers", "evidence", "kind",
                 "structure", "split", "note"}
        return cls(id=d["id"], pipeline=d["pipeline"], lang=d["lang"], docs=tuple(d["docs"]),
                   question=d["question"], answerable=bool(d["answerable"]), answers=tuple(d.get("answers", ())),
                   evidence=tuple(Evidence(e["doc"], e["quote"]) for e in d.get("evidence", ())),
                   kind=d.get("kind", "text"), structure=bool(d.get("structure", False)),
                   split=d.get("split", "dev"), note=d.get("note", ""),
                   extra={k: v for k, v in d.items() if k not in known})


def load(pipelines: set[str] | None = None, split: str | None = None) -> list[Question]:
    """Every question of the set (optionally of some pipelines, of one split)."""
    out = []
    for path in sorted(QA_DIR.glob("*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                q = Question.from_dict(json.loads(line))
            except (KeyError, ValueError, TypeError) as exc:
                raise ValueError(f"{path.name}:{n}: {exc}") from None
            if (pipelines is None or q.pipeline in pipelines) and (split is None or q.split == split):
                out.append(q)
    return out


def resolve(path: str) -> Path:
    return (ROOT / path).resolve()


@cache
def document(path: str):
    """The ingested Document of a path of the set (cached per process)."""
    from pipelines.documents import load_document

    return load_document(resolve(path))


def find_quote(text: str, quote: str) -> tuple[int, int] | None:
    """(start, end) of `quote` in `text`, whitespace runs matching any whitespace run, case kept
    as is first, then ignored; None when absent."""
    words = quote.split()
    if not words:
        return None
    pattern = r"\s+".join(re.escape(w) for w in words)
    m = re.search(pattern, text) or re.search(pattern, text, re.IGNORECASE)
    if m is None:  # CJK text may break a line inside a word: allow whitespace between any two characters
        chars = [re.escape(c) for c in "".join(words)]
        m = re.search(r"\s*".join(chars), text)
    return m.span() if m else None


def validate(questions: list[Question]) -> list[str]:
    """Problems with the set, one line each (empty: valid). Documents that are not on this machine
    (the shared corpus outside a session) are skipped, and said so."""
    problems = []
    ids = Counter(q.id for q in questions)
    problems += [f"{i}: duplicate id" for i, c in ids.items() if c > 1]
    for q in questions:
        where = f"{q.id}"
        if q.pipeline not in PIPELINES:
            problems.append(f"{where}: unknown pipeline {q.pipeline!r}")
        if q.kind not in KINDS:
            problems.append(f"{where}: unknown kind {q.kind!r}")
        if q.split not in ("dev", "holdout"):
            problems.append(f"{where}: split must be dev or holdout")
        if q.lang not in ("en", "zh"):
            problems.append(f"{where}: lang must be en or zh")
        if q.answerable and (not q.answers or not q.evidence):
            problems.append(f"{where}: answerable but no answers or no evidence")
        if not q.answerable and (q.answers or q.evidence):
            problems.append(f"{where}: unanswerable but has answers or evidence")
        for e in q.evidence:
            if e.doc not in q.docs:
                problems.append(f"{where}: evidence from {e.doc}, not one of its docs")
        for a in q.answers:
            if not any(norm(a) in norm(e.quote) for e in q.evidence):
                problems.append(f"{where}: answer {a!r} is in no evidence quote")
        for d in q.docs:
            if not resolve(d).exists():
                continue
            for e in q.evidence:
                if e.doc == d and find_quote(document(d).text, e.quote) is None:
                    problems.append(f"{where}: quote not found in {d}: {e.quote[:60]!r}")
    return problems


def main() -> int:
    qs = load()
    missing = sorted({d for q in qs for d in q.docs if not resolve(d).exists()})
    problems = validate(qs)
    for p in problems:
        print(p)
    by = Counter((q.pipeline, q.lang, q.split, q.answerable) for q in qs)
    print(f"{len(qs)} questions; {sum(not q.answerable for q in qs)} unanswerable; "
          f"{sum(q.lang == 'zh' for q in qs)} Chinese; {sum(q.split == 'holdout' for q in qs)} held out")
    for k in sorted(by):
        print("  ", *k, by[k])
    if missing:
        print(f"{len(missing)} documents not on this machine (skipped): {', '.join(missing[:5])}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
