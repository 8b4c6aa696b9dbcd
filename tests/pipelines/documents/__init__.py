"""Tests of pipelines.documents: ingest of text, docx and PDF into the document model."""
