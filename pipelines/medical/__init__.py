"""Medical cross-document evidence tracing: one patient's documents -> sections, entities with
assertions, normalised times, one timeline of merged events with relations and conflicts, and
ranked evidence for conclusions. Rule-based and deterministic; LLM steps (`llm_steps`, run with an
`LLMRun`) fuse the engine's attention into the evidence ranking and answer questions with grounded
sentences.

Modules: `sections` (EN/ZH headings), `text` (sentences), `lexicon` (terms), `labs` (lab results
and vital signs, inline and tables), `entities` (mentions), `context` (ConText-style assertions),
`timex` (time expressions and ISO normalisation), `evidence` (BM25 + MiniLM embeddings + concepts),
`identity` (whose record each document is; documents grouped by patient), `llm_steps`
(medical.attention_evidence, medical.answer), `pipeline` (MedicalPipeline), `models` (export).

Why rules and not medspaCy — measured (`benchmarks/eval/medical_medspacy.py`, BENCHMARKS.md "medspaCy
against the rules", 2026-12-04): medspaCy 1.3.1 with its default rules, on the pipeline's own entity
spans, assigns the truth assertion to 318 of 336 English cases (ConText; 318 with its Sectionizer's
section attributes too) against 334 for `context.py` (Synthea 204/204 both; held-out sentences 18/25
vs 25/25; hand-annotated unseen notes 96/107 vs 105/107) — it left as present, among others,
"afebrile", "Cellulitis has resolved", "the nausea and vomiting has resolved", "? cholecystitis",
"probable renal vein thrombosis", "monitor for signs of wound infection", "previously treated for
pneumonia" and the later items of "No clubbing, cyanosis, or edema". Its Sectionizer finds 129 of 492 typographic headers of the English notes (recall 0.26,
precision 0.66: no colon-less Markdown or ALL-CAPS headings) against 483 (0.98, precision 0.99) for
`sections.py`. It would also cost a second NLP stack (spaCy 3.7, PyRuSH, QuickUMLS, about 67 packages
and 283 MB in a fresh venv, ~1 min to install from wheels, 2–4 s to load) and reads no Chinese, which
`context.py` and `sections.py` handle with the same algorithm. So the rules stay; medspaCy is not a
dependency, not even an optional one. `context.py` implements the same trigger/scope/termination
algorithm (pyConText lineage) in a small form for English and Chinese.
"""

from pipelines.medical import llm_steps as _llm_steps  # noqa: F401 - registers the LLM steps' decisions
from pipelines.medical.models import MedicalResult
from pipelines.medical.pipeline import MedicalPipeline

__all__ = ["MedicalPipeline", "MedicalResult"]
