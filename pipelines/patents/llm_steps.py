"""The patent pipeline's LLM step `patents.claim_summaries`: a plain-language sentence for each
independent claim and, for each dependent claim, for what it adds — attributed to the claim's own
words.

Prompts (completion style, for a small base model): a fixed two-claim example (a chair and its
padded backrest, `EXAMPLE` / `EXAMPLE_ZH`), then the claim's text, for a dependent claim the rules
summary of its parent ("Builds on claim 1: …", so the sentence says what the claim ADDS), and the
start of the answer ("Plain English: Claim 3 adds that"); greedy, at most `MAX_TOKENS` tokens,
stopped at the line's end. Prompt "guided" (the default; measured better than "plain") puts the
claim's own rules summary in too ("New in claim 3: …", "Its elements: …") for the model to reword.
Every prompt of one patent goes in one `ask_document` batch:

- strategy "short" (the default): the document placed once is the example alone, each claim's
  prompt after it is short;
- strategy "claims": the document placed once is the whole claim set (its KV computed once,
  behind the example), each claim's prompt after it.

BENCHMARKS.md ("LLM step: patents.claim_summaries") measures both strategies and both prompts. The parents' rules summaries
(`summaries.scaffold`), not their generated ones, go into the dependent prompts, so the whole claim
set is one batch instead of one batch per tree level.

Grounding: a summary's spans are the claim's own preamble and elements (a dependent claim: its
elements) whose content words the sentence uses, each with its share (`summaries.supporting_spans`);
`grounding` is the share of the sentence's content words found in the claim's text. When the model
gives nothing for a claim (an error, an empty line, a line without a content word), its summary is
the rules summary (`source` "rules") and says why. The same holds for a sentence the claim's words
do not carry (grounding under `VERIFIED_MIN`): model text that is not verified never looks like a
finding; it stays in the export as `model_text`.
"""

from __future__ import annotations

from pipelines.documents import Document
from pipelines.llm import (
    LLMRun,
    Measurement,
    StepDecision,
    ask_document,
    register,
)
from pipelines.patents.model import Claim, ClaimSummary, PatentResult, SummarySpan
from pipelines.patents.summaries import body, content_words, scaffold, supporting_spans

STEP = "patents.claim_summaries"
MAX_TOKENS = 40
VERIFIED_MIN = 0.8  # a model sentence is shown only when this share of its content words is the claim's own
STRATEGIES = ("short", "claims")
STOP = ("\n",)

EXAMPLE = """Patent claims explained in plain English.

Claim: 1. A chair, comprising: a seat made of a rigid material; four legs which are attached to a lower side of said seat; and a backrest which extends upward from a rear edge of said seat.
Plain English: Claim 1 covers a chair with a seat, four legs under it and a backrest at the back.

Claim: 2. The chair according to claim 1, wherein said backrest is padded with a layer of foam which is covered by a fabric.
Builds on claim 1: a chair with a seat, four legs and a backrest.
Plain English: Claim 2 adds that the backrest is padded with foam covered by fabric.
"""

EXAMPLE_ZH = """用通俗的语言解释专利权利要求。

权利要求：1. 一种椅子，其特征在于，包括由硬质材料制成的座板，固定在所述座板下侧的四条椅腿，以及从所述座板后缘向上延伸的靠背。
通俗解释：权利要求1保护一种椅子，它有座板、座板下的四条腿和后面的靠背。

权利要求：2. 根据权利要求1所述的椅子，其特征在于，所述靠背上设有泡沫垫层，所述泡沫垫层由织物包覆。
基于权利要求1：一种有座板、四条腿和靠背的椅子。
通俗解释：权利要求2增加了靠背上有用织物包覆的泡沫垫。
"""

# prompt "guided": the rules summary of the claim itself goes in the prompt too ("New in claim 3:
# …" / "Its elements: …"), so the model rewords the scaffold instead of finding the new part alone
_GUIDE = {
    "Plain English: Claim 1 covers": "Its elements: a seat, four legs and a backrest.\nPlain English: Claim 1 covers",
    "Plain English: Claim 2 adds": "New in claim 2: the backrest is padded with a layer of foam.\nPlain English: Claim 2 adds",
    "通俗解释：权利要求1保护": "其要素：座板、四条椅腿、靠背。\n通俗解释：权利要求1保护",
    "通俗解释：权利要求2增加了": "权利要求2新增：靠背上设有泡沫垫层、泡沫垫层由织物包覆。\n通俗解释：权利要求2增加了",
}


