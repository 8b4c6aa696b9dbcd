"""The batch runner and CLI: outputs, summary, failures, resume, --force, --jobs, exit codes,
interruption. Uses the small `count` pipeline from tests/app/fake_pipeline.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import app
from app.export import load_result, to_json
from tests.app.plugins import install_count

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def count_pipeline(tmp_path_factory, monkeypatch):
    install_count(tmp_path_factory.mktemp("plugin"), monkeypatch)


def make_folder(root: Path, bad: bool = True) -> Path:
    folder = root / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    (folder / "b.md").write_text("# title\n\ntext\nmore\n", encoding="utf-8")
    (folder / "sub" / "c.txt").write_text("权利要求\n第二行\n".encode("gb18030").decode("latin-1"), encoding="latin-1")
    (folder / "notes.png").write_bytes(b"\x89PNG....")
    if bad:
        (folder / "empty.txt").write_bytes(b"")
        (folder / "crash.txt").write_text("CRASH here\n", encoding="utf-8")
        (folder / "junk.pdf").write_bytes(b"%PDF-1.4 broken")
    return folder


def run_cli(*args: str):
    return CliRunner().invoke(app, list(args))


def test_batch_outputs_summary_and_failures(tmp_path):
    folder = make_folder(tmp_path)
    out = tmp_path / "out"
    res = run_cli("batch", str(folder), "--pipeline", "count", "--out", str(out), "--quiet")
    assert res.exit_code == 1, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"] == {"total": 6, "ok": 3, "skipped": 0, "failed": 3, "not_run": 0}
    reasons = {f["input"]: f["reason"] for f in summary["failures"]}
    assert reasons["empty.txt"].endswith("empty.txt: file is empty")
    assert "broken PDF" in reasons["junk.pdf"]
    assert "internal error (RuntimeError: simulated pipeline bug)" in reasons["crash.txt"]
    assert all("\n" not in r for r in reasons.values())
    assert summary["ignored_files"] == [{"file": "notes.png", "reason": "unsupported file type (.png)"}]
    # one JSON per good input, loadable into the result model, spans pointing into the text
    result = load_result("count", (out / "count" / "sub" / "c.txt.json").read_text(encoding="utf-8"))
    assert [line.span.text for line in result.lines] == ["权利要求", "第二行"]
    assert not list(out.rglob("*.tmp"))


def test_resume_skips_up_to_date_and_force_recomputes(tmp_path):
    folder = make_folder(tmp_path, bad=False)
    out = tmp_path / "out"
    assert run_cli("batch", str(folder), "-p", "count", "-o", str(out), "-q").exit_code == 0
    a_json = out / "count" / "a.txt.json"
    first = a_json.read_bytes()
    res = run_cli("batch", str(folder), "-p", "count", "-o", str(out), "--json")
    assert res.exit_code == 0
    assert json.loads(res.stdout)["counts"]["skipped"] == 3
    # a changed input is recomputed, the others stay skipped
    (folder / "a.txt").write_text("alpha\nbeta\ngamma\n", encoding="utf-8")
    res = run_cli("batch", str(folder), "-p", "count", "-o", str(out), "--json")
    counts = json.loads(res.stdout)["counts"]
    assert (counts["ok"], counts["skipped"]) == (1, 2)
    assert a_json.read_bytes() != first
    res = run_cli("batch", str(folder), "-p", "count", "-o", str(out), "--json", "--force")
    assert json.loads(res.stdout)["counts"]["ok"] == 3


def test_jobs_give_identical_outputs(tmp_path):
    folder = make_folder(tmp_path)
    out1, out2 = tmp_path / "o1", tmp_path / "o2"
    assert run_cli("batch", str(folder), "-p", "count", "-o", str(out1), "-q").exit_code == 1
    assert run_cli("batch", str(folder), "-p", "count", "-o", str(out2), "-q", "--jobs", "2").exit_code == 1
    files1 = sorted(p.relative_to(out1) for p in (out1 / "count").rglob("*.json"))
    files2 = sorted(p.relative_to(out2) for p in (out2 / "count").rglob("*.json"))
    assert files1 == files2 and len(files1) == 3
    for rel in files1:
        assert (out1 / rel).read_bytes() == (out2 / rel).read_bytes()
    s2 = json.loads((out2 / "summary.json").read_text())
    assert s2["jobs"] == 2 and s2["counts"]["failed"] == 3


def test_export_is_deterministic(tmp_path):
    from pipelines.registry import get_pipeline

    folder = make_folder(tmp_path, bad=False)
    pipe = get_pipeline("count")
    inp = next(i for i in pipe.discover(folder) if i.input_id == "b.md")
    a, b = to_json(pipe.run_input(inp)), to_json(pipe.run_input(inp))
    assert a == b
    assert load_result("count", a) == pipe.run_input(inp)


@pytest.mark.parametrize(
    "args, message",
    [
        (["batch", "/definitely/not/here", "-o", "x"], "not a folder"),
        (["batch", ".", "-p", "nosuch", "-o", "x"], "unknown pipeline 'nosuch'"),
        (["schema", "nosuch"], "unknown pipeline"),
        (["batch", "."], "Missing option"),
    ],
)
def test_usage_errors_exit_2(args, message, tmp_path):
    res = run_cli(*args)
    assert res.exit_code == 2
    assert message in (res.stderr or res.output)


def test_folder_without_pipeline_subfolders_is_usage_error(tmp_path):
    (tmp_path / "random").mkdir()
    res = run_cli("batch", str(tmp_path), "-o", str(tmp_path / "o"))
    assert res.exit_code == 2 and "no subfolder named after a pipeline" in res.stderr


def test_subfolder_per_pipeline(tmp_path):
    folder = tmp_path / "samples"
    (folder / "count").mkdir(parents=True)
    (folder / "count" / "x.txt").write_text("one\ntwo\n", encoding="utf-8")
    res = run_cli("batch", str(folder), "-o", str(tmp_path / "o"), "--json")
    assert res.exit_code == 0
    assert json.loads(res.stdout)["pipelines"]["count"]["ok"] == 1
    assert (tmp_path / "o" / "count" / "x.txt.json").exists()


def test_schema_is_json_schema():
    res = run_cli("schema", "count")
    assert res.exit_code == 0
    schema = json.loads(res.stdout)
    assert schema["title"] == "CountResult" and "schema_version" in schema["properties"]


def test_interrupt_keeps_finished_outputs(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(6):
        (folder / f"f{i}.txt").write_text(f"SLOW file {i}\n", encoding="utf-8")
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "batch", str(folder), "-p", "count", "-o", str(out), "-q"],
        env=os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    deadline = time.time() + 60
    while time.time() < deadline and len(list((out / "count").glob("*.json"))) < 2:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    done = sorted((out / "count").glob("*.json"))
    assert 2 <= len(done) < 6
    for p in done:
        assert json.loads(p.read_text())["pipeline"] == "count"  # complete, valid JSON
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["counts"]["ok"] >= 2
    assert summary["counts"]["not_run"] >= 1
    assert not list(out.rglob("*.tmp"))
