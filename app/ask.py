"""Questions over a long document with the local engine: the prompt layout, the fallback choice,
and a one-line account of what happened. Shared by `longdoc ask` (app/commands/engine.py) and
the web UI's Ask page (app/ui/ask_page.py). The engine is imported inside the functions, so that
importing this module stays fast."""

from __future__ import annotations

# the default model is a base model without a chat template, so a plain layout
INSTRUCTIONS = "Read the document and answer the question after it.\n\nDocument:\n"
TEMPLATE = "{instructions}{document}\n\nQuestion: {question}\nAnswer:"
STOP = ["\nQuestion:"]
FALLBACKS = ("retrieval", "truncate:middle", "truncate:head", "truncate:tail", "map_reduce", "error")


def policy_for(spec: str):
    """A FallbackPolicy from 'retrieval', 'truncate:middle', ...; ValueError for a malformed spec
    (an unknown strategy or side raises the engine's EngineError, one line)."""
    from engine.fallback import FallbackPolicy

    strategy, _, side = spec.partition(":")
    if side and strategy != "truncate":
        raise ValueError(f"--fallback {spec!r}: only truncate takes a side (truncate:head, :tail, :middle)")
    return FallbackPolicy(strategy=strategy, truncate_side=side or "middle")


def ask(llm, document: str, question: str, policy, max_tokens: int = 128, instructions: str = INSTRUCTIONS):
    """(GenerationOutput, FallbackReport) for one question over `document`; retrieval and key-entity
    retention use the pipelines' text tools."""
    from engine import SamplingParams
    from engine.fallback import LongRequest
    from pipelines.text.fallback_tools import PipelineTextTools

    req = LongRequest(document=document, question=question, instructions=instructions, template=TEMPLATE)
    return llm.generate_long(req, SamplingParams(max_tokens=max_tokens, stop=list(STOP)), policy,
                             text_tools=PipelineTextTools())


def summary(out, report, seconds: float) -> str:
    """One line: prompt size, what the fallback did, time to first token, cache reuse."""
    parts = [f"prompt {report.prompt_tokens:,} tokens"]
    if report.fallback_triggered:
        how = report.strategy + (f":{report.truncate_side}" if report.truncate_side else "")
        if report.chunks_total:
            how += f", {report.chunks_used}/{report.chunks_total} chunks"
        parts.append(f"did not fit ({report.reason}): {how}, {report.tokens_dropped:,} document tokens dropped, "
                     f"key-entity retention {report.key_entity_retention:.0%}")
    ttft = out.metrics.get("ttft_s")
    if ttft is not None:
        parts.append(f"first token {ttft:.2f} s")
    if out.cached_tokens:
        parts.append(f"{out.cached_tokens:,} prompt tokens from the cache")
    parts.append(f"{seconds:.1f} s in all")
    return " · ".join(parts)
