"""Tensor parallelism inside the engine: rank 0's model runner, the worker ranks' loop, and the
launch of the worker processes.

Rank 0 runs the whole engine (scheduler, block tables, prefix cache, sampling). Each step its
`TPModelRunner` prepares the batch as host data (`ModelRunner.prepare`: ids, positions, slot
mappings, block tables, lengths), broadcasts it with the KV data operations recorded since the
last step (warm-tier demotion, swap-out and swap-in copies: `PagedKVCache.take_ops`), and runs its
own shard; every other rank replays the operations on its shard of the pools (same block ids, its
own heads) and runs the same step, so every rank's KV of a sequence stays in lock step. Logits
calls bring the other ranks in to gather the vocabulary slices. With `check` on, after every step
each rank folds a checksum of the block tables and sequence lengths it ran into a running chain
and the ranks compare chains (engine/parallel/group.py: `TPGroup.verify`).
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing as mp
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from engine.config import CacheConfig, SchedulerConfig
from engine.core.sequence import Sequence
from engine.errors import TensorParallelError
from engine.parallel.group import TPGroup, free_port, step_digest
from engine.parallel.shard import check_splittable, local_config, shard_tensors, vocab_bounds
from engine.runner.forward_context import Capture, StepInputs
from engine.runner.model_runner import ModelRunner

log = logging.getLogger(__name__)


def rank_device(device: torch.device, rank: int) -> torch.device:
    """Rank r's device: cuda:r on CUDA (one GPU per rank), the CPU otherwise."""
    return torch.device("cuda", rank) if device.type == "cuda" else device


def load_rank(path: Path, device: torch.device, dtype: torch.dtype, weights: str, rank: int, world: int, port: int,
              timeout_s: float, before_join=None):
    """Join the group as `rank` and load that rank's shard of the model: (model, full config,
    tokenizer, group). The model's layers hold their TPGroup (the all-reduces) and its embedding
    and output layer their vocabulary slice. `before_join()` runs once the shard is loaded, before
    the group's rendezvous (a worker says it is ready; rank 0 waits for every worker to say so)."""
    from engine.model.layers import MLP, Attention
    from engine.model.loader import load_model

    holder: dict = {}

    def shard(config, tensors):
        check_splittable(config, world)
        holder["bounds"] = vocab_bounds(config.vocab_size, world)
        return local_config(config, rank, world), shard_tensors(tensors, config, rank, world)

    if device.type == "cuda":
        torch.cuda.set_device(device)
    model, config, tok = load_model(path, device, dtype, weights, shard=shard)
    # the group after the weights: a rank that cannot load fails before the others wait on it
    if before_join is not None:
        before_join()
    group = TPGroup(rank, world, device, port, holder["bounds"], timeout_s)
    model.tp = group
    model.vocab_lo = holder["bounds"][rank][0]
    for m in model.modules():
        if isinstance(m, (Attention, MLP)):
            m.tp = group
    return model, config, tok, group


