"""Batch resume and the export's schema version: an output written in an older export shape is not
up to date, even with the same input hash and pipeline version."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from app.cli import app
from tests.app.plugins import install_count


def test_an_output_in_an_older_schema_is_written_again(tmp_path, monkeypatch):
    install_count(tmp_path / "plugin", monkeypatch)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    (folder / "b.txt").write_text("gamma\n", encoding="utf-8")
    out = tmp_path / "out"

    def batch() -> dict:
        res = CliRunner().invoke(app, ["batch", str(folder), "-p", "count", "-o", str(out), "--json"])
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)["counts"]

    assert batch()["ok"] == 2
    a_json = out / "count" / "a.txt.json"
    current = a_json.read_text(encoding="utf-8")
    old = json.loads(current)
    old["schema_version"] = "count/0.9"
    a_json.write_text(json.dumps(old), encoding="utf-8")
    counts = batch()
    assert (counts["ok"], counts["skipped"]) == (1, 1)
    assert a_json.read_text(encoding="utf-8") == current
