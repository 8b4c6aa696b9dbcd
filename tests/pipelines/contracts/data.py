"""The real version pairs copied from the corpus into tests/fixtures/contracts (see PROVENANCE.md there)."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "contracts"
PAIRS = sorted(p.name for p in FIXTURES.iterdir() if (p / "truth.json").is_file())

# A two-clause agreement and its edit: one clause modified (amount, duration and obligation change).
SMALL_A = "1. Fees\n\n1.1 Customer shall pay USD 100 within 30 days.\n\n1.2 Late payments bear interest of 1% per month.\n"
SMALL_B = "1. Fees\n\n1.1 Customer may pay USD 150 within 45 days.\n\n1.2 Late payments bear interest of 1% per month.\n"


def load_pair(name: str) -> tuple[str, str, dict]:
    d = FIXTURES / name
    return ((d / "v1.txt").read_text(encoding="utf-8"), (d / "v2.txt").read_text(encoding="utf-8"),
            json.loads((d / "truth.json").read_text(encoding="utf-8")))
