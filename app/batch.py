"""The batch runner: a folder of documents in, one JSON file per input and a summary.json out.

- Inputs come from each pipeline's `discover(folder)`; with no pipeline named, a folder holding
  one subfolder per pipeline (as data/samples/ does) runs each pipeline on its subfolder.
- Each output is written atomically as soon as it is made (by the local worker that made it, or
  by the driver for a cluster executor), so an interrupted batch (Ctrl-C, SIGTERM, kill -9) loses
  nothing that had finished.
- summary.json is rewritten atomically after every finished input: while the run goes it says
  `"state": "running"` with the pid, `started_at` and the counts so far, so after a kill -9 it is
  not stale; at the end `"finished"` or `"interrupted"`. An output that landed on disk during the
  run is counted `ok` even when its worker was stopped before it could report.
- Resumable: an input whose output already holds the same input hash, pipeline version and
  schema version is skipped unless `force`.
- One bad file never stops the batch: its failure and the reason go to summary.json. Files the
  batch does not read are listed under `ignored_files` with the reason (unsupported type, a
  contract version with no other version to pair with, a FIFO or socket — never opened).
- One batch at a time per output folder: `run_batch` holds an exclusive lock (`.longdoc-batch.lock`
  in the folder, fcntl), refuses a second run with one line naming the folder and the other
  run's pid (`BatchBusyError`), or waits for it (`wait=True`). Holding the lock, it removes the
  temporary files a killed writer left there.
- Signals: SIGINT and SIGTERM stop the batch the same way: no new input is started, the inputs in
  flight get about a second to finish, then their workers are terminated (the parent exits within
  a couple of seconds, no worker left behind); the exit code is 128 + the signal (130, 143).
  Workers ignore SIGINT (a Ctrl-C in a terminal reaches the whole process group; the parent
  decides) and, on Linux, die with the parent (PR_SET_PDEATHSIG), so a kill -9 orphans nothing.
- Where the work runs is an `Executor`; `LocalExecutor` runs it inline or in worker processes,
  `app.ray_executor.RayExecutor` on Ray actors (optional extra `longdoc[ray]`). One input's work
  is a `TaskWork` in three parts: `check_task` (up to date?), `compute_task` (the pipeline run and
  its export text, writing nothing) and `write_computed` (the atomic write). A local worker runs
  all three; Ray actors only compute, and the driver checks and writes with the same functions,
  so resuming, atomic writes and the summary are one code path.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing as mp
import os
import signal
import stat
import sys
import threading
import time
import traceback
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from multiprocessing.connection import wait as wait_connections
from pathlib import Path

from app.export import remove_stale_temps, to_json, write_atomic
from pipelines.base import PipelineInput
from pipelines.documents import IngestError
from pipelines.documents.ingest import SUPPORTED_SUFFIXES
from pipelines.llm import EngineSettings, LLMRun
from pipelines.registry import available, get_pipeline

log = logging.getLogger(__name__)
SUMMARY_NAME = "summary.json"
SUMMARY_EVERY_S = 1.0  # summary.json is at most this far behind the finished inputs while a batch runs
LOCK_NAME = ".longdoc-batch.lock"
GRACE_S = 1.0  # how long inputs in flight may still finish after a stop signal


class BatchUsageError(ValueError):
    """The batch cannot start (bad folder, unknown pipeline): exit code 2."""


class BatchBusyError(RuntimeError):
    """Another batch holds the output folder's lock."""


@dataclass(frozen=True)
class LLMConfig:
    """The LLM side of a batch (`--llm`, the engine settings, `--llm-budget`): each worker builds an
    LLMRun per input from it, on the one engine the worker loads (pipelines.llm.get_engine)."""

    mode: str = "off"
    settings: EngineSettings = field(default_factory=EngineSettings)
    budget_s: float | None = None

    def key(self) -> tuple[str, str | None]:
        """What an output must have been written with to be up to date: mode and model line."""
        return ("off", None) if self.mode == "off" else (self.mode, self.settings.describe())


