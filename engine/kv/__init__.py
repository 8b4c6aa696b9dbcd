"""The KV cache: block pool, paged cache manager, warm INT8 tier, prefix and document caches, tier copies and the cold tier."""
