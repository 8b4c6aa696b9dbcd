"""Tests of the pipelines: one subfolder per package under pipelines/."""
