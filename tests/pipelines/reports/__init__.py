"""Tests of the reports pipeline: layout, floats, mentions, export, and the PDF corpus."""
