"""Plugging test pipelines into the registry the way a third-party package does: an entry point of
the group `longdoc.pipelines` in a `*.dist-info` folder on the path (what `pip install` writes),
seen by this process (sys.path) and by the processes it starts (PYTHONPATH)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COUNT = "count = tests.app.fake_pipeline:CountPipeline"


def install_plugin(site: Path, monkeypatch, *lines: str, dist: str = "longdoc_test_plugins") -> Path:
    """Write `site/<dist>-0.1.dist-info` declaring `lines` (`name = module:Class`) in the group
    `longdoc.pipelines` and put `site` and the repository root on both paths."""
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[longdoc.pipelines]\n" + "\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(site), str(ROOT), os.environ.get("PYTHONPATH")) if p))
    return info


def install_count(tmp_path: Path, monkeypatch) -> Path:
    """The `count` pipeline of tests/app/fake_pipeline.py, as a plug-in."""
    return install_plugin(Path(tmp_path) / "site", monkeypatch, COUNT)
