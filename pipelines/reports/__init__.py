"""Research-report reference resolution: figures, tables, sections, footnotes, bibliography entries
and equations of a report, and every mention of them ("see Figure 3", "如图1所示", "the table
above", "[12]") resolved to its target with a confidence and a reason."""

from pipelines.reports.models import Mention, ReportResult, Target, Unresolved
from pipelines.reports.pipeline import ReportsPipeline, analyse_document

__all__ = ["Mention", "ReportResult", "ReportsPipeline", "Target", "Unresolved", "analyse_document"]
