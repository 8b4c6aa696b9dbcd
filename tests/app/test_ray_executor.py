"""The batch on Ray (app/ray_executor.py) with a real local Ray cluster (`ray.init(num_cpus=2)`, started
once for the module), no mocks: the same folder gives byte-identical outputs through LocalExecutor and
RayExecutor; an actor killed by pid mid-task loses nothing and its output is written once; a task whose
actor dies twice is one failed row and the batch finishes; SIGINT to a `longdoc batch --executor ray`
stops it with summary.json counting what was written and no Ray process left behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (the optional extra: pip install 'longdoc[ray]')")

from app.batch import (  # noqa: E402
    BATCH_WORK,
    LocalExecutor,
    TaskWork,
    compute_task,
    plan,
    run_batch,
    write_computed,
)
from app.ray_executor import RayExecutor  # noqa: E402
from tests.app.plugins import COUNT, install_plugin  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def ray_cluster(tmp_path_factory):
    """The `count` test pipeline plugged in (on the path of this process and of Ray's workers, which
    take the environment Ray starts with), then one local Ray instance of 2 CPUs for the module."""
    mp = pytest.MonkeyPatch()
    install_plugin(tmp_path_factory.mktemp("plugin") / "site", mp, COUNT)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
             object_store_memory=200 * 1024 * 1024)
    try:
        yield
    finally:
        ray.shutdown()
        mp.undo()


def files_of(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*.json"))
            if p.name != "summary.json"}


def count_folder(root: Path, n: int, text: str = "SLOW file {i}\nline two\n") -> Path:
    folder = root / "in"
    folder.mkdir()
    for i in range(n):
        (folder / f"f{i:02d}.txt").write_text(text.format(i=i), encoding="utf-8")
    return folder


def counting_work() -> tuple[TaskWork, Counter]:
    """BATCH_WORK whose driver-side write counts the writes per input."""
    writes: Counter = Counter()

    def write(task, computed):
        writes[task.input.input_id] += 1
        return write_computed(task, computed)

    return TaskWork(compute=BATCH_WORK.compute, check=BATCH_WORK.check, write=write), writes


def test_samples_give_byte_identical_outputs_local_and_ray(tmp_path):
    folder = tmp_path / "samples"
    for name in ("patents", "contracts"):
        shutil.copytree(ROOT / "data" / "samples" / name, folder / name)
    local, on_ray = tmp_path / "local", tmp_path / "ray"
    a = run_batch(plan(folder, local), folder, local, executor=LocalExecutor(1))
    b = run_batch(plan(folder, on_ray), folder, on_ray, executor=RayExecutor(2))
    assert a.counts() == b.counts() and a.counts()["ok"] >= 8 and a.counts()["failed"] == 0, a.counts()
    ours, theirs = files_of(local), files_of(on_ray)
    assert len(ours) == a.counts()["ok"] and ours.keys() == theirs.keys()
    assert [k for k in ours if ours[k] != theirs[k]] == []
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (local, on_ray))
    assert sa["counts"] == sb["counts"] and sb["state"] == "finished"
    assert [i["input_id"] for i in sa["inputs"]] == [i["input_id"] for i in sb["inputs"]]
    # resuming on Ray: the driver's up-to-date check skips everything and nothing is written again
    mtimes = {p: p.stat().st_mtime_ns for p in on_ray.rglob("*.json") if p.name != "summary.json"}
    c = run_batch(plan(folder, on_ray), folder, on_ray, executor=RayExecutor(2))
    assert c.counts()["skipped"] == a.counts()["ok"] and c.counts()["ok"] == 0
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes


@pytest.mark.parametrize("group", [1, 2])
def test_an_actor_killed_mid_task_loses_nothing_and_its_output_is_written_once(tmp_path, group):
    folder = count_folder(tmp_path, 8)  # each input sleeps 1 s in the count pipeline
    out = tmp_path / "out"
    tasks = plan(folder, out, "count")
    ex = RayExecutor(2, group=group)  # group 2: an actor holds two inputs, both run again
    work, writes = counting_work()
    outcomes: list = []
    runner = threading.Thread(target=lambda: outcomes.extend(ex.run(work, tasks)))
    runner.start()
    killed, seen = None, {}
    deadline = time.monotonic() + 60
    while killed is None and time.monotonic() < deadline and runner.is_alive():
        for input_id, pid in ex.pids().items():
            if pid is not None and input_id not in seen:
                seen[input_id] = time.monotonic()
            # mid-task: 0.3 s after it was handed over, well before its 1 s sleep ends
            if pid is not None and input_id in seen and time.monotonic() - seen[input_id] > 0.3 and len(seen) > 2:
                held = sorted(i for i, p in ex.pids().items() if p == pid)
                os.kill(pid, signal.SIGKILL)
                killed = (held, pid)
                break
        time.sleep(0.01)
    runner.join(timeout=90)
    assert killed is not None, "no task in flight to kill"
    assert not runner.is_alive()
    assert sorted(o.input_id for o in outcomes) == [t.input.input_id for t in tasks]
    assert {o.status for o in outcomes} == {"ok"}
    assert ex.deaths == 1
    (event,) = ex.events  # what summary.json records (issue 47: the replacement went unrecorded)
    assert event["event"] == "worker died" and f"pid {killed[1]} " in event["worker"] + " "
    assert sorted(event["inputs"]) == killed[0] and event["replaced"] is True
    assert event["then"] == "run again on another worker"
    again = [o for o in outcomes if o.note]
    assert len(killed[0]) == group and sorted(o.input_id for o in again) == killed[0]
    assert all(f"pid {killed[1]} " in o.note for o in again)
    assert writes == Counter({t.input.input_id: 1 for t in tasks})
    assert sorted(p.name for p in (out / "count").glob("*.json")) == [f"f{i:02d}.txt.json" for i in range(8)]
    assert all(json.loads(p.read_text())["lines"] for p in (out / "count").glob("*.json"))


def compute_or_die(task):
    """The batch's compute, except that an input holding DIE kills the process computing it."""
    if "DIE" in task.input.paths[0].read_text(encoding="utf-8"):
        os._exit(3)
    return compute_task(task)


