"""Tiny random-weight transformers models of every family, for the engine's exactness tests."""

from __future__ import annotations

import torch

FAMILIES = ["gemma3", "llama", "qwen2", "qwen3", "mistral"]
VOCAB = 128


def tiny_hf_config(family: str, **over):
    """A small config of `family` (float32, no EOS so greedy runs never stop early)."""
    import transformers as tf

    common = dict(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512, initializer_range=0.2, eos_token_id=None,
        bos_token_id=None, pad_token_id=None, tie_word_embeddings=False,
    )
    if family == "gemma3":
        common.update(num_hidden_layers=6, head_dim=16, query_pre_attn_scalar=24, sliding_window=8, tie_word_embeddings=True)
        common.update(over)
        return tf.Gemma3TextConfig(**common)
    if family == "llama":
        common["rope_parameters"] = {
            "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 128,
        }
        common.update(over)
        return tf.LlamaConfig(**common)
    if family == "qwen2":
        common.update(over)
        return tf.Qwen2Config(**common)
    if family == "qwen3":
        common.update(head_dim=16)
        common.update(over)
        return tf.Qwen3Config(**common)
    if family == "mistral":
        common.update(sliding_window=16)
        common.update(over)
        return tf.MistralConfig(**common)
    raise ValueError(family)


