"""The batch under failure, with real processes: SIGINT, SIGTERM and SIGKILL sent by pid to a running
`longdoc batch --jobs 2`, a second batch on the same --out, stale temporary files, the umask, and
files the batch must not read (a FIFO, a symlink to /dev/zero, an unpaired contract)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.batch import OutputLock, ignored_files, plan
from app.cli import app
from tests.app.plugins import install_count

N_INPUTS = 30


@pytest.fixture(autouse=True)
def count_pipeline(tmp_path_factory, monkeypatch):
    install_count(tmp_path_factory.mktemp("plugin"), monkeypatch)


def slow_folder(root: Path, n: int = N_INPUTS) -> Path:
    folder = root / "in"
    folder.mkdir()
    for i in range(n):
        (folder / f"f{i:02d}.txt").write_text(f"SLOW file {i}\nline two\n", encoding="utf-8")
    return folder


def start_batch(folder: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", "batch", str(folder), "-p", "count", "-o", str(out), "-q", *extra],
        env=os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def outputs(out: Path) -> list[Path]:
    return sorted((out / "count").glob("*.json")) if (out / "count").is_dir() else []


def wait_for(cond, timeout: float = 90.0, what: str = "condition") -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def children(pid: int) -> list[int]:
    """Processes whose parent is `pid` (workers, the resource tracker), from /proc."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(entry.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def stop_and_check(tmp_path: Path, sig: signal.Signals) -> tuple[dict, float, subprocess.Popen, Path]:
    folder = slow_folder(tmp_path)
    out = tmp_path / "out"
    proc = start_batch(folder, out, "--jobs", "2")
    wait_for(lambda: len(outputs(out)) >= 2, what="two outputs")
    kids = children(proc.pid)
    assert kids, "the batch should have worker processes"
    t0 = time.monotonic()
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    exit_s = time.monotonic() - t0
    wait_for(lambda: not any(alive(k) for k in kids), timeout=5, what="the workers to go")
    time.sleep(1.5)  # anything still writing after the parent left would land now
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return summary, exit_s, proc, out


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stop_signal_ends_the_batch_quickly_and_the_summary_counts_what_was_written(tmp_path, sig, code):
    summary, exit_s, proc, out = stop_and_check(tmp_path, sig)
    assert proc.returncode == code, proc.stderr
    # 1 s of grace for the inputs in flight, then the workers are terminated (limit generous for a loaded CI box)
    assert exit_s < 5.0, f"exit took {exit_s:.1f}s"
    written = outputs(out)
    assert summary["state"] == "interrupted" and summary["interrupted"] is True and summary["signal"] == sig.name
    assert summary["counts"]["ok"] == len(written), (summary["counts"], len(written))
    assert summary["counts"]["not_run"] == N_INPUTS - len(written) > 0
    assert summary["finished_at"] is not None
    for p in written:
        assert json.loads(p.read_text(encoding="utf-8"))["pipeline"] == "count"
    assert not list(out.rglob("*.tmp"))


