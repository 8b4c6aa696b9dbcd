"""Tests of engine.kv: paged cache, warm tier, prefix and document caches, tier copies, cold stores."""
