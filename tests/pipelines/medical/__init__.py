"""Tests of the medical pipeline: entities, times, labs, evidence, export, and the truth files."""
