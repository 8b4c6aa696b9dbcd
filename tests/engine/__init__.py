"""Tests of the engine, one subfolder per room of engine/."""
