"""The output processor: a request's new tokens turned into text, stop strings and finish
reasons, stream deltas, and the final `GenerationOutput`.

Decoding is incremental per step: the output's token ids are detokenized again after each new token
(special tokens skipped unless the request says otherwise); a stop string cuts the text at its first
occurrence and finishes the request; a delta holds back an incomplete UTF-8 tail and any suffix
that may still become a stop string, so streamed text never has to be taken back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.sequence import Sequence


@dataclass
class GenerationOutput:
    prompt: str | None
    prompt_token_ids: list[int]
    token_ids: list[int]
    text: str
    finish_reason: str  # "eos" | "stop" | "length" | "abort"
    cached_tokens: int = 0  # prompt tokens whose K/V came from the prefix cache
    metrics: dict = field(default_factory=dict)  # ttft_s, itl_mean_s, tokens_per_s, ...


@dataclass
class StreamDelta:
    """One step of streaming: the new text and tokens of prompt number `index`."""

    index: int
    text: str
    token_ids: list[int]
    finished: bool = False
    finish_reason: str | None = None


class OutputProcessor:
    """Text and finish state of sequences, from their sampled tokens.

    tokenizer: the model's (None: token ids only, empty text). eos_token_ids: the model's end
    tokens. max_model_len: a sequence that reaches it finishes with "length"."""

    def __init__(self, tokenizer, eos_token_ids: list[int], max_model_len: int) -> None:
        self.tokenizer = tokenizer
        self.eos = set(eos_token_ids)
        self.max_model_len = max_model_len

    def decode(self, ids: list[int], skip_special: bool = True) -> str:
        """Text of `ids` ("" without a tokenizer)."""
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special) if self.tokenizer is not None else ""

    def finish_if_empty(self, s: Sequence) -> bool:
        """Finish a request that asks for no tokens at all (max_tokens 0); True if it did."""
        if s.params.max_tokens == 0:
            s.finish_reason = "length"
            return True
        return False

    def process(self, s: Sequence, tok: int) -> str:
        """Account for `tok`, just appended to `s.output_ids`: update the text and the finish
        reason; return the new streamable text."""
        self._update_text(s, tok)
        return self._delta(s)

    def _update_text(self, s: Sequence, tok: int) -> None:
        p = s.params
        if (tok in self.eos and not p.ignore_eos) or tok in p.stop_token_ids:
            s.finish_reason = "eos" if tok in self.eos else "stop"
        s.text = self.decode(s.output_ids, p.skip_special_tokens)
        if p.stop and s.text:
            hits = [(s.text.find(st), st) for st in p.stop if st in s.text]
            if hits:
                cut = min(h for h, _ in hits)
                s.text = s.text[:cut]
                s.finish_reason = "stop"
        if not s.finished and (len(s.output_ids) >= p.max_tokens or s.num_tokens >= self.max_model_len):
            s.finish_reason = "length"

    @staticmethod
    def _delta(s: Sequence) -> str:
        """New streamable text: hold back an incomplete UTF-8 tail and a possible stop-string prefix."""
        text = s.text
        end = len(text)
        if not s.finished:
            while end > s.emitted and text[end - 1] == "\ufffd":
                end -= 1
            hold = max((len(st) - 1 for st in s.params.stop), default=0)
            end = max(s.emitted, end - hold)
        out = text[s.emitted : end]
        s.emitted = end
        return out

    @staticmethod
    def copy_state(src: Sequence, dst: Sequence) -> None:
        """Give `dst` (an identical request computed through `src`) `src`'s output so far."""
        dst.output_ids = list(src.output_ids)
        dst.text, dst.emitted, dst.finish_reason = src.text, src.emitted, src.finish_reason
        dst.cached_tokens, dst.first_token_time, dst.token_times = src.cached_tokens, src.first_token_time, list(src.token_times)

    @staticmethod
    def output(s: Sequence) -> GenerationOutput:
        """The finished request as the API returns it."""
        return GenerationOutput(
            s.prompt, s.prompt_ids, list(s.output_ids), s.text, s.finish_reason or "length",
            cached_tokens=s.cached_tokens, metrics=s.metrics(),
        )