@pytest.mark.slow
def test_kill_9_leaves_a_summary_that_says_running_and_no_worker(tmp_path):
    folder = slow_folder(tmp_path)
    out = tmp_path / "out"
    proc = start_batch(folder, out, "--jobs", "2")
    wait_for(lambda: len(outputs(out)) >= 3, what="three outputs")
    kids = children(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    wait_for(lambda: not any(alive(k) for k in kids), timeout=5, what="the workers to die with the parent")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["state"] == "running" and summary["pid"] == proc.pid and summary["finished_at"] is None
    assert summary["started_at"]
    written = len(outputs(out))
    # after each finished input: at most the two in flight landed after the last rewrite
    assert written - 2 <= summary["counts"]["ok"] <= written and summary["counts"]["ok"] >= 2

    # a temporary file a killed writer left, then the re-run: cleaned, the killed run named, resumed
    stale = out / "count" / ".f00.txt.json.0123abcd.tmp"
    stale.write_text('{"half": ', encoding="utf-8")
    res = CliRunner().invoke(app, ["batch", str(folder), "-p", "count", "-o", str(out), "--json"], catch_exceptions=False)
    rerun = json.loads(res.stdout)
    # (the killed run may have left its own: a worker or the summary killed mid-write)
    assert not stale.exists() and rerun["stale_temp_files_removed"] >= 1 and not list(out.rglob("*.tmp"))
    assert rerun["previous_run"]["pid"] == proc.pid
    assert rerun["counts"]["skipped"] == written and rerun["counts"]["ok"] == N_INPUTS - written
    assert rerun["state"] == "finished"


def test_a_second_batch_on_the_same_out_refuses_naming_the_other_pid(tmp_path):
    folder = slow_folder(tmp_path, 2)
    out = tmp_path / "out"
    holder = OutputLock(out)
    holder.acquire()
    try:
        res = CliRunner().invoke(app, ["batch", str(folder), "-p", "count", "-o", str(out)])
        assert res.exit_code == 75
        assert str(out) in res.stderr and f"pid {os.getpid()}" in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
        assert not outputs(out)
        # --wait: runs once the holder lets go
        threading.Timer(1.0, holder.release).start()
        t0 = time.monotonic()
        res = CliRunner().invoke(app, ["batch", str(folder), "-p", "count", "-o", str(out), "--wait", "-q"])
        assert res.exit_code == 0, res.output
        assert time.monotonic() - t0 >= 0.9 and "waiting for the batch" in res.stderr
        assert len(outputs(out)) == 2
    finally:
        holder.release()


def test_a_running_batch_holds_the_lock_against_another_process(tmp_path):
    folder = slow_folder(tmp_path, 6)
    out = tmp_path / "out"
    first = start_batch(folder, out)
    try:
        wait_for(lambda: (out / "summary.json").exists(), what="the first batch to start")
        second = start_batch(folder, out)
        _, err = second.communicate(timeout=60)
        assert second.returncode == 75 and f"pid {first.pid}" in err
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_outputs_honour_the_umask(tmp_path, umask, mode):
    folder = slow_folder(tmp_path, 1)
    (folder / "f00.txt").write_text("one\ntwo\n", encoding="utf-8")
    out = tmp_path / "out"
    old = os.umask(umask)
    try:
        res = CliRunner().invoke(app, ["batch", str(folder), "-p", "count", "-o", str(out), "-q"])
    finally:
        os.umask(old)
    assert res.exit_code == 0, res.output
    for p in (out / "count" / "f00.txt.json", out / "summary.json"):
        assert stat.S_IMODE(p.stat().st_mode) == mode, (p.name, oct(p.stat().st_mode))


def test_special_files_are_listed_as_ignored_and_never_opened(tmp_path):
    folder = slow_folder(tmp_path, 1)
    (folder / "f00.txt").write_text("one\n", encoding="utf-8")
    os.mkfifo(folder / "pipe.txt")
    (folder / "zero.txt").symlink_to("/dev/zero")
    out = tmp_path / "out"
    # a subprocess with a timeout: opening the FIFO would hang, reading /dev/zero would not end
    proc = subprocess.run([sys.executable, "-m", "app.cli", "batch", str(folder), "-p", "count", "-o", str(out)],
                          env=os.environ.copy(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    reasons = {i["file"]: i["reason"] for i in summary["ignored_files"]}
    assert "named pipe (FIFO)" in reasons["pipe.txt"] and "not opened" in reasons["pipe.txt"]
    assert "character device behind a symlink" in reasons["zero.txt"]
    assert summary["counts"]["ok"] == 1 and summary["counts"]["failed"] == 0
    assert "ignored pipe.txt: a named pipe (FIFO)" in proc.stderr


@pytest.mark.parametrize("pipeline", ["count", "contracts", "medical"])
def test_a_symlink_loop_is_listed_as_ignored_and_the_batch_goes_on(tmp_path, pipeline):
    """a -> b -> a and self -> self in the folder: each named as a symlink loop, never followed; the
    other inputs are analysed and summary.json is written (it crashed the whole batch before)."""
    folder = slow_folder(tmp_path, 1)
    (folder / "f00.txt").write_text("one\n", encoding="utf-8")
    (folder / "a.txt").symlink_to(folder / "b.txt")
    (folder / "b.txt").symlink_to(folder / "a.txt")
    (folder / "self").symlink_to(folder / "self")
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["batch", str(folder), "-p", pipeline, "-o", str(out), "-q"])
    assert res.exit_code in (0, 1), res.output  # 1: the one plain file is no contract pair / patient note
    assert "Traceback" not in res.output and "RuntimeError" not in res.output
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    reasons = {i["file"]: i["reason"] for i in summary["ignored_files"]}
    for name in ("a.txt", "b.txt", "self"):
        assert reasons[name] == "a symlink loop: not opened", (name, reasons)
    assert "ignored a.txt: a symlink loop" in res.stderr


def test_an_unpaired_contract_is_named_with_the_reason(tmp_path):
    folder = tmp_path / "contracts"
    folder.mkdir()
    (folder / "lease.v1.txt").write_text("1. Rent\nThe rent is 100.\n", encoding="utf-8")
    (folder / "lease.v2.txt").write_text("1. Rent\nThe rent is 120.\n", encoding="utf-8")
    (folder / "nda.v1.txt").write_text("1. Secrets\nKeep them.\n", encoding="utf-8")
    tasks = plan(folder, tmp_path / "out", "contracts")
    assert [t.input.input_id for t in tasks] == ["lease"]
    reasons = {i["file"]: i["reason"] for i in ignored_files(folder, [t.input for t in tasks], "contracts")}
    assert list(reasons) == ["nda.v1.txt"] and reasons["nda.v1.txt"].startswith("no other version to pair with")
    res = CliRunner().invoke(app, ["batch", str(folder), "-p", "contracts", "-o", str(tmp_path / "out"), "-q"])
    assert res.exit_code == 0, res.output
    assert "ignored nda.v1.txt: no other version to pair with" in res.stderr
    assert "1 ignored" in res.stdout
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert summary["ignored_files"][0]["file"] == "nda.v1.txt"


def test_the_html_redline_honours_the_umask(tmp_path):
    a, b = tmp_path / "lease.v1.txt", tmp_path / "lease.v2.txt"
    a.write_text("1. Rent\nThe rent is 100.\n", encoding="utf-8")
    b.write_text("1. Rent\nThe rent is 120.\n", encoding="utf-8")
    old = os.umask(0o022)
    try:
        res = CliRunner().invoke(app, ["contracts", str(a), str(b), "--json", "--html", str(tmp_path / "r.html")])
    finally:
        os.umask(old)
    assert res.exit_code == 0, res.output
    assert stat.S_IMODE((tmp_path / "r.html").stat().st_mode) == 0o644


@pytest.mark.parametrize("stem", ["a" * 240, "b" * 251, "专利" * 41])
def test_input_names_near_the_file_name_limit_get_outputs(tmp_path, stem):
    """Input files named with 244-255 bytes (issue 47: "File name too long" on the output side): the
    output's name is cut with a hash of the whole id, the batch succeeds, summary.json names it."""
    from app.batch import NAME_MAX, output_name

    folder = tmp_path / "in"
    folder.mkdir()
    name = stem + ".txt"
    assert len(name.encode("utf-8")) <= NAME_MAX
    (folder / name).write_text("What is claimed is:\n1. A widget comprising a base and a lid.\n", encoding="utf-8")
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["batch", str(folder), "-p", "patents", "-o", str(out), "-q"])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["counts"]["ok"] == 1 and summary["counts"]["failed"] == 0
    written = list((out / "patents").glob("*.json"))
    assert len(written) == 1 and len(written[0].name.encode("utf-8")) + 14 <= NAME_MAX
    assert json.loads(written[0].read_text(encoding="utf-8"))["pipeline"] == "patents"
    # distinct long ids never share a file; short ones keep their plain name
    assert output_name(stem + "1.txt") != output_name(stem + "2.txt")
    assert output_name("lease.txt") == "lease.txt.json" and output_name("sub/x.txt") == "sub/x.txt.json"


def test_summary_writes_do_not_grow_with_the_number_of_inputs(tmp_path, monkeypatch):
    """2,000 empty inputs (issue 47: 10,000 of them were quadratic, summary.json rewritten after each):
    the summary is written at most once per SUMMARY_EVERY_S while the batch runs, plus the first and
    the last, and the last one counts every input."""
    import app.batch as B

    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(2000):
        (folder / f"e{i:05d}.txt").touch()
    writes = []
    real = B.write_atomic

    def counting(path, *a, **k):
        if Path(path).name == B.SUMMARY_NAME:
            writes.append(time.perf_counter())
        return real(path, *a, **k)

    monkeypatch.setattr(B, "write_atomic", counting)
    t0 = time.perf_counter()
    res = CliRunner().invoke(app, ["batch", str(folder), "-p", "patents", "-o", str(tmp_path / "out"), "-q"])
    elapsed = time.perf_counter() - t0
    assert res.exit_code == 1  # every input fails: the files are empty
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert summary["counts"]["failed"] == 2000 and summary["state"] == "finished"
    assert len(writes) <= elapsed / B.SUMMARY_EVERY_S + 3, (len(writes), elapsed)


def test_worker_events_reach_summary_json(tmp_path):
    """What an executor reports about its workers (a lost Ray actor and its replacement) is in
    summary.json (issue 47: a replaced actor went unrecorded)."""
    from app.batch import LocalExecutor, run_batch

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "p.txt").write_text("What is claimed is:\n1. A widget comprising a base.\n", encoding="utf-8")
    ex = LocalExecutor(1)
    ex.events = [{"event": "worker died", "worker": "pid 7 on host", "inputs": ["p.txt"], "replaced": True}]
    out = tmp_path / "out"
    run_batch(plan(folder, out, "patents"), folder, out, executor=ex)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["worker_events"] == ex.events
