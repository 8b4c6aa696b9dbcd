"""Progress on a stream that is not a terminal (stderr redirected to a log file, a CI job, a pipe).

rich's live display draws nothing there, so a 35-minute run once wrote no progress at all.
`LineProgress` takes the part of rich's `Progress` the CLI uses (`add_task`, `update`, `advance`,
`console.print`, a context manager) and writes plain lines instead: one when a task starts, then at
most one every `every_s` seconds per task, and one when it completes. `progress_display(...)` picks
rich's display on a terminal and this elsewhere.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

EVERY_S = 10.0


@dataclass
class _Task:
    description: str
    total: float | None
    completed: float = 0.0
    fields: dict[str, Any] = field(default_factory=dict)
    started: float = 0.0
    last_line: float = 0.0
    finished: bool = False


class _Printer:
    """`progress.console.print(...)` for plain lines: rich markup read, its text written."""

    def __init__(self, owner: LineProgress) -> None:
        self.owner = owner

    def print(self, *objects: Any, **_: Any) -> None:
        from rich.text import Text

        parts = [o.plain if isinstance(o, Text) else Text.from_markup(str(o)).plain for o in objects]
        self.owner.write(" ".join(parts))


class LineProgress:
    def __init__(self, stream: TextIO | None = None, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic,
                 disable: bool = False) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.every_s, self.clock, self.disable = every_s, clock, disable
        self.tasks: list[_Task] = []
        self.console = _Printer(self)

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        for k, t in enumerate(self.tasks):
            if not t.finished and t.completed:
                self._line(k, final=True)

    def write(self, line: str) -> None:
        if not self.disable:
            self.stream.write(line.rstrip("\n") + "\n")
            self.stream.flush()

    def add_task(self, description: str, total: float | None = None, **fields: Any) -> int:
        now = self.clock()
        self.tasks.append(_Task(description, total, fields=dict(fields), started=now, last_line=now))
        self.write(f"longdoc: {description} …")
        return len(self.tasks) - 1

    def update(self, task: int, *, completed: float | None = None, total: float | None = None,
               advance: float | None = None, **fields: Any) -> None:
        t = self.tasks[task]
        if total is not None:
            t.total = total
        if completed is not None:
            t.completed = completed
        if advance:
            t.completed += advance
        t.fields.update(fields)
        done = t.total is not None and t.completed >= t.total
        if done and not t.finished:
            t.finished = True
            self._line(task, final=True)
        elif not done and self.clock() - t.last_line >= self.every_s:
            self._line(task)

    def advance(self, task: int, advance: float = 1) -> None:
        self.update(task, advance=advance)

    def _line(self, task: int, final: bool = False) -> None:
        t = self.tasks[task]
        now = self.clock()
        t.last_line = now
        count = t.fields.get("done") or (f"{t.completed:g}/{t.total:g}" if t.total is not None else f"{t.completed:g}")
        left = "" if final else t.fields.get("left") or _left(t, now)
        bits = [f"longdoc: {t.description}: {count}", f"{now - t.started:.0f} s"]
        if left:
            bits.append(left)
        self.write(", ".join(bits) + (" (done)" if final and t.finished else ""))


def _left(t: _Task, now: float) -> str:
    if not t.total or not t.completed or t.completed >= t.total:
        return ""
    rate = t.completed / max(now - t.started, 1e-9)
    return f"about {(t.total - t.completed) / rate:,.0f} s left"


def progress_display(*columns: Any, console, disable: bool = False, **kw: Any):
    """rich's `Progress` on a terminal; `LineProgress` on the same stream when it is not one."""
    from rich.progress import Progress

    if disable or console.is_terminal:
        return Progress(*columns, console=console, disable=disable, **kw)
    return LineProgress(stream=console.file)
