"""Patent claim-tree pipeline: claims found, split, linked and checked, with every part pointing
back into the document.

Modules, in the order the analysis runs:
- `text`: the normalised, same-length view of the text (full-width forms, page furniture blanked);
- `section`: where the claims section starts and ends;
- `splitter`: the claims, their numbers and prosecution status;
- `references`: reference phrases ("any one of claims 1 to 5", "如权利要求1至5中任一项所述");
- `structure`: category, preamble, transitional phrase, body elements;
- `antecedent`: "the X" / "said X" / "所述X" without antecedent basis;
- `findings`: the findings over the claim set;
- `counts`: the claim counts a fee calculation needs (the USPTO's rule);
- `tree`: the networkx graph, the nested trees of the export and each claim's label;
- `analyse`: the whole analysis, Document -> `PatentResult` (`model`);
- `summaries`: the rules-only claim summaries (the scaffold) and their grounding measures;
- `llm_steps`: the LLM step `patents.claim_summaries` (with `--llm on`, or in auto once measured);
- `pipeline`: `PatentsPipeline` and the entry points the CLI and UI call.

The names below are the package's public interface (what the app imports).
"""

from pipelines.patents.llm_steps import STEP as SUMMARY_STEP
from pipelines.patents.llm_steps import rules_summaries, summarise_claims
from pipelines.patents.model import (
    Claim,
    ClaimCounts,
    ClaimPart,
    ClaimSummary,
    Finding,
    PatentResult,
    SummarySpan,
    TreeNode,
)
from pipelines.patents.pipeline import PatentsPipeline, analyse_document, analyse_text, build_graph
from pipelines.patents.tree import claim_label, shorten

__all__ = [
    "SUMMARY_STEP",
    "Claim",
    "ClaimCounts",
    "ClaimPart",
    "ClaimSummary",
    "SummarySpan",
    "Finding",
    "PatentResult",
    "PatentsPipeline",
    "TreeNode",
    "analyse_document",
    "analyse_text",
    "build_graph",
    "claim_label",
    "rules_summaries",
    "shorten",
    "summarise_claims",
]
