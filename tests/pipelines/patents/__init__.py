"""Tests of the patents pipeline: claim structure, references, findings, export, and the corpus."""