class TPModelRunner(ModelRunner):
    """Rank 0's runner: each forward is prepared here, sent to the other ranks with the KV
    operations recorded since the last one, and run on every rank's shard."""

    def __init__(self, *args, tp: TPGroup, workers: list[mp.Process], check: bool = False, **kw) -> None:
        super().__init__(*args, **kw)
        self.tp, self.workers, self.check = tp, workers, check
        self.cache.ops = []
        self.closed = False
        self.forward_ids = 0

    def forget_captures(self) -> None:
        """The other ranks drop the attribution captures they keep (rank 0's are gone)."""
        self.send(("forget",))

    def check_alive(self) -> None:
        dead = [(r + 1, p) for r, p in enumerate(self.workers) if not p.is_alive()]
        if dead:
            r, p = dead[0]
            raise TensorParallelError(f"tensor-parallel rank {r} (pid {p.pid}) exited with code {p.exitcode}")

    def send(self, msg: tuple) -> None:
        if self.closed:
            raise TensorParallelError("this tensor-parallel engine is closed")
        self.check_alive()
        try:
            self.tp.send(msg)
        except RuntimeError as exc:  # a rank died during the broadcast: say which
            self._lost(exc)
            raise

    def _lost(self, exc: BaseException) -> None:
        """After a collective failed: a TensorParallelError naming the rank that exited, if one did."""
        for p in self.workers:
            p.join(timeout=2)
        try:
            self.check_alive()
        except TensorParallelError as err:
            raise err from exc

    @torch.inference_mode()
    def forward(self, prefills: list[tuple[Sequence, int]], decodes: list[Sequence],
                capture: Capture | None = None, verify: list[tuple[Sequence, int]] = ()) -> torch.Tensor:
        step = self.prepare(list(prefills) + list(verify), decodes)
        spec = None
        if capture is not None:  # every rank captures its own heads' queries, kept by forward id
            self.forward_ids += 1
            capture.forward_id = self.forward_ids
            rows = capture.rows.cpu() if isinstance(capture.rows, torch.Tensor) else capture.rows
            spec = (self.forward_ids, sorted(capture.layers), rows)
        self.send(("step", self.cache.take_ops(), step, spec))
        try:
            hidden = self.execute(step, capture)
            if self.check:
                seqs = [s for s, _ in list(prefills) + list(verify)] + list(decodes)
                lengths = [s.num_cached + n for s, n in list(prefills) + list(verify)] + [s.num_tokens for s in decodes]
                self.tp.verify(step_digest([s.seq_id for s in seqs], lengths,
                                           [[list(s.tables[g]) for s in seqs] for g in range(len(self.cache.groups))]))
        except RuntimeError as exc:  # a collective failed: a rank that exited is named
            self._lost(exc)
            raise
        except TensorParallelError:  # the ranks diverged: nothing after this step can be trusted
            self.close()
            raise
        self.advance(prefills, decodes)
        return hidden

    def close(self) -> None:
        """Stop the other ranks and leave the group (idempotent)."""
        if self.closed:
            return
        try:
            if all(p.is_alive() for p in self.workers):
                self.tp.send(("stop",))
        except Exception as exc:  # a rank already gone: its peers are stopped below
            log.warning("tensor-parallel stop message failed: %s", exc)
        self.closed = True
        for p in self.workers:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join()
        self.tp.close()


