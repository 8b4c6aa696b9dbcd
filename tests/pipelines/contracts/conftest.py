"""Shared fixtures of the contracts tests: the real version pairs copied from the corpus."""

from __future__ import annotations

import pytest

from tests.pipelines.contracts.data import load_pair


@pytest.fixture(scope="session")
def csa() -> str:
    return load_pair("en-commonpaper-csa-1.0-to-1.1")[0]


@pytest.fixture(scope="session")
def zh_law() -> str:
    return load_pair("zh-interpretation-personal-injury-2020-to-2022")[0]


# the layer's tiny random-weight model (character tokenizer), for the LLM steps' plumbing tests
from tests.pipelines.llm.conftest import _one_torch_thread, tiny_llm, tiny_text_model  # noqa: E402, F401
