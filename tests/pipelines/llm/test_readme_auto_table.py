"""The README's table of which LLM steps `auto` runs with the default model is the registry's."""

from __future__ import annotations

import re
from pathlib import Path

import pipelines.contracts.llm_steps  # noqa: F401 - each module registers its steps
import pipelines.medical.llm_steps  # noqa: F401
import pipelines.patents.llm_steps  # noqa: F401
import pipelines.reports.llm_steps  # noqa: F401
from pipelines.llm.modes import DEFAULT_MODEL, REGISTRY


def test_readme_auto_table_matches_the_registry():
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([a-z_.]+)` \| [^|]+ \| (yes|no) \|", readme, flags=re.M))
    registered = {step: d[DEFAULT_MODEL].in_auto for step, d in REGISTRY.items() if DEFAULT_MODEL in d}
    assert rows, "the README has the table"
    assert {k: v == "yes" for k, v in rows.items()} == registered
