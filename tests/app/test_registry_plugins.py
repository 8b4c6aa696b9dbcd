"""Third-party pipelines plug in through entry points (group `longdoc.pipelines`), not through an
environment variable; a plug-in cannot take a built-in name."""

from __future__ import annotations

import subprocess
import sys

from pipelines.registry import available, get_pipeline
from tests.app.plugins import install_plugin


def test_an_entry_point_adds_a_pipeline(tmp_path, monkeypatch):
    assert "count" not in available()
    install_plugin(tmp_path / "site", monkeypatch, "count = tests.app.fake_pipeline:CountPipeline")
    assert "count" in available()
    assert type(get_pipeline("count")).__name__ == "CountPipeline"


def test_a_plugin_cannot_replace_a_built_in(tmp_path, monkeypatch):
    install_plugin(tmp_path / "site", monkeypatch, "patents = tests.app.fake_pipeline:CountPipeline")
    assert type(get_pipeline("patents")).__name__ == "PatentsPipeline"


def test_the_environment_imports_nothing(tmp_path, monkeypatch):
    marker = tmp_path / "imported"
    (tmp_path / "evil_mod.py").write_text(f"open({str(marker)!r}, 'w').close()\nclass P: pass\n", encoding="utf-8")
    env = {"LONGDOC_PIPELINES": "evil=evil_mod:P", "PYTHONPATH": str(tmp_path)}
    code = "from pipelines.registry import available; print(','.join(available()))"
    out = subprocess.run([sys.executable, "-c", code], env=env | {"PATH": "/usr/bin:/bin"}, capture_output=True,
                         text=True, timeout=60)  # cwd: the checkout, so pipelines is importable
    assert out.returncode == 0, out.stderr
    assert "evil" not in out.stdout.split(",") and not marker.exists()
