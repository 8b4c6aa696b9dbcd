"""The model: configuration, layers, RoPE, the decoder, model families, loading and the tokenizer."""
