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

Why rules and not medspaCy: medspaCy 1.3.1 on Python 3.11 requires spaCy < 3.8, PyRuSH (a Cython
build) and medspacy_quickumls (QuickUMLS, simstring, unqlite) — too heavy for this project and
English-only. What it would do better than these rules: a larger, curated and community-tested
ConText trigger set (pyConText lineage) with its modifier/target graph, per-rule scope tuning,
a UMLS-backed concept matcher (QuickUMLS) instead of a hand-written lexicon, and a clinical
sectionizer with many more header variants. `context.py` implements the same trigger/scope/
termination algorithm in a small form for English and Chinese.
"""

from pipelines.medical import llm_steps as _llm_steps  # noqa: F401 - registers the LLM steps' decisions
from pipelines.medical.models import MedicalResult
from pipelines.medical.pipeline import MedicalPipeline

__all__ = ["MedicalPipeline", "MedicalResult"]
