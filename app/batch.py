"""The batch runner: a folder of documents in, one JSON file per input and a summary.json out.

- Inputs come from each pipeline's `discover(folder)`; with no pipeline named, a folder holding
  one subfolder per pipeline (as data/samples/ does) runs each pipeline on its subfolder.
- Each output is written atomically by the worker that made it, as soon as it is made, so an
  interrupted batch (Ctrl-C, kill) loses nothing that had finished; summary.json is rewritten
  atomically as results come in and once more at the end.
- Resumable: an input whose output already holds the same input hash, pipeline version and
  schema version is skipped unless `force`.
- One bad file never stops the batch: its failure and the reason go to summary.json.
- Where the work runs is an `Executor`; `LocalExecutor` runs it inline or in worker processes.
  A cluster executor only needs to implement `Executor.run`.
"""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from app.export import to_json, write_atomic
from pipelines.base import PipelineInput
from pipelines.documents import IngestError
from pipelines.registry import available, get_pipeline

log = logging.getLogger(__name__)
SUMMARY_NAME = "summary.json"


class BatchUsageError(ValueError):
    """The batch cannot start (bad folder, unknown pipeline): exit code 2."""


@dataclass(frozen=True)
class Task:
    pipeline: str
    input: PipelineInput
    output: Path
    force: bool = False


@dataclass
class Outcome:
    input_id: str
    pipeline: str
    status: str  # "ok" | "skipped" | "failed"
    output: str | None = None
    seconds: float = 0.0
    reason: str | None = None
    summary: str | None = None
    traceback: str | None = None
    files: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# The work of one input (runs in a worker process)

_PIPELINE_CACHE: dict = {}


def _pipeline(name: str):
    if name not in _PIPELINE_CACHE:
        _PIPELINE_CACHE[name] = get_pipeline(name)
    return _PIPELINE_CACHE[name]


