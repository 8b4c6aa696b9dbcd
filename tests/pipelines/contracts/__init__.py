"""Tests of the contracts pipeline: structure, alignment, flags, export, and the real version pairs."""
