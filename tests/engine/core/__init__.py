"""Tests of engine.core: the scheduler and request metrics."""