def executed_digest(step: StepInputs, groups: int) -> int:
    """A worker's checksum of the step it ran (`step_digest` of its tables and lengths)."""
    n_pre = len(step.prefills)
    lengths = [start + n for _, n, start, _, _ in step.prefills]
    if step.decode_lens is not None:
        lengths += step.decode_lens.tolist()
    tables = []
    for g in range(groups):
        rows = [step.prefill_tables[g][i, :w[g]].tolist() for i, (*_, w) in enumerate(step.prefills)] if n_pre else []
        if step.decode_tables is not None:
            rows += step.decode_tables[g].tolist()
        tables.append(rows)
    return step_digest(step.seq_ids, lengths, tables)


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker rank needs to build its shard (the cache sizing comes later, from rank 0)."""

    path: str
    device: str
    dtype: str
    weights: str
    world: int
    port: int
    check: bool
    timeout_s: float
    threads: int


def worker_main(rank: int, spec: WorkerSpec, ready=None) -> None:
    """A worker rank's life: load the shard, build the pools rank 0 sized, then run rank 0's
    messages until "stop". An exception ends the process (rank 0 sees it exit)."""
    from engine.attention.attribution import attention_mass
    from engine.attention.triton_backend import default_backend
    from engine.kv.paged_cache import PagedKVCache

    torch.set_num_threads(spec.threads)
    device = rank_device(torch.device(spec.device), rank)
    dtype = getattr(torch, spec.dtype.replace("torch.", ""))
    model, _, _, tp = load_rank(Path(spec.path), device, dtype, spec.weights, rank, spec.world, spec.port,
                                spec.timeout_s, before_join=None if ready is None else (lambda: ready.put(rank)))
    try:
        kind, cache, sched = tp.recv()
        assert kind == "init", kind
        kv = PagedKVCache(model.config, cache, device, dtype, sched)
        runner = ModelRunner(model, kv, default_backend(device, spec.weights), device)
        host: dict[int, list[torch.Tensor]] = {}
        captures: dict[int, Capture] = {}  # attribution captures of this rank's heads, by rank 0's forward id
        fault = os.environ.get("LONGDOC_TP_FAULT", "")  # tests: "rank:step" alters that step's tables
        with torch.inference_mode():
            while True:
                msg = tp.recv()
                if msg[0] == "stop":
                    break
                if msg[0] == "step":
                    _, ops, step, cap_spec = msg
                    kv.apply_ops(ops, host)
                    cap = None
                    if cap_spec is not None:
                        fid, layers, rows = cap_spec
                        cap = Capture(set(layers), rows.to(device) if isinstance(rows, torch.Tensor) else rows)
                        captures[fid] = cap
                    runner.execute(step, cap)
                    if spec.check:
                        if fault == f"{rank}:{tp.steps + 1}":
                            step = dataclasses.replace(step, decode_lens=step.decode_lens + 1
                                                       if step.decode_lens is not None else None,
                                                       seq_ids=[i + 1 for i in step.seq_ids])
                        try:
                            tp.verify(executed_digest(step, len(kv.groups)))
                        except TensorParallelError:  # rank 0 raises it and stops this rank
                            pass
                elif msg[0] == "logits":
                    model.logits(msg[1].to(device))
                elif msg[0] == "mass":  # rank 0's attention_mass over the same captures, this rank's heads
                    _, tables, origins, layers, prompt_len, answer_len = msg
                    caps = [Capture(set(layers), slice(0, m), {x: captures[f].q[x][at:at + m] for x in layers},
                                    {x: captures[f].lse[x][at:at + m] for x in layers}) for f, at, m in origins]
                    attention_mass(model.config, kv, tables, caps, layers, prompt_len, answer_len, tp=tp)
                elif msg[0] == "forget":
                    captures.clear()
                else:
                    raise TensorParallelError(f"rank {rank}: unknown message {msg[0]!r}")
    finally:
        tp.close()


def launch(spec: WorkerSpec) -> tuple[list[mp.Process], object]:
    """Start ranks 1..world-1 as spawned processes (each imports torch and loads its shard); each
    puts its rank on the returned queue once its shard is loaded, before the rendezvous."""
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    procs = []
    for rank in range(1, spec.world):
        p = ctx.Process(target=worker_main, args=(rank, spec, ready), name=f"longdoc-tp-rank{rank}", daemon=True)
        p.start()
        procs.append(p)
    return procs, ready


def wait_ready(workers: list[mp.Process], ready, timeout_s: float, poll_s: float = 0.2) -> None:
    """Rank 0, before the rendezvous: wait until every worker has loaded its shard, and raise
    TensorParallelError at once (naming the rank and its exit code) when one exits first —
    instead of waiting the rendezvous' whole timeout for a rank that will never come."""
    import queue as _queue
    import time as _time

    pending = set(range(1, len(workers) + 1))
    deadline = _time.monotonic() + timeout_s
    while pending:
        try:
            pending.discard(ready.get(timeout=poll_s))
            continue
        except _queue.Empty:
            pass
        for r in sorted(pending):
            p = workers[r - 1]
            if not p.is_alive():
                raise TensorParallelError(f"tensor-parallel rank {r} (pid {p.pid}) exited with code {p.exitcode} "
                                          "while loading its shard (its error is above)")
        if _time.monotonic() > deadline:
            raise TensorParallelError(f"tensor-parallel ranks {sorted(pending)} did not load their shards in "
                                      f"{timeout_s:.0f} s")


def start(path: Path, device: torch.device, dtype: torch.dtype, weights: str, world: int, check: bool,
          timeout_s: float = 600.0):
    """Rank 0's side of building a tensor-parallel engine: start the workers, load rank 0's shard.
    Returns (model, full config, tokenizer, group, workers); `finish` sends the pools' sizing."""
    port = free_port()
    threads = max(1, torch.get_num_threads() // world) if device.type == "cpu" else torch.get_num_threads()
    spec = WorkerSpec(str(path), device.type, str(dtype), weights, world, port, check, timeout_s, threads)
    workers, ready = launch(spec)
    try:
        if device.type == "cpu":
            torch.set_num_threads(threads)
        model, config, tok, tp = load_rank(path, rank_device(device, 0), dtype, weights, 0, world, port, timeout_s,
                                           before_join=lambda: wait_ready(workers, ready, timeout_s))
    except BaseException:
        for p in workers:
            p.kill()
        raise
    return model, config, tok, tp, workers


def finish(tp: TPGroup, cache: CacheConfig, budget_bytes: int, sched: SchedulerConfig) -> None:
    """Send the workers the pools' sizing: rank 0's resolved byte budget, so every rank's pools
    have the same number of blocks."""
    tp.send(("init", dataclasses.replace(cache, memory_budget=int(budget_bytes)), sched))
