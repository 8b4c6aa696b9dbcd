"""`longdoc medical FOLDER [--question ...] [--json]`."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from app.cli import app

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "medical"
runner = CliRunner()


def test_json_export_with_question():
    res = runner.invoke(app, ["medical", str(FIX / "en-appendectomy"), "--question", "why was the antibiotic changed?",
                              "--json", "--no-embeddings"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["pipeline"] == "medical" and len(data["documents"]) == 6
    q = [e for e in data["evidence"] if e["kind"] == "question"]
    assert q and "vancomycin" in q[0]["supporting"][0]["span"]["text"]


def test_human_output_lists_conflicts_and_evidence():
    res = runner.invoke(app, ["medical", str(FIX / "zh-cholecystitis"), "--no-embeddings"])
    assert res.exit_code == 0, res.output
    assert "Diagnosis:" in res.stdout and "Problem list" in res.stdout and "Medications" in res.stdout
    res = runner.invoke(app, ["medical", str(FIX / "en-cholangitis-md"), "--no-embeddings"])
    assert res.exit_code == 0, res.output
    assert "conflict" in res.stdout and "neither time of day stated" in res.stdout


def test_bad_file_is_one_line_naming_it(tmp_path):
    (tmp_path / "note.txt").write_text("Chief complaint: fever.")
    (tmp_path / "broken.pdf").write_bytes(b"not a pdf")
    res = runner.invoke(app, ["medical", str(tmp_path), "--no-embeddings"])
    assert res.exit_code == 1
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "broken.pdf" in err[0]


def test_missing_folder_fails_cleanly(tmp_path):
    res = runner.invoke(app, ["medical", str(tmp_path / "nope")])
    assert res.exit_code == 1 and "nope" in res.stderr


def test_folder_of_several_patients_reports_each_or_refuses_json():
    res = runner.invoke(app, ["medical", str(FIX / "curated-no-truth"), "--no-embeddings"])
    assert res.exit_code == 0, res.output
    assert "the documents are of 5 patients, not one" in res.stdout
    assert res.stdout.count("=== Patient ") == 5 and "sex female · age 74 years" in res.stdout
    res = runner.invoke(app, ["medical", str(FIX / "zh-cmbclin-sample" / "notes"), "--json", "--no-embeddings"])
    assert res.exit_code == 2 and not res.stdout
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "20 patients" in err[0] and "longdoc batch" in err[0]
