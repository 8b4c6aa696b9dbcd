"""Batch tasks on Ray actors: `longdoc batch … --executor ray [--address auto|ray://host:port]`.

Ray is an optional extra (`pip install 'longdoc[ray]'`); app.batch and the CLI import this module
only when Ray is asked for.

- Each task is one input (one pipeline run, or one review row). An actor gets up to `group` inputs
  at once (`app.batch.group_size`; a review table's rows then share one engine batch). Workers are
  Ray actors that keep what they load for their whole life: the pipelines (loaded when the actor starts) and, for `--llm`, the engine
  (`pipelines.llm.get_engine`, loaded by the first LLM step and kept). `jobs` actors, one CPU each;
  on a cluster with GPUs, a batch that uses the LLM on a GPU gets one actor per GPU (`num_gpus=1`).
- Actors only compute (`TaskWork.compute`: the pipeline run and its export text). The driver runs
  the up-to-date check before it sends a task and writes each result as it streams back, with the
  same functions as the local runner (`check_task`, `write_computed`: `app.export.write_atomic`),
  so resuming, atomic writes and summary.json are one code path. Each actor holds one group at a
  time: stopping means sending no more.
- Faults: an actor that dies mid-task (killed, out of memory, its node lost) is replaced and its
  tasks (its whole group) run again on another actor, at most `MAX_ATTEMPTS` times in all; a task whose actors died
  every time is one failed input with the reason, and the batch goes on. Its output is written once,
  by the driver, when a computation comes back.
- Stopping (SIGINT/SIGTERM in the driver, turned into KeyboardInterrupt by the batch): no new task
  is sent; tasks in flight get `grace_s` to come back (and are written); then the actors are killed
  and, when this executor started Ray itself, Ray is shut down.
- Without an address Ray starts on this machine with `num_cpus=jobs`, no dashboard and quiet logs;
  Ray's usage statistics are off (no network at run time). With an address (`auto`, a head node's
  `host:port`, `ray://host:port` through Ray Client) the batch joins that cluster; every node must
  have the same longdoc installed (the actors report their pipeline versions and a mismatch stops
  the batch before it starts) and must read the input files at the paths the driver sees (a shared
  file system): inputs travel as paths, results as text.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report over the network

import ray  # noqa: E402
from ray.exceptions import RayActorError, RayError, WorkerCrashedError  # noqa: E402

from app.batch import (  # noqa: E402
    BATCH_WORK,
    GRACE_S,
    Computed,
    Executor,
    Outcome,
    Task,
    TaskWork,
    _pipeline,
    group_size,
)

log = logging.getLogger(__name__)
def _now_iso() -> str:
    import datetime as _dt

    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


MAX_ATTEMPTS = 2  # a task runs at most twice: once, and once more on another actor if its actor died
_DEATHS = (RayActorError, WorkerCrashedError)


_REMOTE_WORKER = None  # ray.remote(BatchWorker), made once


class RayStartError(RuntimeError):
    """Ray could not be started or joined, or its workers differ from the driver (one line)."""


class BatchWorker:
    """A Ray actor's body: computes groups of tasks one group at a time, keeping its pipelines and
    engine. `compute`: a TaskWork's `computed` (a group's Computed, one per task)."""

    def __init__(self, compute: Callable[[list[Task]], list[Computed]], pipelines: list[str]):
        self.compute = compute
        self.versions = {name: [_pipeline(name).version, _pipeline(name).schema_version] for name in pipelines}

    def info(self) -> dict:
        return {"pid": os.getpid(), "host": socket.gethostname(), "versions": self.versions}

    def run(self, tasks: list[Task]) -> list[Computed]:
        return self.compute(tasks)


def _failed(task: Task, why: str) -> Outcome:
    return Outcome(task.input.input_id, task.pipeline, "failed", files=[p.name for p in task.input.paths],
                   reason=f"{task.input.input_id}: {why}")


def _short(exc: BaseException) -> str:
    """One line for a Ray error (they run over many lines)."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first[:160]}" if first else type(exc).__name__


