"""Helpers shared by the family modules: reading HF config dicts and GGUF metadata, and the
llama.cpp tensor names common to every family."""

from __future__ import annotations

from typing import Any

from engine.errors import ModelLoadError
from engine.model.rope import RopeConfig


def need(cfg: dict[str, Any], key: str, where: str) -> Any:
    if key not in cfg or cfg[key] is None:
        raise ModelLoadError(f"{where}: config is missing {key!r}")
    return cfg[key]


def hf_rope(cfg: dict[str, Any], layer_type: str | None = None, default_theta: float = 10000.0) -> RopeConfig:
    """RoPE of one layer type from a HF config: `rope_parameters` (transformers 5) or `rope_theta` +
    `rope_scaling` (config.json files written by transformers 4)."""
    params = cfg.get("rope_parameters")
    if isinstance(params, dict) and params:
        if layer_type is not None and isinstance(params.get(layer_type), dict):
            return RopeConfig.from_hf(params[layer_type], default_theta)
        if "rope_theta" in params or "rope_type" in params:
            return RopeConfig.from_hf(params, cfg.get("rope_theta", default_theta))
    theta = float(cfg.get("rope_theta", default_theta))
    scaling = dict(cfg.get("rope_scaling") or {})
    scaling.setdefault("rope_theta", theta)
    return RopeConfig.from_hf(scaling, theta)


def gguf_rope(meta: dict[str, Any], arch: str, default_theta: float = 10000.0) -> RopeConfig:
    """RoPE from GGUF metadata keys `{arch}.rope.*`."""
    theta = float(meta.get(f"{arch}.rope.freq_base", default_theta))
    stype = meta.get(f"{arch}.rope.scaling.type", "none")
    params: dict[str, Any] = {"rope_theta": theta}
    if stype in ("linear", "yarn"):
        params["rope_type"] = stype
        params["factor"] = float(meta.get(f"{arch}.rope.scaling.factor", 1.0))
        omax = meta.get(f"{arch}.rope.scaling.original_context_length")
        if omax:
            params["original_max_position_embeddings"] = int(omax)
    return RopeConfig.from_hf(params, theta)


def gguf_dims(meta: dict[str, Any], arch: str, n_vocab: int | None) -> dict[str, Any]:
    """The shape fields every family stores under the same GGUF keys."""
    where = f"GGUF ({arch})"

    def g(key: str) -> Any:
        full = f"{arch}.{key}"
        if full not in meta:
            raise ModelLoadError(f"{where}: metadata is missing {full!r}")
        return meta[full]

    hidden = int(g("embedding_length"))
    heads = int(g("attention.head_count"))
    kv = meta.get(f"{arch}.attention.head_count_kv", heads)
    head_dim = int(meta.get(f"{arch}.attention.key_length", hidden // heads))
    vocab = meta.get(f"{arch}.vocab_size") or n_vocab
    if vocab is None:
        raise ModelLoadError(f"{where}: cannot tell the vocabulary size")
    return {
        "vocab_size": int(vocab),
        "hidden_size": hidden,
        "intermediate_size": int(g("feed_forward_length")),
        "num_layers": int(g("block_count")),
        "num_heads": heads,
        "num_kv_heads": int(kv),
        "head_dim": head_dim,
        "rms_norm_eps": float(meta.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)),
        "max_position_embeddings": int(meta.get(f"{arch}.context_length", 4096)),
    }


def gguf_special_ids(meta: dict[str, Any]) -> dict[str, Any]:
    eos = meta.get("tokenizer.ggml.eos_token_id")
    eot = meta.get("tokenizer.ggml.eot_token_id")
    eos_ids = [int(x) for x in (eos, eot) if x is not None]
    bos = meta.get("tokenizer.ggml.bos_token_id")
    pad = meta.get("tokenizer.ggml.padding_token_id")
    return {
        "bos_token_id": int(bos) if bos is not None else None,
        "eos_token_ids": sorted(set(eos_ids)),
        "pad_token_id": int(pad) if pad is not None else None,
    }


# llama.cpp block tensor names -> HF names (the standard pre-norm layout of Llama/Qwen).
GGUF_BLOCK_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
GGUF_TOP_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


def gguf_to_hf_name(name: str, block_names: dict[str, str] = GGUF_BLOCK_NAMES) -> str | None:
    """HF parameter name of a llama.cpp tensor name, or None if the engine does not use it."""
    if name in GGUF_TOP_NAMES:
        return GGUF_TOP_NAMES[name]
    if name.startswith("blk."):
        _, idx, rest = name.split(".", 2)
        if rest in block_names:
            return f"model.layers.{idx}.{block_names[rest]}"
    return None
