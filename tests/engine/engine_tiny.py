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