def _guided(example: str) -> str:
    for a, b in _GUIDE.items():
        example = example.replace(a, b)
    return example


EXAMPLES = {("plain", False): EXAMPLE, ("plain", True): EXAMPLE_ZH,
            ("guided", False): _guided(EXAMPLE), ("guided", True): _guided(EXAMPLE_ZH)}
PROMPTS = ("plain", "guided")

CLAIMS_INTRO = "\nThe claims of the patent:\n"
CLAIMS_INTRO_ZH = "\n本专利的权利要求：\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _lead(c: Claim, zh: bool) -> str:
    """The start of the answer the model completes."""
    if zh:
        return f"权利要求{c.number}保护" if c.independent else f"权利要求{c.number}增加了"
    return f"Claim {c.number} covers" if c.independent else f"Claim {c.number} adds that"


def claim_prompt(c: Claim, by_number: dict[int, Claim], zh: bool, prompt: str = "plain") -> str:
    """The part of a claim's prompt after the example (and, with strategy "claims", the claim set):
    the claim's text, the rules summary of its first parent, with prompt "guided" the claim's own
    rules summary, the answer's start."""
    lines = ["", f"权利要求：{_one_line(c.text)}" if zh else f"Claim: {_one_line(c.text)}"]
    parent = next((by_number[p] for p in c.depends_on if p in by_number), None)
    if not c.independent and parent is not None:
        base = scaffold(parent, zh).split("：" if zh else ": ", 1)[-1]
        lines.append(f"基于权利要求{parent.number}：{base}" if zh else f"Builds on claim {parent.number}: {base}")
    if prompt == "guided":
        own = scaffold(c, zh).split("：" if zh else ": ", 1)[-1]
        if c.independent:
            own = own.split("包括", 1)[-1] if zh else own.split(" with ", 1)[-1].split(": ", 1)[-1]
            lines.append(f"其要素：{own}" if zh else f"Its elements: {own}")
        else:
            lines.append(f"权利要求{c.number}新增：{own}" if zh else f"New in claim {c.number}: {own}")
    lines.append(f"通俗解释：{_lead(c, zh)}" if zh else f"Plain English: {_lead(c, zh)}")
    return "\n".join(lines)


def _sentence(lead: str, generated: str, zh: bool) -> str:
    """The lead and what the model wrote, cut at the first sentence end, ending with a full stop."""
    g = generated.strip()
    if zh:
        cut = min((i for i in (g.find("。"), g.find("\n")) if i >= 0), default=-1)
        g = (g[:cut] if cut >= 0 else g).rstrip("，,；;：:。 ")
        return f"{lead}{g}。" if g else ""
    for end in (". ", ".\n"):
        i = g.find(end)
        if i >= 0:
            g = g[:i]
    g = g.rstrip(" ,;:.")
    return f"{lead} {g}." if g else ""


def grounding(c: Claim, text: str) -> float:
    """Share of `text`'s content words found in the claim's own text (0.0 for a text without any)."""
    words = content_words(body(text))
    if not words:
        return 0.0
    return round(len(words & content_words(c.text)) / len(words), 4)


def _summary(c: Claim, zh: bool, text: str, source: str, error: str | None = None) -> ClaimSummary:
    spans = [SummarySpan(span=s, share=share) for s, share in supporting_spans(c, text)]
    return ClaimSummary(claim=c.number, kind="independent" if c.independent else "dependent", text=text,
                        source=source, scaffold=scaffold(c, zh), spans=spans, grounding=grounding(c, text),
                        error=error)


def rules_summaries(result: PatentResult) -> list[ClaimSummary]:
    """The rules-only summaries (the scaffold of every live claim) — the step's baseline."""
    zh = result.language == "zh"
    return [_summary(c, zh, scaffold(c, zh), "rules") for c in result.claims if not c.cancelled]