@dataclass(frozen=True)
class Task:
    pipeline: str
    input: PipelineInput
    output: Path
    force: bool = False
    llm: LLMConfig = field(default_factory=LLMConfig)
    questions: tuple[str, ...] = ()  # a review table's row: "name\tquestion" each (app/review.py)


@dataclass
class Outcome:
    input_id: str
    pipeline: str
    status: str  # "ok" | "skipped" | "failed"
    output: str | None = None
    seconds: float = 0.0
    reason: str | None = None
    summary: str | None = None
    note: str | None = None
    traceback: str | None = None
    files: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# The work of one input (runs in a worker process)

_PIPELINE_CACHE: dict = {}


def _pipeline(name: str):
    if name not in _PIPELINE_CACHE:
        _PIPELINE_CACHE[name] = get_pipeline(name)
    return _PIPELINE_CACHE[name]


def _up_to_date(output: Path, input_sha256: str, version: str, schema_version: str,
                llm: tuple[str, str | None] = ("off", None)) -> bool:
    """An output is up to date when it has the input's hash, the pipeline version, the export's
    schema version (an older export shape is written again) and the same LLM mode and model."""
    try:
        head = json.loads(output.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(head, dict):
        return False
    report = head.get("llm")
    written = (report.get("mode"), report.get("model")) if isinstance(report, dict) else ("off", None)
    return (head.get("input_sha256") == input_sha256 and head.get("pipeline_version") == version
            and head.get("schema_version") == schema_version and written == tuple(llm))


@dataclass
class Computed:
    """What computing one input gives, before anything is written: the outcome so far (status "ok"
    with no output yet, or "skipped" / "failed" with the reason) and the export text to write for an
    "ok". A cluster worker returns it to the driver, which writes it (`write_computed`)."""

    outcome: Outcome
    text: str | None = None


def _failed(task: Task, out: Outcome, exc: Exception) -> Outcome:
    """Fill `out` as the input's failure: one line naming the input (a traceback for a bug)."""
    out.status = "failed"
    if isinstance(exc, IngestError):
        out.reason = str(exc)
    elif isinstance(exc, OSError):
        out.reason = f"{task.input.input_id}: {exc.strerror or exc}"
    else:  # a bug in a pipeline must not stop the batch
        out.reason = f"{task.input.input_id}: internal error ({type(exc).__name__}: {str(exc)[:200]})"
        out.traceback = traceback.format_exc(limit=8)
    return out


def check_task(task: Task) -> Outcome | None:
    """The up-to-date check: a "skipped" outcome when the task's output already holds this input's
    hash, the pipeline and schema versions and the LLM mode and model (and not `force`); a "failed"
    one when the input cannot be read to tell; else None (compute it)."""
    if task.questions:  # a review table's row: its own up-to-date check (per cell)
        from app.review import check_review

        return check_review(task)
    out = Outcome(task.input.input_id, task.pipeline, "skipped", files=[p.name for p in task.input.paths])
    try:
        pipe = _pipeline(task.pipeline)
        sha = task.input.content_sha256()
        if task.force or not _up_to_date(task.output, sha, pipe.version, pipe.schema_version, task.llm.key()):
            return None
    except Exception as exc:  # noqa: BLE001 - reported as the input's failure
        return _failed(task, out, exc)
    out.output = str(task.output)
    return out


def compute_task(task: Task) -> Computed:
    """Run one input's pipeline and make its export text; writes nothing (so it may run on another
    machine). A bad input or a pipeline's bug is a "failed" outcome with the reason, never raised."""
    if task.questions:  # a review table's row: the questions' cells instead of the pipeline's export
        from app.review import compute_review

        return compute_review(task)
    t0 = time.perf_counter()
    out = Outcome(task.input.input_id, task.pipeline, "failed", files=[p.name for p in task.input.paths])
    text = None
    try:
        pipe = _pipeline(task.pipeline)
        run = None
        if task.llm.mode != "off":  # the worker's one engine, loaded by the first step that runs
            run = LLMRun(task.llm.mode, task.llm.settings, budget_s=task.llm.budget_s)
        result = pipe.run_input(task.input, llm=run)
        text = to_json(result)
        out.status, out.summary = "ok", pipe.summary_line(result)
    except Exception as exc:  # noqa: BLE001 - a bad input or a pipeline's bug is the input's failure
        _failed(task, out, exc)
        text = None
    finally:
        out.seconds = round(time.perf_counter() - t0, 4)
    return Computed(out, text)


def write_computed(task: Task, computed: Computed) -> Outcome:
    """Write a computed input's text atomically to the task's output (the driver's part), whatever
    its status (a pipeline's failure has no text; a review row that failed has one, with its
    errors); a failure to write is the input's failure."""
    out = computed.outcome
    if computed.text is None:
        return out
    t0 = time.perf_counter()
    try:
        write_atomic(task.output, computed.text)
        out.output = str(task.output)
    except OSError as exc:
        out.status, out.summary = "failed", None
        out.reason = f"{task.input.input_id}: {exc.strerror or exc}"
    out.seconds = round(out.seconds + time.perf_counter() - t0, 4)
    return out


def compute_tasks(tasks: list[Task]) -> list[Computed]:
    """Compute several inputs (a worker's group): review rows together, their questions in one
    engine batch (app.review.compute_reviews), the others one by one. One Computed per task."""
    out: list[Computed | None] = [None] * len(tasks)
    rows = [n for n, t in enumerate(tasks) if t.questions]
    if rows:
        from app.review import compute_reviews

        for n, c in zip(rows, compute_reviews([tasks[n] for n in rows]), strict=True):
            out[n] = c
    return [c if c is not None else compute_task(t) for t, c in zip(tasks, out, strict=True)]


def process_task(task: Task) -> Outcome:
    """Run one input: skip it if up to date, else run the pipeline and write its output atomically."""
    return BATCH_WORK(task)


@dataclass(frozen=True)
class TaskWork:
    """One input's work in three parts, so an executor may run them in different places: `check`
    (the up-to-date check) and `write` where the output folder is (the driver), `compute` anywhere
    (a worker process, a Ray actor on another machine). Called as a whole it is `process_task`.
    `compute_many` computes a group of inputs handed to one worker together (None: one by one with
    `compute`); `many` is the whole work of such a group."""

    check: Callable[[Task], Outcome | None] = check_task
    compute: Callable[[Task], Computed] = compute_task
    write: Callable[[Task, Computed], Outcome] = write_computed
    compute_many: Callable[[list[Task]], list[Computed]] | None = None

    def __call__(self, task: Task) -> Outcome:
        t0 = time.perf_counter()
        done = self.check(task)
        if done is None:
            done = self.write(task, self.compute(task))
        done.seconds = round(time.perf_counter() - t0, 4)
        return done

    def computed(self, tasks: list[Task]) -> list[Computed]:
        if self.compute_many is None or len(tasks) == 1:
            return [self.compute(t) for t in tasks]
        return self.compute_many(tasks)

    def many(self, tasks: list[Task]) -> list[Outcome]:
        """Check each input, compute the ones not up to date together, write each: one Outcome per task."""
        outcomes: list[Outcome | None] = [self.check(t) for t in tasks]
        todo = [n for n, o in enumerate(outcomes) if o is None]
        if todo:
            for n, c in zip(todo, self.computed([tasks[n] for n in todo]), strict=True):
                outcomes[n] = self.write(tasks[n], c)
        return outcomes  # type: ignore[return-value]


BATCH_WORK = TaskWork(compute_many=compute_tasks)


def run_group(fn: Callable[[Task], Outcome], tasks: list[Task]) -> list[Outcome]:
    """`fn` over a group of tasks: together when it is a TaskWork, else one by one."""
    if isinstance(fn, TaskWork):
        return fn.many(tasks)
    return [fn(t) for t in tasks]


def group_size(group: int, left: int, workers: int) -> int:
    """How many inputs to hand one worker: at most `group`, and no more than an even share of the
    `left` inputs over the `workers`, so a short batch still spreads over every worker."""
    return max(1, min(group, -(-left // max(1, workers))))


# ---------------------------------------------------------------------------------------------
# Executors


class Executor(ABC):
    """Where tasks run. `run` yields one Outcome per task, in completion order. `fn` is the work of
    one input: the batch passes `BATCH_WORK`, a `TaskWork` that is callable as a whole (what a local
    worker runs: check, compute and write) and whose parts a cluster executor runs apart (compute on
    its workers, check and write in the driver). An executor's `group` is how many inputs it hands
    a worker at once (`TaskWork.many`: a review table's rows then share one engine batch). When a
    KeyboardInterrupt reaches `run` (raised inside it, or thrown in at a yield), it starts no new
    task, may still yield the outcomes of tasks in flight, and re-raises it once its workers are
    gone."""

    group: int = 1
    events: tuple = ()  # what happened to the workers (a Ray executor's lost actors, replaced or not), for summary.json

    @abstractmethod
    def run(self, fn: Callable[[Task], Outcome], tasks: list[Task]) -> Iterator[Outcome]: ...


def _die_with_parent(parent_pid: int) -> None:
    """Linux: have the kernel send SIGTERM to this process when its parent dies (even by kill -9)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the closed pipe still ends the worker
        pass
    if os.getppid() != parent_pid:  # the parent died before prctl
        os._exit(1)


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity where the OS tells it, else the count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def worker_threads(jobs: int) -> int:
    """Torch threads for each of `jobs` worker processes: the usable CPUs shared out, at least one.
    Each worker's torch would otherwise take every core, `jobs` times over (2 workers on 2 cores:
    4 threads, and torch's waiting threads turn small operations into milliseconds)."""
    return max(1, usable_cpus() // max(1, jobs))


def _set_threads(n: int) -> None:
    """Run this process's torch on `n` threads, unless the user set OMP_NUM_THREADS themselves (an
    environment variable torch reads at import; set here for a torch imported later)."""
    if os.environ.get("OMP_NUM_THREADS"):
        return
    os.environ["OMP_NUM_THREADS"] = str(n)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(n)


def _worker_main(conn, fn: Callable[[Task], Outcome], parent_pid: int, threads: int | None = None) -> None:
    """A worker process: run the groups of tasks the parent sends, one group at a time, until it
    sends None or goes away; its torch on `threads` threads (None: torch's default)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent(parent_pid)
    if threads is not None:
        _set_threads(threads)
    while True:
        try:
            tasks = conn.recv()
        except (EOFError, OSError):
            return
        if tasks is None:
            return
        try:
            outcomes = run_group(fn, tasks)
        except BaseException as exc:  # noqa: BLE001 - reported, never raised into the pipe
            outcomes = [Outcome(t.input.input_id, t.pipeline, "failed",
                                reason=f"{t.input.input_id}: worker error ({type(exc).__name__}: {exc})")
                        for t in tasks]
        try:
            conn.send(outcomes)
        except (BrokenPipeError, OSError):
            return


class LocalExecutor(Executor):
    """Inline for jobs=1, else `jobs` worker processes (spawned, so no state leaks), each with its
    share of the CPUs as torch threads (`worker_threads`). The parent hands each worker one group
    of tasks at a time (`group` inputs at most, `group_size`), so stopping means sending no more:
    nothing is queued inside a worker."""

    def __init__(self, jobs: int = 1, grace_s: float = GRACE_S, group: int = 1):
        self.jobs = max(1, jobs)
        self.grace_s = grace_s
        self.group = max(1, group)

    def run(self, fn: Callable[[Task], Outcome], tasks: list[Task]) -> Iterator[Outcome]:
        if self.jobs == 1 or len(tasks) <= 1:
            queue = deque(tasks)
            while queue:
                n = group_size(self.group, len(queue), 1)
                yield from run_group(fn, [queue.popleft() for _ in range(n)])
            return
        ctx = mp.get_context("spawn")
        queue = deque(tasks)
        procs: dict = {}  # parent end of the pipe -> process
        busy: dict = {}  # parent end -> the group of tasks in flight
        pending: deque[Outcome] = deque()  # outcomes of a finished group not yet yielded

        def start_worker() -> None:
            parent_end, child_end = ctx.Pipe()
            proc = ctx.Process(target=_worker_main, args=(child_end, fn, os.getpid(), worker_threads(self.jobs)),
                               daemon=True, name="longdoc-batch-worker")
            proc.start()
            child_end.close()
            procs[parent_end] = proc
            feed(parent_end)

        def feed(conn) -> None:
            if queue:
                n = group_size(self.group, len(queue), self.jobs)
                group = [queue.popleft() for _ in range(n)]
                busy[conn] = group
                conn.send(group)
            else:
                with contextlib.suppress(OSError):
                    conn.send(None)

        def receive(conn) -> list[Outcome]:
            group = busy.pop(conn)
            try:
                return conn.recv()
            except (EOFError, OSError):  # the worker died (killed, out of memory)
                proc = procs.pop(conn)
                conn.close()
                proc.join(timeout=1)
                return [Outcome(t.input.input_id, t.pipeline, "failed", files=[p.name for p in t.input.paths],
                                reason=f"{t.input.input_id}: worker died (exit code {proc.exitcode})")
                        for t in group]

        try:
            try:
                for _ in range(min(self.jobs, len(tasks))):
                    if queue:
                        start_worker()
                while busy:
                    for conn in wait_connections(list(busy)):
                        outcomes = receive(conn)
                        if conn in procs:
                            feed(conn)
                        elif queue:  # replace a dead worker
                            start_worker()
                        pending.extend(outcomes)
                        while pending:
                            yield pending.popleft()
            except KeyboardInterrupt:
                queue.clear()  # no new input from now on
                while pending:
                    yield pending.popleft()
                deadline = time.monotonic() + self.grace_s
                while busy and (left := deadline - time.monotonic()) > 0:
                    for conn in wait_connections(list(busy), timeout=left):
                        outcomes = receive(conn)
                        if conn in procs:  # a worker that died now was most likely stopped by the same signal
                            yield from outcomes
                raise
        finally:
            self._stop(procs)

    @staticmethod
    def _stop(procs: dict) -> None:
        """End every worker: idle ones were told to stop; busy ones are terminated, then killed."""
        for conn, proc in procs.items():
            with contextlib.suppress(OSError):
                conn.send(None)
            if proc.is_alive():
                proc.terminate()
        deadline = time.monotonic() + 2.0
        for proc in procs.values():
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=1)
        for conn in procs:
            conn.close()


# ---------------------------------------------------------------------------------------------
# Planning a batch and what it leaves out


NAME_MAX = 255  # bytes of one file name on the common file systems (ext4, APFS, NTFS in UTF-16 units)
_TEMP_EXTRA = 14  # export's temporary name adds ".", "." and 8 hex and ".tmp"


def output_name(input_id: str, suffix: str = ".json") -> str:
    """The relative file path for an input's output: `input_id` + suffix, except that a path part
    that would pass `NAME_MAX` bytes (the last one with the temporary name written first) is cut at
    a character boundary and ends in "~" and 12 hex digits of the SHA-256 of the whole id, so that
    two long names never meet (summary.json maps each input to its file)."""
    import hashlib

    *dirs, last = input_id.split("/")
    tag = "~" + hashlib.sha256(input_id.encode("utf-8")).hexdigest()[:12]

    def fit(part: str, extra: int) -> str:
        if len(part.encode("utf-8")) + extra <= NAME_MAX:
            return part
        room = NAME_MAX - extra - len(tag)
        return part.encode("utf-8")[:room].decode("utf-8", errors="ignore") + tag

    return "/".join([*(fit(d, 0) for d in dirs), fit(last, len(suffix.encode("utf-8")) + _TEMP_EXTRA) + suffix])


def output_path(out_dir: Path, pipeline: str, inp: PipelineInput) -> Path:
    return out_dir / pipeline / output_name(inp.input_id)


def _pipeline_folders(folder: Path, pipeline: str | None) -> list[tuple[str, Path]]:
    if pipeline is not None:
        if pipeline not in available():
            raise BatchUsageError(f"unknown pipeline {pipeline!r}; available: {', '.join(available())}")
        return [(pipeline, folder)]
    pairs = [(name, folder / name) for name in available() if (folder / name).is_dir()]
    if not pairs:
        raise BatchUsageError(
            f"{folder}: no subfolder named after a pipeline ({', '.join(available())}); pass --pipeline NAME"
        )
    return pairs


def plan(folder: Path, out_dir: Path, pipeline: str | None = None, force: bool = False,
         llm: LLMConfig | None = None) -> list[Task]:
    """The tasks of a batch. Raises BatchUsageError when the folder or pipeline is wrong."""
    llm = llm or LLMConfig()
    folder = Path(folder)
    if not folder.is_dir():
        raise BatchUsageError(f"{folder}: not a folder")
    tasks = []
    for name, sub in _pipeline_folders(folder, pipeline):
        pipe = get_pipeline(name)
        for inp in pipe.discover(sub):
            tasks.append(Task(name, inp, output_path(out_dir, name, inp), force, llm))
    return tasks


_SPECIAL = [(stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
            (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")]
_NOTES = ("PROVENANCE", "README", "LICENSE")


def _resolved(path: Path) -> Path | None:
    """`path` with its symlinks resolved, None for a symlink loop."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):  # Python 3.11 raises RuntimeError("Symlink loop"), 3.13 OSError(ELOOP)
        return None


def _special_kind(path: Path) -> str | None:
    """What a non-regular file is (stat only: nothing is opened), or None for a regular file."""
    try:
        st = path.stat()  # follows a symlink to what it points at
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    for test, kind in _SPECIAL:
        if test(st.st_mode):
            return kind + (" behind a symlink" if path.is_symlink() else "")
    return None if stat.S_ISREG(st.st_mode) else "not a regular file"


def _unused_reason(path: Path, pipeline: str | None) -> str:
    """Why a regular, supported file that no input reads was left out."""
    name = path.name
    if name.upper().startswith(_NOTES) or name.lower().endswith(".truth.json"):
        return "a provenance or readme note, not a document to analyse"
    if pipeline == "contracts":
        return ("no other version to pair with (name the two versions X.v1.* and X.v2.*, put them in a folder "
                "as v1.* and v2.*, or list the pair in pairs.csv)")
    return f"not taken by the {pipeline} pipeline" if pipeline else "not taken by any pipeline"


def ignored_files(folder: Path, inputs: list[PipelineInput], pipeline: str | None = None,
                  out_dir: Path | None = None) -> list[dict[str, str]]:
    """Files under `folder` that none of `inputs` reads, each with the reason ({"file", "reason"}): special
    files (FIFO, socket, device; only stat'ed, never opened), unsupported types, notes, and
    supported files a pipeline did not take (a contract version with no other version to pair
    with). Hidden files and folders, and the batch's own output folder, are left out of the list."""
    folder = Path(folder)
    used = {p.resolve() for i in inputs for p in i.paths}
    own = Path(out_dir).resolve() if out_dir is not None else None
    out = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or path.is_dir():
            continue
        real = _resolved(path)
        if real is None:  # a symlink loop (a -> b -> a, self -> self): reported, never followed
            out.append({"file": rel.as_posix(), "reason": "a symlink loop: not opened"})
            continue
        if own is not None and real.is_relative_to(own):
            continue
        if pipeline is not None:
            owner = pipeline
        else:
            owner = rel.parts[0] if len(rel.parts) > 1 and rel.parts[0] in available() else None
        kind = _special_kind(path)
        if kind is not None:
            out.append({"file": rel.as_posix(), "reason": f"{kind}: only regular files are read; not opened"})
            continue
        if real in used:
            continue
        if owner == "contracts" and path.name == "pairs.csv":
            continue
        if path.suffix.lower() not in SUPPORTED_SUFFIXES:
            out.append({"file": rel.as_posix(), "reason": f"unsupported file type ({path.suffix or 'no suffix'})"})
        else:
            out.append({"file": rel.as_posix(), "reason": _unused_reason(path, owner)})
    return out


# ---------------------------------------------------------------------------------------------
# The output folder's lock


class OutputLock:
    """An exclusive fcntl lock on `<out_dir>/.longdoc-batch.lock`, holding the owner's pid. The
    kernel drops it when its process ends, however it ends, so a killed batch never leaves the
    folder locked."""

    def __init__(self, out_dir: Path):
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / LOCK_NAME
        self.fd: int | None = None

    def holder(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8").strip() or "unknown"
        except OSError:
            return "unknown"

    def acquire(self, wait: bool = False, on_wait: Callable[[str], None] | None = None) -> None:
        import fcntl

        self.out_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = self.holder()
                if not wait:
                    raise BatchBusyError(
                        f"{self.out_dir}: another batch (pid {pid}) is writing there; wait for it to finish "
                        f"(--wait) or choose another --out") from None
                if on_wait:
                    on_wait(f"waiting for the batch (pid {pid}) writing to {self.out_dir}")
                fcntl.flock(fd, fcntl.LOCK_EX)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            import fcntl

            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


# ---------------------------------------------------------------------------------------------
# Running a batch


@dataclass
class BatchReport:
    folder: str
    out_dir: str
    jobs: int
    started_at: str
    outcomes: list[Outcome] = field(default_factory=list)
    total: int = 0
    interrupted: bool = False
    signal: str | None = None
    state: str = "running"  # "running" | "finished" | "interrupted"
    ignored: list[dict[str, str]] = field(default_factory=list)
    stale_temps_removed: int = 0
    previous_run: dict | None = None
    finished_at: str | None = None
    elapsed_s: float = 0.0
    worker_events: list[dict] = field(default_factory=list)

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
            "pid": os.getpid(),
            "state": self.state,
            "started_at": self.started_at,
            "updated_at": _now(),
            "finished_at": self.finished_at,
            "elapsed_s": round(self.elapsed_s, 3),
            "interrupted": self.interrupted,
            "signal": self.signal,
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
            "worker_events": self.worker_events,
            "stale_temp_files_removed": self.stale_temps_removed,
            "previous_run": self.previous_run,
            "inputs": [
                {k: v for k, v in asdict(o).items() if k not in ("traceback", "files") and v is not None}
                for o in outcomes
            ],
        }

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 128 + (signal.Signals[self.signal].value if self.signal in signal.Signals.__members__ else 2)
        return 1 if any(o.status == "failed" for o in self.outcomes) else 0


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Stop(KeyboardInterrupt):
    """SIGINT or SIGTERM, raised in the main thread."""


@contextlib.contextmanager
def _stop_signals(report: BatchReport) -> Iterator[None]:
    """While the batch runs, SIGINT and SIGTERM raise _Stop once (the first names the signal); later
    ones are noted, not raised, so the stop itself runs to its end. Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame) -> None:
        if report.signal is None:
            report.signal = signal.Signals(signum).name
            raise _Stop()

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _stat_key(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def _previous_run(out_dir: Path) -> dict | None:
    """The earlier run's summary when it never finished (killed): pid, start and counts."""
    try:
        prev = json.loads((out_dir / SUMMARY_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(prev, dict) or prev.get("state") != "running":
        return None
    return {k: prev.get(k) for k in ("pid", "started_at", "updated_at", "counts")}


def run_batch(
    tasks: list[Task],
    folder: Path,
    out_dir: Path,
    executor: Executor | None = None,
    jobs: int = 1,
    on_outcome: Callable[[Outcome], None] | None = None,
    pipeline: str | None = None,
    wait: bool = False,
    on_wait: Callable[[str], None] | None = None,
    lock: OutputLock | None = None,
    work: TaskWork = BATCH_WORK,
) -> BatchReport:
    """Run the tasks under the output folder's lock, keeping summary.json current (rewritten at
    most every `SUMMARY_EVERY_S` seconds as inputs finish, and at the end); SIGINT/SIGTERM stop cleanly with what finished (or landed) kept and counted.
    Raises BatchBusyError when another batch holds the folder (unless `wait`). A caller that took
    the lock already passes it as `lock` (and releases it). `work` is one input's work (BATCH_WORK:
    the pipeline's export)."""
    out_dir = Path(out_dir)
    executor = executor or LocalExecutor(jobs)
    own_lock = lock is None
    if lock is None:
        lock = OutputLock(out_dir)
        lock.acquire(wait=wait, on_wait=on_wait)
    try:
        report = BatchReport(str(folder), str(out_dir), jobs, _now(), total=len(tasks),
                             ignored=ignored_files(folder, [t.input for t in tasks], pipeline, out_dir))
        report.previous_run = _previous_run(out_dir)
        report.stale_temps_removed = len(remove_stale_temps(out_dir))
        before = {t.output: _stat_key(t.output) for t in tasks}
        t0 = time.perf_counter()

        last_save = [0.0]

        def save(final: bool = False) -> None:
            report.elapsed_s = time.perf_counter() - t0
            report.worker_events = list(getattr(executor, "events", []))
            write_atomic(out_dir / SUMMARY_NAME, json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n",
                         fsync=final)
            last_save[0] = time.perf_counter()

        def record(outcome: Outcome) -> None:
            report.outcomes.append(outcome)
            if on_outcome:
                on_outcome(outcome)
            # current within SUMMARY_EVERY_S: rewriting it after every input made a batch of
            # 10,000 quick inputs quadratic (the whole summary each time)
            if time.perf_counter() - last_save[0] >= SUMMARY_EVERY_S:
                save()

        with _stop_signals(report):
            save()
            it = executor.run(work, tasks)
            try:
                try:
                    for outcome in it:
                        record(outcome)
                except KeyboardInterrupt as exc:
                    report.interrupted = True
                    report.signal = report.signal or "SIGINT"
                    # let the executor wind down: no new inputs, the ones in flight may still report
                    with contextlib.suppress(KeyboardInterrupt, StopIteration):
                        outcome = it.throw(exc)
                        while True:
                            record(outcome)
                            outcome = next(it)
            finally:
                it.close()
            if report.interrupted:
                _count_landed(report, tasks, before)
                remove_stale_temps(out_dir)  # a worker stopped mid-write
                report.state = "interrupted"
            else:
                report.state = "finished"
            report.finished_at = _now()
            save(final=True)
        return report
    finally:
        if own_lock:
            lock.release()


def _count_landed(report: BatchReport, tasks: list[Task], before: dict) -> None:
    """Outputs written during this run whose worker was stopped before it reported: a new file (by
    inode and mtime) holding this input's hash and the current versions is counted ok."""
    reported = {(o.pipeline, o.input_id) for o in report.outcomes}
    for task in tasks:
        if (task.pipeline, task.input.input_id) in reported:
            continue
        now = _stat_key(task.output)
        if now is None or now == before.get(task.output):
            continue
        try:
            pipe = _pipeline(task.pipeline)
            fresh = _up_to_date(task.output, task.input.content_sha256(), pipe.version, pipe.schema_version,
                                task.llm.key())
        except (OSError, IngestError):
            fresh = False
        if fresh:
            report.outcomes.append(Outcome(task.input.input_id, task.pipeline, "ok", output=str(task.output),
                                           files=[p.name for p in task.input.paths],
                                           note="written as the batch was stopping"))