@contextlib.contextmanager
def _keep_signal_handlers() -> Iterator[None]:
    """ray.init installs its own SIGTERM handler; the batch's stop handlers must stay."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            if h is not None:
                signal.signal(s, h)


class RayExecutor(Executor):
    """`jobs` Ray actors; see the module's docstring. `address` None starts Ray on this machine
    (unless this process is connected to Ray already, which it then uses and leaves running).
    `num_gpus` per actor: None = 1 when the cluster has GPUs and the batch uses the LLM off the CPU,
    else 0."""

    def __init__(self, jobs: int = 1, address: str | None = None, num_gpus: float | None = None,
                 grace_s: float = GRACE_S, start_timeout_s: float = 300.0, object_store_mb: int = 512,
                 group: int = 1):
        self.jobs = max(1, jobs)
        self.group = max(1, group)
        self.address = address
        self.num_gpus = num_gpus
        self.grace_s = grace_s
        self.start_timeout_s = start_timeout_s
        self.object_store_mb = object_store_mb
        self.own_ray = False
        self.actors: dict = {}  # actor handle -> info (pid, host, versions)
        self.in_flight: dict = {}  # ObjectRef -> (tasks, actor, attempt, note)
        self._compute: Callable[[list[Task]], list[Computed]] = BATCH_WORK.computed
        self._pipelines: list[str] = []
        self._actor_options: dict = {}
        self._info_refs: dict = {}  # actor handle -> ObjectRef of its info()
        self.deaths = 0  # actors lost during the run
        self.events: list[dict] = []  # each lost actor: who, when, its inputs, what was done (summary.json)

    # -- starting and stopping ------------------------------------------------------------------

    def _connect(self) -> None:
        if ray.is_initialized():
            return
        kwargs: dict = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR,
                        "configure_logging": True}
        if self.address is None:
            kwargs |= {"num_cpus": self.jobs, "object_store_memory": self.object_store_mb * 1024 * 1024}
        else:
            kwargs["address"] = self.address
        with _keep_signal_handlers():
            try:
                ray.init(**kwargs)
            except Exception as exc:  # noqa: BLE001 - Ray raises many kinds; one line for the user
                where = f"the Ray cluster at {self.address}" if self.address else "a local Ray instance"
                raise RayStartError(f"cannot start or join {where} ({_short(exc)})") from exc
        self.own_ray = True

    def start(self, tasks: Iterable[Task] = (), fn: TaskWork | None = None) -> None:
        """Start or join Ray and start the actors (each loads the batch's pipelines), checking that
        they run the driver's pipeline versions. Raises RayStartError. `run` calls it if needed."""
        if self.actors:
            return
        tasks = list(tasks)
        self._compute = (fn or BATCH_WORK).computed
        self._pipelines = sorted({t.pipeline for t in tasks})
        self._connect()
        gpus = self.num_gpus
        if gpus is None:
            on_gpu = any(t.llm.mode != "off" and t.llm.settings.device != "cpu" for t in tasks)
            gpus = 1 if on_gpu and ray.cluster_resources().get("GPU", 0) >= 1 else 0
        if gpus:
            n_gpu = int(ray.cluster_resources().get("GPU", 0) // gpus)
            if n_gpu < self.jobs:
                log.warning("%d actors asked for, the cluster has GPUs for %d", self.jobs, n_gpu)
                self.jobs = max(1, n_gpu)
        self._actor_options = {"num_cpus": 1, "num_gpus": gpus, "max_restarts": 0, "max_task_retries": 0}
        try:
            for _ in range(self.jobs):
                self._new_actor()
            infos = self._wait_infos(list(self.actors))
        except BaseException:
            self.close()
            raise
        mine = {name: [_pipeline(name).version, _pipeline(name).schema_version] for name in self._pipelines}
        for info in infos:
            if info["versions"] != mine:
                self.close()
                raise RayStartError(
                    f"a Ray worker on {info['host']} runs pipelines {info['versions']}, this driver {mine}: install "
                    "the same longdoc on every node")

    def _new_actor(self):
        global _REMOTE_WORKER
        if _REMOTE_WORKER is None:
            _REMOTE_WORKER = ray.remote(BatchWorker)
        actor = _REMOTE_WORKER.options(**self._actor_options).remote(self._compute, self._pipelines)
        self.actors[actor] = None
        self._info_refs[actor] = actor.info.remote()  # answered before any task: calls run in order
        return actor

    def _info(self, actor) -> dict:
        """An actor's pid and host once it has answered (an empty dict before)."""
        if self.actors.get(actor) is None and actor in self._info_refs:
            with contextlib.suppress(Exception):
                self.actors[actor] = ray.get(self._info_refs[actor], timeout=0)
        return self.actors.get(actor) or {}

    def _wait_infos(self, actors: list) -> list[dict]:
        refs = {self._info_refs[a]: a for a in actors}
        ready, waiting = ray.wait(list(refs), num_returns=len(refs), timeout=self.start_timeout_s)
        if waiting:
            raise RayStartError(f"{len(waiting)} of {len(refs)} Ray workers did not start within "
                                f"{self.start_timeout_s:.0f}s (does the cluster have the CPUs/GPUs free?)")
        infos = []
        for ref in ready:
            try:
                info = ray.get(ref)
            except RayError as exc:
                raise RayStartError(f"a Ray worker could not start ({_short(exc)})") from exc
            self.actors[refs[ref]] = info
            infos.append(info)
        return infos

    def close(self) -> None:
        """Kill the actors; shut Ray down when this executor started it. Idempotent."""
        for actor in list(self.actors):
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        self.actors.clear()
        self._info_refs.clear()
        self.in_flight.clear()
        if self.own_ray and ray.is_initialized():
            with _keep_signal_handlers():
                ray.shutdown()
            self.own_ray = False

    def pids(self) -> dict[str, int]:
        """The pid of the actor computing each input in flight (input_id -> pid), for tests and logs."""
        return {task.input.input_id: self._info(actor).get("pid")
                for tasks, actor, _, _ in self.in_flight.values() for task in tasks}

    # -- running --------------------------------------------------------------------------------

    def run(self, fn: Callable[[Task], Outcome], tasks: list[Task]) -> Iterator[Outcome]:
        if not isinstance(fn, TaskWork):
            raise TypeError("RayExecutor runs a TaskWork (app.batch.BATCH_WORK): its actors compute, the driver writes")
        queue: deque[tuple[Task, int, str | None]] = deque((t, 1, None) for t in tasks)  # task, attempt, note
        idle: deque = deque(self.actors)  # started already by `start`, or when first needed
        try:
            try:
                while queue or self.in_flight:
                    # feed every idle actor; up-to-date inputs are answered by the driver at once, and
                    # Ray starts only when an input needs computing
                    while queue and (idle or not self.actors):
                        group: list[tuple[Task, int, str | None]] = []
                        size = group_size(self.group, len(queue), max(1, len(self.actors) or self.jobs))
                        while queue and len(group) < size:
                            if group and queue[0][1] != group[0][1]:
                                break  # a retried group is not mixed with first attempts
                            task, attempt, note = queue.popleft()
                            if attempt == 1:
                                done = fn.check(task)
                                if done is not None:
                                    yield done
                                    continue
                            group.append((task, attempt, note))
                        if not group:
                            continue
                        if not self.actors:
                            try:
                                self.start(tasks, fn)
                            except RayStartError as exc:
                                for task, _, _ in group + list(queue):
                                    yield _failed(task, str(exc))
                                queue.clear()
                                break
                            idle.extend(self.actors)
                        actor = idle.popleft()
                        # a group keeps its first task's attempt and note (a retried group is retried whole)
                        _, attempt, note = group[0]
                        group_tasks = [t for t, _, _ in group]
                        self.in_flight[actor.run.remote(group_tasks)] = (group_tasks, actor, attempt, note)
                    if not self.in_flight:
                        continue
                    ready, _ = ray.wait(list(self.in_flight), num_returns=1)
                    yield from self._collect(fn, ready[0], queue, idle)
            except KeyboardInterrupt:
                queue.clear()  # no new input from now on
                deadline = time.monotonic() + self.grace_s
                while self.in_flight and (left := deadline - time.monotonic()) > 0:
                    ready, _ = ray.wait(list(self.in_flight), num_returns=1, timeout=left)
                    if ready:
                        yield from self._collect(fn, ready[0], queue, None)
                raise
        finally:
            self.close()

    def _collect(self, fn: TaskWork, ref, queue: deque, idle: deque | None) -> list[Outcome]:
        """The results of a finished call, written by the driver. When its actor died: the group's
        tasks are put back for another actor (no outcome), or failed for good after MAX_ATTEMPTS.
        `idle` None: the batch is stopping (a task whose actor died then is not run, as a local
        worker stopped by the same signal: no outcome)."""
        tasks, actor, attempt, note = self.in_flight.pop(ref)
        try:
            computed = ray.get(ref)
        except _DEATHS as exc:
            info = self._info(actor)
            self.actors.pop(actor, None)
            self._info_refs.pop(actor, None)
            self.deaths += 1
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
            if idle is None:
                return []
            why = f"its Ray worker (pid {info.get('pid', '?')} on {info.get('host', '?')}) died"
            event = {"event": "worker died", "worker": f"pid {info.get('pid', '?')} on {info.get('host', '?')}",
                     "at": _now_iso(), "inputs": [t.input.input_id for t in tasks],
                     "error": _short(exc),
                     "then": "run again on another worker" if attempt < MAX_ATTEMPTS else "failed: no attempt left"}
            if queue or attempt < MAX_ATTEMPTS:
                event["replaced"] = self._replace(idle)
            self.events.append(event)
            if attempt < MAX_ATTEMPTS:
                queue.extendleft((t, attempt + 1, f"run again after {why}") for t in reversed(tasks))
                return []
            return [_failed(t, f"{why} on each of its {attempt} attempts ({_short(exc)})") for t in tasks]
        except RayError as exc:  # the call itself failed (a result that cannot travel, a Ray fault)
            if idle is not None:
                idle.append(actor)
            return [_failed(t, f"Ray error ({_short(exc)})") for t in tasks]
        if idle is not None:
            idle.append(actor)
        outcomes = []
        for task, c in zip(tasks, computed, strict=True):
            outcome = fn.write(task, c)
            if note:
                outcome.note = note
            outcomes.append(outcome)
        return outcomes

    def _replace(self, idle: deque) -> bool:
        """A new actor in place of a dead one (it starts while the others work); whether one started."""
        try:
            idle.append(self._new_actor())
        except RayError as exc:
            log.warning("could not start a replacement Ray worker: %s", _short(exc))
            return False
        return True
