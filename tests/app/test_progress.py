"""Progress when stderr is not a terminal (issue 47): plain lines, not silence."""

from __future__ import annotations

import io
import subprocess
import sys

from app.progress import LineProgress


def test_plain_lines_at_start_every_interval_and_at_the_end():
    now = [0.0]
    out = io.StringIO()
    with LineProgress(stream=out, every_s=10.0, clock=lambda: now[0]) as p:
        t = p.add_task("analysing", total=4)
        now[0] = 1.0
        p.advance(t)  # too soon after the start: no line
        now[0] = 12.0
        p.advance(t)  # 10 s since the last line: one, with an estimate of the time left
        p.console.print("[red]failed[/red] a.txt: not a PDF")
        now[0] = 13.0
        p.advance(t)
        now[0] = 20.0
        p.advance(t)  # complete: the last line
    lines = out.getvalue().splitlines()
    assert lines == ["longdoc: analysing …",
                     "longdoc: analysing: 2/4, 12 s, about 12 s left",
                     "failed a.txt: not a PDF",
                     "longdoc: analysing: 4/4, 20 s (done)"]


def test_fields_shown_as_the_llm_display_sets_them():
    out = io.StringIO()
    with LineProgress(stream=out, every_s=0.0, clock=lambda: 5.0) as p:
        t = p.add_task("ask", total=None, done="", left="")
        p.update(t, completed=10, total=100, done="10/100 tokens, 0/2", left="about 9 s left")
        p.update(t, completed=100, total=100, done="100/100 tokens, 2/2", left="")
    assert out.getvalue().splitlines()[1:] == ["longdoc: ask: 10/100 tokens, 0/2, 0 s, about 9 s left",
                                               "longdoc: ask: 100/100 tokens, 2/2, 0 s (done)"]


def test_a_batch_with_stderr_to_a_file_writes_progress_lines(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        (folder / f"p{i}.txt").write_text("What is claimed is:\n1. A widget comprising a base and a lid.\n"
                                          "2. The widget of claim 1, wherein the lid is round.\n", encoding="utf-8")
    with open(tmp_path / "err.log", "w") as err:  # a file: not a terminal
        proc = subprocess.run([sys.executable, "-m", "app.cli", "batch", str(folder), "-p", "patents", "-o",
                               str(tmp_path / "out")], stderr=err, stdout=subprocess.PIPE, timeout=300)
    assert proc.returncode == 0
    log = (tmp_path / "err.log").read_text()
    assert "longdoc: analysing …" in log and "longdoc: analysing: 3/3" in log
