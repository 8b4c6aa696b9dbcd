"""Tests of engine.model: loading, model families against transformers, the real default model."""
