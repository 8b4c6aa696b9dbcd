"""The long-context LLM engine (models, loading, paged KV cache, generation, attribution)."""
