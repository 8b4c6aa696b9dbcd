"""The real version pairs copied from the corpus into tests/fixtures/contracts (see PROVENANCE.md there)."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "contracts"
PAIRS = sorted(p.name for p in FIXTURES.iterdir() if (p / "truth.json").is_file())


def load_pair(name: str) -> tuple[str, str, dict]:
    d = FIXTURES / name
    return ((d / "v1.txt").read_text(encoding="utf-8"), (d / "v2.txt").read_text(encoding="utf-8"),
            json.loads((d / "truth.json").read_text(encoding="utf-8")))
