"""Tests of engine.fallback: requests that do not fit."""
