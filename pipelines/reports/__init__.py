"""Research-report reference resolution: figures, tables, sections, footnotes, bibliography entries
and equations of a report, and every mention of them ("see Figure 3", "如图1所示", "the table
above", "[12]") resolved to its target with a confidence and a reason. With an LLMRun, two LLM steps
(pipelines.reports.llm_steps, registered at import): reports.scope and reports.deep_summary."""

from pipelines.reports import llm_steps as _llm_steps  # noqa: F401  (registers the LLM steps)
from pipelines.reports.models import (
    Callout,
    DeepSummary,
    Mention,
    ReportResult,
    ScopeDecision,
    SectionSummary,
    SummarySentence,
    Target,
    Unresolved,
)
from pipelines.reports.pipeline import ReportsPipeline, analyse_document

__all__ = ["Callout", "DeepSummary", "Mention", "ReportResult", "ReportsPipeline", "ScopeDecision", "SectionSummary",
           "SummarySentence", "Target", "Unresolved", "analyse_document"]
