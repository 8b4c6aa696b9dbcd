"""Shared fixtures of the contracts tests: the real version pairs copied from the corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "contracts"
PAIRS = sorted(p.name for p in FIXTURES.iterdir() if (p / "truth.json").is_file())


def load_pair(name: str) -> tuple[str, str, dict]:
    d = FIXTURES / name
    return ((d / "v1.txt").read_text(encoding="utf-8"), (d / "v2.txt").read_text(encoding="utf-8"),
            json.loads((d / "truth.json").read_text(encoding="utf-8")))


@pytest.fixture(scope="session")
def csa() -> str:
    return load_pair("en-commonpaper-csa-1.0-to-1.1")[0]


@pytest.fixture(scope="session")
def zh_law() -> str:
    return load_pair("zh-interpretation-personal-injury-2020-to-2022")[0]