def _up_to_date(output: Path, input_sha256: str, version: str, schema_version: str) -> bool:
    """An output is up to date when it has the input's hash, the pipeline version and the export's
    schema version (an older export shape is written again)."""
    try:
        head = json.loads(output.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (head.get("input_sha256") == input_sha256 and head.get("pipeline_version") == version
            and head.get("schema_version") == schema_version)


def process_task(task: Task) -> Outcome:
    """Run one input: skip it if up to date, else run the pipeline and write its output atomically."""
    t0 = time.perf_counter()
    files = [p.name for p in task.input.paths]
    out = Outcome(task.input.input_id, task.pipeline, "failed", files=files)
    try:
        pipe = _pipeline(task.pipeline)
        sha = task.input.content_sha256()
        if not task.force and _up_to_date(task.output, sha, pipe.version, pipe.schema_version):
            out.status, out.output = "skipped", str(task.output)
            return out
        result = pipe.run_input(task.input)
        write_atomic(task.output, to_json(result))
        out.status, out.output, out.summary = "ok", str(task.output), pipe.summary_line(result)
    except IngestError as exc:
        out.reason = str(exc)
    except OSError as exc:
        out.reason = f"{task.input.input_id}: {exc.strerror or exc}"
    except Exception as exc:  # a bug in a pipeline must not stop the batch
        out.reason = f"{task.input.input_id}: internal error ({type(exc).__name__}: {str(exc)[:200]})"
        out.traceback = traceback.format_exc(limit=8)
    finally:
        out.seconds = round(time.perf_counter() - t0, 4)
    return out


# ---------------------------------------------------------------------------------------------
# Executors


class Executor(ABC):
    """Where tasks run. `run` yields one Outcome per task, in completion order."""

    @abstractmethod
    def run(self, fn: Callable[[Task], Outcome], tasks: list[Task]) -> Iterator[Outcome]: ...


class LocalExecutor(Executor):
    """Inline for jobs=1, else a pool of `jobs` worker processes (spawned, so no state leaks)."""

    def __init__(self, jobs: int = 1):
        self.jobs = max(1, jobs)

    def run(self, fn: Callable[[Task], Outcome], tasks: list[Task]) -> Iterator[Outcome]:
        if self.jobs == 1 or len(tasks) <= 1:
            for task in tasks:
                yield fn(task)
            return
        pool = ProcessPoolExecutor(max_workers=min(self.jobs, len(tasks)), mp_context=mp.get_context("spawn"))
        pending = {pool.submit(fn, t): t for t in tasks}
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    task = pending.pop(fut)
                    try:
                        yield fut.result()
                    except Exception as exc:  # worker died (killed, out of memory)
                        yield Outcome(task.input.input_id, task.pipeline, "failed", reason=f"{task.input.input_id}: worker failed ({type(exc).__name__}: {exc})")
        finally:
            for fut in pending:
                fut.cancel()
            pool.shutdown(wait=True, cancel_futures=True)


# ---------------------------------------------------------------------------------------------
# Planning and running a batch


def output_path(out_dir: Path, pipeline: str, inp: PipelineInput) -> Path:
    return out_dir / pipeline / f"{inp.input_id}.json"


def plan(folder: Path, out_dir: Path, pipeline: str | None = None, force: bool = False) -> list[Task]:
    """The tasks of a batch. Raises BatchUsageError when the folder or pipeline is wrong."""
    folder = Path(folder)
    if not folder.is_dir():
        raise BatchUsageError(f"{folder}: not a folder")
    if pipeline is not None:
        if pipeline not in available():
            raise BatchUsageError(f"unknown pipeline {pipeline!r}; available: {', '.join(available())}")
        pairs = [(pipeline, folder)]
    else:
        pairs = [(name, folder / name) for name in available() if (folder / name).is_dir()]
        if not pairs:
            raise BatchUsageError(
                f"{folder}: no subfolder named after a pipeline ({', '.join(available())}); pass --pipeline NAME"
            )
    tasks = []
    for name, sub in pairs:
        pipe = get_pipeline(name)
        for inp in pipe.discover(sub):
            tasks.append(Task(name, inp, output_path(out_dir, name, inp), force))
    return tasks


def ignored_files(folder: Path, tasks: list[Task]) -> list[str]:
    """Files under `folder` that no task reads (unsupported types, notes), for the summary."""
    used = {p.resolve() for t in tasks for p in t.input.paths}
    out = []
    for path in sorted(Path(folder).rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and path.resolve() not in used and not any(part.startswith(".") for part in rel.parts):
            out.append(rel.as_posix())
    return out


@dataclass
class BatchReport:
    folder: str
    out_dir: str
    jobs: int
    started_at: str
    outcomes: list[Outcome] = field(default_factory=list)
    total: int = 0
    interrupted: bool = False
    ignored: list[str] = field(default_factory=list)
    finished_at: str | None = None
    elapsed_s: float = 0.0

    def counts(self) -> dict[str, int]:
        c = {"total": self.total, "ok": 0, "skipped": 0, "failed": 0}
        for o in self.outcomes:
            c[o.status] += 1
        c["not_run"] = self.total - len(self.outcomes)
        return c

    def to_dict(self) -> dict:
        per: dict[str, dict[str, int]] = {}
        for o in self.outcomes:
            d = per.setdefault(o.pipeline, {"ok": 0, "skipped": 0, "failed": 0})
            d[o.status] += 1
        outcomes = sorted(self.outcomes, key=lambda o: (o.pipeline, o.input_id))
        return {
            "folder": self.folder,
            "out_dir": self.out_dir,
            "jobs": self.jobs,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "elapsed_s": round(self.elapsed_s, 3),
            "interrupted": self.interrupted,
            "counts": self.counts(),
            "pipelines": dict(sorted(per.items())),
            "timings": {
                "total_input_seconds": round(sum(o.seconds for o in self.outcomes), 3),
                "slowest": [
                    {"input": o.input_id, "pipeline": o.pipeline, "seconds": o.seconds}
                    for o in sorted(self.outcomes, key=lambda o: -o.seconds)[:5]
                ],
            },
            "failures": [
                {"input": o.input_id, "pipeline": o.pipeline, "files": o.files, "reason": o.reason}
                | ({"traceback": o.traceback} if o.traceback else {})
                for o in outcomes
                if o.status == "failed"
            ],
            "ignored_files": self.ignored,
            "inputs": [
                {k: v for k, v in asdict(o).items() if k not in ("traceback", "files") and v is not None}
                for o in outcomes
            ],
        }

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if any(o.status == "failed" for o in self.outcomes) else 0


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_batch(
    tasks: list[Task],
    folder: Path,
    out_dir: Path,
    executor: Executor | None = None,
    jobs: int = 1,
    on_outcome: Callable[[Outcome], None] | None = None,
) -> BatchReport:
    """Run the tasks, keeping summary.json current; Ctrl-C stops cleanly with what finished kept."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    executor = executor or LocalExecutor(jobs)
    report = BatchReport(str(folder), str(out_dir), jobs, _now(), total=len(tasks), ignored=ignored_files(folder, tasks))
    t0 = time.perf_counter()
    last_write = 0.0

    def save() -> None:
        report.elapsed_s = time.perf_counter() - t0
        write_atomic(out_dir / SUMMARY_NAME, json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n")

    try:
        for outcome in executor.run(process_task, tasks):
            report.outcomes.append(outcome)
            if on_outcome:
                on_outcome(outcome)
            if time.perf_counter() - last_write > 1.0:
                save()
                last_write = time.perf_counter()
    except KeyboardInterrupt:
        report.interrupted = True
    report.finished_at = _now()
    save()
    return report
