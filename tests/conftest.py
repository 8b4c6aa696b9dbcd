"""Shared test configuration: GPU tests skip without CUDA; `__main__` is restored after each test."""

from __future__ import annotations

import sys

import pytest


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _keep_main_module():
    """Streamlit's AppTest runs page scripts as `__main__` and leaves its script module there; a
    later test that spawns worker processes (`longdoc batch --jobs N`) would make every child
    re-run that script. Restore the real `__main__` after each test."""
    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main


def pytest_configure(config):
    """The disk KV cache keeps each folder's key in the user's key folder (`LONGDOC_KEY_DIR`): the
    suite, and every process it starts, uses one of its own, never the user's ~/.config."""
    import os
    import tempfile

    if not os.environ.get("LONGDOC_KEY_DIR"):
        os.environ["LONGDOC_KEY_DIR"] = tempfile.mkdtemp(prefix="longdoc-test-keys-")


@pytest.fixture(autouse=True)
def _rules_only_by_default(monkeypatch):
    """The commands' --llm default is auto (the LLM steps measured to help, which load the model);
    the suite runs rules-only unless a test asks for a mode (its own --llm, or LONGDOC_LLM)."""
    monkeypatch.setenv("LONGDOC_LLM", "off")


@pytest.fixture(autouse=True, scope="module")
def _forget_engines():
    """Engines loaded through `pipelines.llm.get_engine` live as long as the process; drop them
    after each test module so the suite's memory does not grow with every module that loads one."""
    yield
    settings = sys.modules.get("pipelines.llm.settings")
    if settings is not None:
        settings.forget_engines()
