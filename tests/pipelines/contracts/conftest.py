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
