"""The patent claim-tree pipeline and the entry points the CLI and UI call.

- `PatentsPipeline`: the `Pipeline` subclass the registry names ("patents").
- `analyse_text(text, doc_id="pasted")`: pasted text to a `PatentResult`.
- `analyse_document(doc)`: a `Document` (any ingested format) to a `PatentResult`.

Both take `llm` (a `pipelines.llm.LLMRun`; None or mode off: rules only, exactly the rules-only
result): the LLM step `patents.claim_summaries` (`llm_steps`) then fills `claim_summaries` and the
result's `llm` report says what ran and what it cost.
- `build_graph(result.claims)`: the networkx DiGraph (parent -> dependent claim).
"""

from __future__ import annotations

from pipelines.base import Pipeline, ResultBase
from pipelines.documents import Document
from pipelines.patents import analyse
from pipelines.patents.analyse import PIPELINE_NAME, PIPELINE_VERSION
from pipelines.patents.llm_steps import summarise_claims
from pipelines.patents.model import SCHEMA_VERSION, PatentResult
from pipelines.patents.tree import build_graph

__all__ = [
    "PatentsPipeline",
    "analyse_document",
    "analyse_text",
    "build_graph",
]


def analyse_document(doc: Document, input_sha256: str = "", *, llm=None, summary_strategy: str = "short",
                     summary_prompt: str = "guided") -> PatentResult:
    """The claim-tree analysis of one document; with `llm` (an LLMRun), its LLM steps too."""
    result = analyse.analyse_document(doc, input_sha256=input_sha256)
    if llm is None or not llm.active:
        return result
    result.claim_summaries = summarise_claims(result, doc, llm, strategy=summary_strategy, prompt=summary_prompt)
    result.llm = llm.report()
    return result


def analyse_text(text: str, doc_id: str = "pasted", *, llm=None) -> PatentResult:
    """Analyse pasted text (a claims section or a whole patent). Never raises on odd text."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    doc = Document.from_text(text, doc_id=doc_id)
    return analyse_document(doc, llm=llm)


class PatentsPipeline(Pipeline):
    """Patent claim trees: claims, dependencies, structure, findings and the tree."""

    name = PIPELINE_NAME
    title = "Patent claim trees"
    version = PIPELINE_VERSION
    schema_version = SCHEMA_VERSION
    result_model = PatentResult

    def run_documents(self, docs: list[Document], input_sha256: str = "", llm=None) -> PatentResult:
        """One document per input: its claims analysed (and, with `llm`, summarised)."""
        if len(docs) != 1:
            raise ValueError(f"the patents pipeline takes one document per input, got {len(docs)}")
        return analyse_document(docs[0], input_sha256=input_sha256, llm=llm)

    def summary_line(self, result: ResultBase) -> str:
        """'24 claims (3 independent), depth 3, 2 errors, 5 warnings'."""
        assert isinstance(result, PatentResult)
        s = result.stats
        sev = s.findings_by_severity
        parts = [f"{s.n_claims} claims ({s.n_independent} independent"]
        if s.n_cancelled:
            parts[0] += f", {s.n_cancelled} cancelled"
        parts[0] += ")"
        parts.append(f"depth {s.max_depth}")
        for k in ("error", "warning"):
            if sev.get(k):
                parts.append(f"{sev[k]} {k}{'s' if sev[k] != 1 else ''}")
        if not result.claims_section.found:
            parts.append("no claims found")
        return ", ".join(parts)

    def structure_answerer(self, result: ResultBase, docs: list[Document]):
        """Questions the claim tree answers exactly (pipelines.patents.answers)."""
        from pipelines.patents.answers import structure_answer

        assert isinstance(result, PatentResult)
        return lambda question: structure_answer(result, docs[0], question)
