"""Questions over a long document with the local engine, through the LLM layer (pipelines.llm):
the engine settings from the command line or the page, the fallback choice, the batch of
questions (the document's KV computed once for all of them, and kept for the next call), and a
one-line account of each answer. Shared by `longdoc ask` (app/commands/engine.py) and the web UI's
Ask page (app/ui/ask_page.py). The engine is imported inside the functions, so that importing this
module stays fast."""

from __future__ import annotations

from pathlib import Path

from pipelines.llm import INSTRUCTIONS, EngineSettings

FALLBACKS = ("retrieval", "truncate:middle", "truncate:head", "truncate:tail", "map_reduce", "error")
STRATEGY = "auto"  # how the questions share the document's KV: pipelines.llm.requests.resolve_strategy
__all__ = ["FALLBACKS", "INSTRUCTIONS", "STRATEGY", "ask", "empty_answer", "policy_for", "settings", "summary"]


def policy_for(spec: str):
    """A FallbackPolicy from 'retrieval', 'truncate:middle', ...; ValueError for a malformed spec
    (an unknown strategy or side raises the engine's EngineError, one line)."""
    from pipelines.llm.run import fallback_policy

    try:
        return fallback_policy(spec)
    except ValueError as exc:
        raise ValueError(f"--{exc}") from None


def settings(model: Path | str | None = None, device: str | None = None, dtype: str | None = None,
             max_model_len: int | None = None, cache_dir: Path | str | None = None,
             cache_bytes: int | None = None) -> EngineSettings:
    """Engine settings from the flags, the environment filling what they leave out."""
    return EngineSettings.from_env(model=model, device=device, dtype=dtype, max_model_len=max_model_len,
                                   disk_cache_dir=str(cache_dir) if cache_dir else None,
                                   disk_cache_bytes=cache_bytes if cache_dir else None)


def ask(llm, doc, questions: list[str], policy, max_tokens: int = 128, instructions: str = INSTRUCTIONS,
        on_progress=None, cancel=None, attribute: bool = False):
    """A BatchResult (pipelines.llm) for `questions` over the Document `doc`, submitted together;
    a question whose prompt does not fit goes through the fallback `policy` with the pipelines'
    text tools and its item carries the report. An answer with no text is an error (`empty_answer`):
    the terminal and the page say so instead of showing a blank answer."""
    from pipelines.llm import ask_document

    res = ask_document(llm, doc, questions, instructions=instructions, max_tokens=max_tokens, strategy=STRATEGY,
                       fallback=policy, on_progress=on_progress, cancel=cancel, attribute=attribute)
    for it in res.items:
        if it.error is None and not it.text.strip():
            it.error = empty_answer(it, llm)
    return res


def empty_answer(item, llm=None) -> str:
    """One line for an answer with no text: a base model that begins a new "Answer:" (or
    "Question:") line at once has stopped on a stop text before saying anything."""
    began = llm.decode(list(item.token_ids)) if item.token_ids and llm is not None else ""
    if item.finish_reason == "stop" and began.strip():
        return (f"empty answer: the model began with the stop text {began!r} (a new turn of the prompt's "
                "format) and said nothing before it; rephrase the question")
    return "empty answer: the model said nothing" + (f" (only {began!r})" if began else "") + "; rephrase the question"


def summary(item, seconds: float) -> str:
    """One line for an answered item: prompt size, what the fallback did, time to first token, cache reuse."""
    report = item.fallback
    parts = [f"prompt {item.metrics.get('prompt_tokens', 0):,} tokens"]
    if item.error:
        parts.insert(0, item.error)  # what went wrong first: an empty or missing answer reads as this line
    if report is not None and report.fallback_triggered:
        how = report.strategy + (f":{report.truncate_side}" if report.truncate_side else "")
        if report.chunks_total:
            how += f", {report.chunks_used}/{report.chunks_total} chunks"
        retention = report.key_entity_retention
        parts.append(f"did not fit ({report.reason}): {how}, {report.tokens_dropped:,} document tokens dropped, "
                     "key-entity retention " + ("not measured" if retention is None else f"{retention:.0%}"))
    ttft = item.metrics.get("ttft_s")
    if ttft is not None:
        parts.append(f"first token {ttft:.2f} s")
    cached = item.metrics.get("cached_prompt_tokens")
    if cached:
        parts.append(f"{cached:,} prompt tokens from the cache")
    parts.append(f"{seconds:.1f} s in all")
    return " · ".join(parts)


def fallback_dict(item) -> dict:
    """The item's fallback report as JSON, or what a prompt that fit looks like in the same shape."""
    if item.fallback is not None:
        return item.fallback.to_dict()
    return {"fallback_triggered": False, "strategy": None, "prompt_tokens": item.metrics.get("prompt_tokens", 0),
            "tokens_dropped": 0}
