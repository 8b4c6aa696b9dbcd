"""Tests of the app: CLI, batch runner, UI pages."""
