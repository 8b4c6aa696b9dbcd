"""A fast tokenizer rebuilt from the vocabulary stored in GGUF metadata.

- `tokenizer.ggml.model == "llama"` (SentencePiece vocabularies: Gemma, Llama 2, Mistral): a BPE
  with byte fallback, merges recovered from the vocabulary (a piece a+b gives merge (a, b)), ranked
  by the tokens' scores, or for Gemma by their order in the file (Gemma's scores do not follow its
  merge order). Gemma files store tokens of several spaces as real spaces; they are respelled "▁".
- `"gpt2"` (Llama 3, Qwen): byte-level BPE with the file's merges and the split regex named by
  `tokenizer.ggml.pre`.
Control tokens (type 3) become special added tokens, user-defined ones (type 4) plain added tokens.
The built tokenizer is cached as tokenizer.json next to the engine cache so later loads take ~1 s.
"""

from __future__ import annotations

from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from engine.errors import ModelLoadError

_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_SPLITS = {
    "llama3": _LLAMA3_SPLIT,
    "llama-v3": _LLAMA3_SPLIT,
    "llama-bpe": _LLAMA3_SPLIT,
    "smaug-bpe": _LLAMA3_SPLIT,
    "qwen2": _QWEN2_SPLIT,
    "deepseek-r1-qwen": _QWEN2_SPLIT,
}


def _merges_from_vocab(tokens: list[str], rank: dict[str, float], descending: bool) -> list[tuple[str, str]]:
    vocab = {t: i for i, t in enumerate(tokens)}
    found: list[tuple[float, int, int, int, int, str, str]] = []
    for tok in tokens:
        if len(tok) < 2:
            continue
        score = rank[tok]
        for cut in range(1, len(tok)):
            left, right = tok[:cut], tok[cut:]
            if left in vocab and right in vocab:
                key = -score if descending else score
                found.append((key, -len(left), -len(right), vocab[left], vocab[right], left, right))
    # best merge first; within one score longer left, then longer right pieces first (as transformers)
    found.sort(key=lambda m: m[:5])
    return [(m[5], m[6]) for m in found]


def build_gguf_tokenizer(meta: dict[str, Any], arch: str) -> Tokenizer:
    """Build a `tokenizers.Tokenizer` from GGUF metadata (raises ModelLoadError if it has none)."""
    kind = meta.get("tokenizer.ggml.model")
    tokens = meta.get("tokenizer.ggml.tokens")
    if kind is None or tokens is None:
        raise ModelLoadError("GGUF file has no tokenizer (tokenizer.ggml.model / tokens missing)")
    tokens = list(tokens)
    types = meta.get("tokenizer.ggml.token_type")
    types = [int(x) for x in types] if types is not None else [1] * len(tokens)
    unk_id = meta.get("tokenizer.ggml.unknown_token_id")
    if kind == "llama":
        gemma = arch.startswith("gemma")
        if gemma:
            tokens = ["\u2581" * len(t) if t and " " in t and not t.strip() else t for t in tokens]
            rank = {t: float(-i) for i, t in enumerate(tokens)}
        else:
            scores = meta.get("tokenizer.ggml.scores")
            rank = {t: float(s) for t, s in zip(tokens, scores, strict=True)} if scores is not None else {
                t: float(-i) for i, t in enumerate(tokens)
            }
        merges = _merges_from_vocab(tokens, rank, descending=True)
        vocab = {t: i for i, t in enumerate(tokens)}
        unk = tokens[int(unk_id)] if unk_id is not None else None
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=unk, fuse_unk=True, byte_fallback=True))
        if gemma:
            tok.normalizer = normalizers.Replace(" ", "\u2581")
            tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
            tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
        else:
            prefix = bool(meta.get("tokenizer.ggml.add_space_prefix", True))
            tok.pre_tokenizer = pre_tokenizers.Metaspace(
                replacement="\u2581", prepend_scheme="first" if prefix else "never", split=False
            )
            steps = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
            if prefix:
                steps.append(decoders.Strip(" ", 1, 0))
            tok.decoder = decoders.Sequence(steps)
    elif kind == "gpt2":
        merges_raw = meta.get("tokenizer.ggml.merges")
        if merges_raw is None:
            raise ModelLoadError("GGUF byte-level tokenizer has no merges (tokenizer.ggml.merges)")
        merges = [tuple(m.split(" ", 1)) for m in merges_raw]
        vocab = {t: i for i, t in enumerate(tokens)}
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
        split = _SPLITS.get(str(meta.get("tokenizer.ggml.pre", "")), _LLAMA3_SPLIT)
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(split), behavior="isolated"), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        )
        tok.decoder = decoders.ByteLevel()
    else:
        raise ModelLoadError(f"GGUF tokenizer type {kind!r} is not supported (have 'llama', 'gpt2')")
    control = [AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types, strict=True) if ty == 3]
    user = [AddedToken(t, special=False, normalized=False) for t, ty in zip(tokens, types, strict=True) if ty == 4]
    if control:
        tok.add_special_tokens(control)
    if user:
        tok.add_tokens(user)
    bos_id = meta.get("tokenizer.ggml.bos_token_id")
    add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", kind == "llama"))
    if add_bos and bos_id is not None:
        bos = tokens[int(bos_id)]
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 $B:1", special_tokens=[(bos, int(bos_id))]
        )
    return tok
