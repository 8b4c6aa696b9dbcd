"""The engine's tokenizer: a `tokenizers.Tokenizer` plus the special tokens and chat template.

From a HF folder we use its `tokenizer.json` as written (its post-processor adds BOS where the
model wants it). From a GGUF file we rebuild a fast tokenizer from the vocabulary in the metadata
(`engine.model.loader.gguf_tokenizer`). Chat templates are rendered with jinja2 in a sandbox.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from tokenizers import Tokenizer as FastTokenizer

from engine.errors import EngineError

CACHE_MIN_CHARS = 4096  # texts this long are kept (Tokenizer._encoding)
CACHE_TEXTS = 16  # how many: a review group's 8 documents, each counted alone and with the instructions


@dataclass
class Encoding:
    ids: list[int]
    offsets: list[tuple[int, int]]  # character span in the text of every token ((0, 0) for added BOS)


@dataclass
class Tokenizer:
    fast: FastTokenizer
    bos_token: str | None = None
    eos_token: str | None = None
    chat_template: str | None = None
    special_ids: set[int] = field(default_factory=set)

    @property
    def vocab_size(self) -> int:
        return self.fast.get_vocab_size(with_added_tokens=True)

    _recent: OrderedDict = field(default_factory=OrderedDict, init=False, repr=False, compare=False)

    def _encoding(self, text: str, add_special_tokens: bool):
        """The fast tokenizer's encoding of `text`; the last few long texts' are kept: a batch over a
        document counts its tokens, prefills it and attributes answers over it, and each would
        tokenize it again (7.5 ms for 7,600 tokens of a patent on the CPU host)."""
        if len(text) < CACHE_MIN_CHARS:
            return self.fast.encode(text, add_special_tokens=add_special_tokens)
        key = (text, add_special_tokens)
        enc = self._recent.get(key)
        if enc is None:
            enc = self._recent[key] = self.fast.encode(text, add_special_tokens=add_special_tokens)
            while len(self._recent) > CACHE_TEXTS:
                self._recent.popitem(last=False)
        else:
            self._recent.move_to_end(key)
        return enc

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(self._encoding(text, add_special_tokens).ids)  # a new list: callers may extend it

    def encode_with_offsets(self, text: str, add_special_tokens: bool = True) -> Encoding:
        enc = self._encoding(text, add_special_tokens)
        return Encoding(list(enc.ids), [tuple(o) for o in enc.offsets])

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.fast.decode(ids, skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        return self.fast.token_to_id(token)

    def apply_chat_template(self, messages: list[dict[str, Any]], add_generation_prompt: bool = True) -> str:
        """Render `messages` with the model's chat template (raises EngineError if it has none)."""
        if not self.chat_template:
            raise EngineError("this model has no chat template; pass a plain prompt to generate()")
        import jinja2
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise EngineError(f"chat template: {message}")

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, loader=jinja2.BaseLoader())
        env.globals["raise_exception"] = raise_exception
        return env.from_string(self.chat_template).render(
            messages=messages,
            add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token or "",
            eos_token=self.eos_token or "",
        )