def _claims_document(doc: Document, result: PatentResult) -> Document:
    """The claim set as a document of its own (the claims section, else the whole text)."""
    sec = result.claims_section.span
    if sec is None:
        return doc
    return Document.from_text(doc.text[sec.char_start : sec.char_end], doc_id=f"{doc.doc_id}#claims")


def summarise_claims(result: PatentResult, doc: Document, run: LLMRun, strategy: str = "short",
                     max_tokens: int = MAX_TOKENS, prompt: str = "guided") -> list[ClaimSummary] | None:
    """Run the step over `result`'s live claims (see the module docstring); None when it did not run
    (mode, auto, no model, an engine failure: `run`'s report says which)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    if prompt not in PROMPTS:
        raise ValueError(f"prompt must be one of {', '.join(PROMPTS)}, not {prompt!r}")
    live = [c for c in result.claims if not c.cancelled and c.text.strip()]
    zh = result.language == "zh"
    by_number = {c.number: c for c in result.claims}
    prompts = [claim_prompt(c, by_number, zh, prompt) for c in live]
    example = EXAMPLES[prompt, zh]
    if strategy == "claims":
        context, instructions = _claims_document(doc, result), example + (CLAIMS_INTRO_ZH if zh else CLAIMS_INTRO)
    else:
        context, instructions = Document.from_text(example, doc_id="patents.claim_summaries.example"), ""
    # ~4 characters a token (English), ~1.3 for Chinese; decode steps in waves of the engine's batch
    per_tok = 1.3 if zh else 4.0
    prompt_tokens = int((len(instructions) + len(context.text) + sum(len(p) for p in prompts)) / per_tok)
    waves = -(-len(live) // max(1, run.settings.num_seqs()))
    out: list[ClaimSummary] | None = None
    with run.step(STEP, estimated_s=run.estimate_s(prompt_tokens, waves * max_tokens)) as st:
        if st is not None and live:
            res = ask_document(st.llm, context, prompts, instructions=instructions, question_template="{question}",
                               max_tokens=max_tokens, stop=STOP, strategy="auto",
                               on_progress=st.progress, cancel=run.cancel)
            st.add(res)
            out = []
            for c, it in zip(live, res.items, strict=True):
                text = _sentence(_lead(c, zh), it.text, zh) if it.ok else ""
                if text and content_words(body(text)) and grounding(c, text) >= VERIFIED_MIN:
                    out.append(_summary(c, zh, text, "model"))
                elif text and content_words(body(text)):  # not carried by the claim's words: never shown
                    kept = _summary(c, zh, scaffold(c, zh), "rules",
                                    f"the model's sentence is not carried by the claim's own words (grounding "
                                    f"{grounding(c, text):.0%} < {VERIFIED_MIN:.0%}); the rules summary is shown")
                    out.append(kept.model_copy(update={"model_text": text}))
                else:
                    why = it.error or ("the model wrote nothing" if not text else "the model's sentence has no words")
                    out.append(_summary(c, zh, scaffold(c, zh), "rules", why))
        elif st is not None:
            out = []
    return out


# Measured on the development corpus (10 patents, 229 claims; BENCHMARKS.md "LLM step:
# patents.claim_summaries"): the share of good summaries (grounding >= 0.8, not degenerate, a
# dependent claim's summary naming what it adds and nothing only its parents hold, an independent
# claim's naming at least half its elements) is 0.838 for the rules scaffold and 0.563 for Gemma 3
# 270M's sentences (guided prompt; 0.489 plain): no gain, so the step stays out of auto with the
# default model.
register(StepDecision(
    STEP, "default", in_auto=False,
    measurement=Measurement(
        metric="good summary share (grounded, focused, not degenerate), rules scaffold vs model",
        without=0.8384, with_step=0.5633,
        command="OMP_NUM_THREADS=1 python -m benchmarks.eval.patents_evaluate --llm on --strategy short --prompt guided",
        date="2026-12-03"),
    note="the 270M base model swaps subjects and repeats the parent's elements; the rules scaffold is more "
         "faithful. Runs with --llm on only; meant for larger models.",
))
