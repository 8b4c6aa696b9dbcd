"""The layer between the pipelines and the engine: one engine handle per process and settings,
batched requests over one document (its KV computed once) with progress, cancellation, budgets,
per-item errors, log-probs and attribution to the document's characters, decisions by scoring
labelled continuations, and `--llm off|auto|on` with the registry of measured steps.

    from pipelines.llm import EngineSettings, get_engine, ask_document, choose
    llm = get_engine(EngineSettings.from_env())
    res = ask_document(llm, doc, ["Which law governs?", "What is the cap?"], attribute=True)
    choose(llm, prompt, {"yes": " yes", "no": " no"}).label

A pipeline's LLM steps run inside an `LLMRun` (pipelines.llm.run): `with run.step(name) as st:`.
"""

from pipelines.llm.choose import Choice, choose, choose_batch
from pipelines.llm.modes import LLMMode, Measurement, StepDecision, decision, register, step_enabled
from pipelines.llm.requests import (
    INSTRUCTIONS,
    QUESTION,
    STOP,
    BatchResult,
    Budget,
    Item,
    Progress,
    ask_document,
    ask_documents,
)
from pipelines.llm.run import LLMReport, LLMRun, StepContext, StepRecord
from pipelines.llm.settings import (
    EngineSettings,
    EngineUnavailable,
    engine_lock,
    forget_engines,
    get_engine,
    loaded_engines,
)
from pipelines.llm.spans import AttributedSpan, attribute_answer, attribute_answers, sentence_spans

__all__ = [
    "INSTRUCTIONS",
    "QUESTION",
    "STOP",
    "AttributedSpan",
    "BatchResult",
    "Budget",
    "Choice",
    "EngineSettings",
    "EngineUnavailable",
    "Item",
    "LLMReport",
    "LLMRun",
    "LLMMode",
    "Measurement",
    "Progress",
    "StepContext",
    "StepDecision",
    "StepRecord",
    "ask_document",
    "ask_documents",
    "attribute_answer",
    "attribute_answers",
    "choose",
    "choose_batch",
    "engine_lock",
    "decision",
    "forget_engines",
    "get_engine",
    "loaded_engines",
    "register",
    "sentence_spans",
    "step_enabled",
]
