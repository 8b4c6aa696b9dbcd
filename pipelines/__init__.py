"""Domain pipelines of longdoc and the shared document model they all stand on.

`pipelines.documents` holds the document model (Document, Page, Span, SourceSpan; the export's
DocumentInfo and the input hash) and ingest of txt/md/docx/pdf; `pipelines.text` the text helpers
they share (script and language, numerals, retrieval, key entities, the engine fallback's text
tools); each other subpackage (`patents`, `contracts`, `medical`, `reports`) is one domain
pipeline registered in `pipelines.registry`.
"""
