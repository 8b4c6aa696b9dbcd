"""Text helpers shared by every pipeline and by the engine's long-request fallback, one home each:

- `script`: the CJK character classes, `has_cjk`, `cjk_share`, language detection;
- `numerals`: roman and Chinese numerals, both ways;
- `retrieval`: BM25 and the all-MiniLM-L6-v2 embedder (loaded once per process);
- `entities`: key-entity patterns and their retention when only parts of a text are kept;
- `fallback_tools`: `PipelineTextTools`, the engine fallback's `TextTools` built on the above.

Modules are imported directly (`from pipelines.text.script import has_cjk`); this package imports
nothing heavy on its own.
"""