def test_a_task_whose_actor_dies_twice_is_one_failed_row(tmp_path):
    folder = count_folder(tmp_path, 4, "file {i}\nline two\n")
    (folder / "die.txt").write_text("DIE here\n", encoding="utf-8")
    out = tmp_path / "out"
    ex = RayExecutor(2)
    t0 = time.monotonic()
    report = run_batch(plan(folder, out, "count"), folder, out, executor=ex,
                       work=TaskWork(compute=compute_or_die))
    assert time.monotonic() - t0 < 60
    summary = json.loads((out / "summary.json").read_text())
    assert summary["state"] == "finished" and report.exit_code == 1
    assert summary["counts"] == {"total": 5, "ok": 4, "skipped": 0, "failed": 1, "not_run": 0}
    [failure] = summary["failures"]
    assert failure["input"] == "die.txt" and "died on each of its 2 attempts" in failure["reason"]
    assert "\n" not in failure["reason"]
    assert ex.deaths == 2
    assert not (out / "count" / "die.txt.json").exists()


def descendants(pid: int) -> set[int]:
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(entry.name))
    out, todo = set(), [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.add(k)
            todo.append(k)
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_sigint_stops_a_ray_batch_and_the_summary_counts_what_was_written(tmp_path):
    folder = count_folder(tmp_path, 30)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "batch", str(folder), "-p", "count", "-o", str(out), "-q",
                             "--executor", "ray", "--jobs", "2"], env=os.environ.copy(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(list((out / "count").glob("*.json")) if (out / "count").is_dir() else []) < 2:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the Ray batch wrote nothing in 60 s"
            time.sleep(0.05)
        ray_procs = descendants(proc.pid)
        assert ray_procs, "no Ray process under the driver"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
        stopped_in = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert stopped_in < 15, stopped_in
    summary = json.loads((out / "summary.json").read_text())
    written = sorted(p.name for p in (out / "count").glob("*.json"))
    assert summary["state"] == "interrupted" and summary["signal"] == "SIGINT"
    assert summary["counts"]["ok"] == len(written) and summary["counts"]["not_run"] == 30 - len(written)
    assert 2 <= len(written) < 30
    assert sorted(i["input_id"] + ".json" for i in summary["inputs"] if i["status"] == "ok") == written
    assert not list(out.rglob("*.tmp"))
    deadline = time.monotonic() + 10
    while [p for p in ray_procs if alive(p)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p for p in ray_procs if alive(p)] == []


def test_executor_flags_are_checked_before_anything_runs(tmp_path):
    from typer.testing import CliRunner

    from app.cli import app

    folder = count_folder(tmp_path, 1)
    for extra, line in ((["--address", "auto"], "--address is for --executor ray"),
                        (["--executor", "dask"], "--executor must be local or ray")):
        res = CliRunner().invoke(app, ["batch", str(folder), "-p", "count", "-o", str(tmp_path / "out"), *extra])
        assert res.exit_code == 2 and line in res.output, res.output
    assert not (tmp_path / "out" / "summary.json").exists()