def tiny_hf_model(family: str, seed: int = 0, **over) -> torch.nn.Module:
    """A transformers model of `family` with random weights, norms and biases included."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_hf_config(family, **over), attn_implementation="sdpa").eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(torch.randn_like(p) * 0.3 + (0.0 if family == "gemma3" else 1.0))
            elif name.endswith("bias"):
                p.copy_(torch.randn_like(p) * 0.2)
    return model


def write_gguf(model: torch.nn.Module, family: str, path, qtype: str = "F32", drop: set[str] = frozenset(),
               arch: str | None = None, extra_kv: dict | None = None, extra_tensors: dict | None = None) -> None:
    """Write a transformers model as a llama.cpp-style GGUF (names, Gemma's 1 + w norms, Llama's
    q/k row permutation), 2-D weights in `qtype`, everything else F32. No tokenizer. `extra_kv`:
    more metadata (int: uint32, float: float32), written after the model's (a key given twice: the
    later wins when read); `extra_tensors`: more F32 tensors by name."""
    import gguf
    import numpy as np

    from engine.model.families import gemma3 as g3
    from engine.model.families.common import GGUF_BLOCK_NAMES, GGUF_TOP_NAMES

    cfg = model.config
    arch = arch or {"mistral": "llama"}.get(family, family)
    block = g3.GGUF_NAMES if family == "gemma3" else GGUF_BLOCK_NAMES
    inv_block = {v: k for k, v in block.items()}
    inv_top = {v: k for k, v in GGUF_TOP_NAMES.items()}
    w = gguf.GGUFWriter(str(path), arch)
    w.add_uint32(f"{arch}.context_length", cfg.max_position_embeddings)
    w.add_uint32(f"{arch}.embedding_length", cfg.hidden_size)
    w.add_uint32(f"{arch}.block_count", cfg.num_hidden_layers)
    w.add_uint32(f"{arch}.feed_forward_length", cfg.intermediate_size)
    w.add_uint32(f"{arch}.attention.head_count", cfg.num_attention_heads)
    w.add_uint32(f"{arch}.attention.head_count_kv", cfg.num_key_value_heads)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    w.add_uint32(f"{arch}.attention.key_length", head_dim)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", cfg.rms_norm_eps)
    w.add_uint32(f"{arch}.vocab_size", cfg.vocab_size)
    rope = cfg.rope_parameters.get("full_attention", cfg.rope_parameters)
    w.add_float32(f"{arch}.rope.freq_base", rope["rope_theta"])
    if family in ("gemma3", "mistral"):
        w.add_uint32(f"{arch}.attention.sliding_window", cfg.sliding_window)
    if rope.get("rope_type") == "llama3":  # llama.cpp writes llama3 scaling as per-frequency divisors
        from engine.model.rope import RopeConfig, inv_freq_and_scale

        plain, _ = inv_freq_and_scale(RopeConfig(theta=rope["rope_theta"]), head_dim, cfg.max_position_embeddings)
        scaled, _ = inv_freq_and_scale(RopeConfig.from_hf(rope, 1e4), head_dim, cfg.max_position_embeddings)
        w.add_tensor("rope_freqs.weight", (plain / scaled).numpy().astype(np.float32))
    for key, val in (extra_kv or {}).items():
        (w.add_float32 if isinstance(val, float) else w.add_uint32)(key, val)
    for key, arr in (extra_tensors or {}).items():
        w.add_tensor(key, np.ascontiguousarray(arr, dtype=np.float32))
    q = gguf.GGMLQuantizationType[qtype]
    for name, t in model.state_dict().items():
        if name in inv_top:
            gname = inv_top[name]
        elif name.startswith("model.layers."):
            _, _, idx, rest = name.split(".", 3)
            gname = f"blk.{idx}.{inv_block[rest]}"
        else:
            continue
        if gname in drop or (name == "lm_head.weight" and cfg.tie_word_embeddings):
            continue
        a = t.detach().float().numpy().copy()
        if family == "gemma3" and name.endswith("norm.weight"):
            a = a + 1.0
        if arch == "llama" and (".q_proj." in name or ".k_proj." in name):
            n_head = cfg.num_attention_heads if ".q_proj." in name else cfg.num_key_value_heads
            a = a.reshape(n_head, 2, a.shape[0] // n_head // 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)
        if a.ndim == 2 and q != gguf.GGMLQuantizationType.F32:
            w.add_tensor(gname, gguf.quants.quantize(a, q), raw_dtype=q)
        else:
            w.add_tensor(gname, np.ascontiguousarray(a, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def hf_gemma_from_engine(llm) -> torch.nn.Module:
    """transformers' Gemma3ForCausalLM built from the engine's parsed config, holding the engine's
    (dequantised) weight tensors. Built on the meta device when this transformers version exposes
    what is needed to recompute the non-persistent buffers, else on the CPU (slower, any version)."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    c = llm.config
    cfg = Gemma3TextConfig(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
        num_hidden_layers=c.num_layers, num_attention_heads=c.num_heads, num_key_value_heads=c.num_kv_heads,
        head_dim=c.head_dim, rms_norm_eps=c.rms_norm_eps, max_position_embeddings=c.max_position_embeddings,
        sliding_window=[w for w in c.layer_windows if w][0],
        layer_types=["sliding_attention" if w else "full_attention" for w in c.layer_windows],
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": c.layer_ropes[c.global_layers[0]].theta},
            "sliding_attention": {"rope_type": "default", "rope_theta": c.layer_ropes[c.sliding_layers[0]].theta},
        },
        query_pre_attn_scalar=round(c.attn_scale**-2), tie_word_embeddings=True,
        bos_token_id=c.bos_token_id, eos_token_id=c.eos_token_ids[0], pad_token_id=c.pad_token_id,
    )
    state = dict(llm.model.state_dict())
    state["lm_head.weight"] = state["model.embed_tokens.weight"]
    with torch.device("meta"):
        model = Gemma3ForCausalLM(cfg)
    rot = model.model.rotary_emb
    emb = model.model.embed_tokens
    if hasattr(rot, "layer_types") and hasattr(rot, "compute_default_rope_parameters") and hasattr(emb, "embed_scale"):
        model.load_state_dict(state, assign=True, strict=True)
        emb.embed_scale = torch.tensor(c.hidden_size**0.5)
        for layer_type in rot.layer_types:
            inv, _ = rot.compute_default_rope_parameters(cfg, "cpu", layer_type=layer_type)
            setattr(rot, f"{layer_type}_inv_freq", inv)
            setattr(rot, f"{layer_type}_original_inv_freq", inv.clone())
    else:  # pragma: no cover - other transformers versions
        model = Gemma3ForCausalLM(cfg)
        model.load_state_dict(state, strict=True)
    model.tie_weights()
    return model.eval().to(llm.dtype)
