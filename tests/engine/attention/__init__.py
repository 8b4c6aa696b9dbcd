"""Tests of engine.attention: backends, sparse selection, attribution."""
