"""LocalExecutor's workers share the CPUs out: each of `jobs` worker processes runs torch on
cpus // jobs threads (at least one), so two workers on two cores do not run four threads between
them; a user's own OMP_NUM_THREADS is kept."""

from pathlib import Path

import pytest

from app.batch import LocalExecutor, Outcome, Task, usable_cpus, worker_threads
from pipelines.base import PipelineInput


def report_threads(task: Task) -> Outcome:
    import torch

    return Outcome(task.input.input_id, task.pipeline, "ok", reason=str(torch.get_num_threads()))


def _tasks(n: int) -> list[Task]:
    return [Task("count", PipelineInput(f"in{i}", (Path(f"in{i}.txt"),)), Path("out")) for i in range(n)]


def test_worker_threads_share_the_cpus(monkeypatch):
    monkeypatch.setattr("app.batch.usable_cpus", lambda: 8)
    assert [worker_threads(j) for j in (1, 2, 3, 8, 16)] == [8, 4, 2, 1, 1]


def test_each_worker_runs_its_share_of_threads(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    jobs = 2
    outs = list(LocalExecutor(jobs).run(report_threads, _tasks(4)))
    # on two CPUs 1 each, where a fresh process's torch would take 2 (on one CPU both are 1)
    assert {o.reason for o in outs} == {str(worker_threads(jobs))}


@pytest.mark.skipif(usable_cpus() < 2, reason="needs two CPUs (torch caps its threads at the cores)")
def test_a_users_omp_num_threads_is_kept(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # two workers would otherwise get cpus // 2 each
    outs = list(LocalExecutor(usable_cpus()).run(report_threads, _tasks(2)))
    assert {o.reason for o in outs} == {"2"}
