"""The `longdoc` command line.

    longdoc batch FOLDER [--pipeline NAME] --out DIR [--jobs N] [--force] [--wait] [--json] [--llm MODE]
                  [--executor local|ray [--address auto|ray://HOST:PORT]]
    longdoc batch FOLDER --ask Q [--ask Q2] [--questions FILE] [--cache-dir C] --out DIR   (a review table)
    longdoc schema PIPELINE
    longdoc ui [--port N] [--address A] [--dev]    (the Streamlit app, on 127.0.0.1 by default)
    longdoc patents|contracts|reports|medical ...   (one document or patient; app/commands/<name>.py)
    longdoc ask|generate|bench ...         (the engine; app/commands/engine.py)

Human text by default, JSON with --json. Exit codes: 0 success, 1 some input failed, 2 usage
error, 75 the output folder is in use by another batch, 130 interrupted (SIGINT), 143 stopped by
SIGTERM. Heavy modules are imported inside commands so `--help` stays fast.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import typer

from app.commands import llm_options as lo

app = typer.Typer(
    name="longdoc",
    help="Local analysis of long documents: patents, contracts, medical records, research reports.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain click help: the rich help shows a "<bool>" type beside every flag (typer 0.2x)
    rich_markup_mode=None,
)


def fail(message: str, code: int = 1) -> None:
    """Print a one-line error on stderr (control characters from file names made visible) and exit."""
    from pipelines.documents import visible_controls

    typer.echo(f"longdoc: {visible_controls(message)}", err=True)
    raise typer.Exit(code)


@app.command()
def batch(
    folder: Path = typer.Argument(..., help="Folder of inputs, or of one subfolder per pipeline."),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder (one JSON per input + summary.json)."),
    pipeline: str | None = typer.Option(None, "--pipeline", "-p", help="Pipeline to run; omit when FOLDER has one subfolder per pipeline."),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Worker processes (with --executor ray: Ray actors)."),
    executor_name: str = typer.Option("local", "--executor", metavar="local|ray",
                                      help="Where inputs run: local worker processes, or Ray actors (the extra "
                                           "longdoc[ray]); the outputs are the same."),
    address: str | None = typer.Option(None, "--address", metavar="auto|HOST:PORT|ray://HOST:PORT",
                                       help="With --executor ray: the Ray cluster to join (auto: the one started on "
                                            "this machine by `ray start`); without it a local Ray instance is started."),
    force: bool = typer.Option(False, "--force", help="Recompute outputs that are already up to date."),
    wait: bool = typer.Option(False, "--wait", help="If another batch is writing to --out, wait for it instead of refusing."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    llm: str = lo.llm_option(),
    llm_budget: float = lo.budget_option(),
    model: Path | None = lo.model_option(),
    device: str | None = lo.device_option(),
    dtype: str | None = lo.dtype_option(),
    max_model_len: int | None = lo.max_len_option(),
    ask: list[str] = typer.Option([], "--ask", help="A question for every input: a review table, one row per input "
                                  "and one column per question (repeatable; see app/review.py)."),
    questions_file: Path | None = typer.Option(None, "--questions", help="Questions for the review table, one per "
                                               "line, optionally 'name: question' or 'name<TAB>question'."),
    cache_dir: Path | None = lo.cache_dir_option(),
    group: int | None = typer.Option(None, "--group", min=1, help="Inputs handed to a worker at once; a review "
                                     "table's rows of one group share one engine batch (their documents prefilled "
                                     "together, the decodes batched). Default: review.DEFAULT_GROUP for a review "
                                     "table, else 1."),
) -> None:
    """Run a pipeline over every document in a folder.

    With --ask/--questions it writes a review table instead of the pipeline's exports: one row per
    input, one column per question, each cell answered evidence first (the quoted passages, the
    value, a calibrated confidence, or "not stated in the document") and what was read when the
    input did not fit (DIR/review.json, review.csv, review-sources.csv,
    review.xlsx; one row file per input under DIR/review/). A cell already computed for the same
    input, question, model and settings is not computed again.

    --llm runs the pipelines' LLM steps as for one document: each worker loads the engine once and
    keeps it for all its inputs; an output written with another --llm mode or model is recomputed.

    One batch at a time per output folder: a second one refuses (exit 75) naming the other run's
    pid, or waits with --wait. Ctrl-C or SIGTERM stops it within a couple of seconds, keeping and
    counting every output written; summary.json is kept current as the run goes."""
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from app.batch import (
        BatchBusyError,
        BatchUsageError,
        LLMConfig,
        LocalExecutor,
        OutputLock,
        plan,
        run_batch,
    )
    from app.progress import progress_display

    run = lo.make_run(llm, model, device, dtype, max_model_len, llm_budget, cache_dir=cache_dir)  # validates: exit 2
    executor = None
    if executor_name not in ("local", "ray"):
        fail(f"--executor must be local or ray, not {executor_name!r}", 2)
    if executor_name == "ray":
        try:
            from app.ray_executor import RayExecutor, RayStartError
        except ImportError as exc:
            fail(f"--executor ray needs Ray ({exc}): pip install 'longdoc[ray]'", 2)
        executor = RayExecutor(jobs, address=address)
    elif address is not None:
        fail("--address is for --executor ray", 2)
    questions = None
    if ask or questions_file is not None:
        from app import review

        try:
            questions = review.load_questions(ask, questions_file)
        except ValueError as exc:
            fail(str(exc), 2)
    try:
        tasks = plan(folder, out, pipeline, force, LLMConfig(run.mode.value, run.settings, llm_budget))
    except BatchUsageError as exc:
        fail(str(exc), 2)
    if questions:
        tasks = review.review_tasks(tasks, out, questions)
    group = group or (review.default_group(run.settings) if questions else 1)
    if executor is None:
        executor = LocalExecutor(jobs, group=group)
    else:
        executor.group = group
    lock = OutputLock(out)
    try:
        lock.acquire(wait=wait, on_wait=lambda line: typer.echo(f"longdoc: {line}", err=True))
    except BatchBusyError as exc:
        fail(str(exc), 75)
    except OSError as exc:
        fail(f"{out}: cannot write the batch there ({exc.strerror or exc})", 2)
    console = Console(stderr=True)
    if not tasks:
        console.print(f"[yellow]no inputs found in {folder}[/yellow]")
    if executor_name == "ray" and tasks:  # Ray starts before the batch: a cluster that cannot be joined is one line
        if not (quiet or as_json):
            console.print(f"starting {executor.jobs} Ray workers" + (f" on {address}" if address else " (local Ray)"))
        try:
            executor.start(tasks)
        except (RayStartError, KeyboardInterrupt) as exc:
            executor.close()
            lock.release()
            fail(str(exc) or "stopped while Ray was starting", 2 if isinstance(exc, RayStartError) else 130)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("left"), TimeRemainingColumn())
    try:
        with progress_display(*columns, console=console, disable=quiet or as_json, transient=False) as progress:
            bar = progress.add_task("answering" if questions else "analysing", total=len(tasks))

            def advance(outcome) -> None:
                progress.advance(bar)
                if outcome.status == "failed":
                    progress.console.print(f"[red]failed[/red] {escape(outcome.reason or '')}", highlight=False)

            report = run_batch(tasks, folder, out, executor=executor, jobs=jobs, on_outcome=advance,
                               pipeline=pipeline, lock=lock)
        if questions:  # the table, from the row files (also after a stop: what finished)
            table = review.table_from_tasks(tasks, questions, run.settings.describe(), report.outcomes)
            written = review.write_table(out, table)
    except OSError as exc:
        fail(f"{out}: cannot write the batch there ({exc.strerror or exc})", 2)
    finally:
        lock.release()
        if executor_name == "ray":
            executor.close()
    summary = report.to_dict()
    if as_json:
        typer.echo(json.dumps(summary, indent=2, ensure_ascii=False))
    else:
        prev = summary["previous_run"]
        if prev:
            typer.echo(f"longdoc: the previous batch in {out} (pid {prev['pid']}, started {prev['started_at']}) "
                       "stopped without finishing; its finished outputs were kept", err=True)
        ignored = summary["ignored_files"]
        from pipelines.documents import visible_controls

        for item in ignored[:10]:
            typer.echo(visible_controls(f"ignored {item['file']}: {item['reason']}"), err=True)
        if len(ignored) > 10:
            typer.echo(f"ignored {len(ignored) - 10} more files (summary.json lists them all)", err=True)
        c = summary["counts"]
        parts = f"{c['ok']} done, {c['skipped']} up to date, {c['failed']} failed"
        if ignored:
            parts += f", {len(ignored)} ignored"
        if report.interrupted:
            parts += f", stopped by {report.signal} with {c['not_run']} not run"
        typer.echo(f"{parts} in {summary['elapsed_s']:.1f}s; results in {out}/ (summary: {out}/summary.json)")
        if questions:
            typer.echo(f"review table ({len(tasks)} rows x {len(questions)} questions): "
                       + ", ".join(str(p) for p in written))
    raise typer.Exit(report.exit_code)


@app.command()
def schema(pipeline: str = typer.Argument(..., help="Pipeline name.")) -> None:
    """Print the JSON Schema of a pipeline's export."""
    from app.export import json_schema
    from pipelines.registry import available

    if pipeline not in available():
        fail(f"unknown pipeline {pipeline!r}; available: {', '.join(available())}", 2)
    typer.echo(json_schema(pipeline), nl=False)


def streamlit_command(script: Path, port: int, address: str = "127.0.0.1", dev: bool = False) -> list[str]:
    """The command line `longdoc ui` execs: Streamlit on `address` (loopback unless asked), headless,
    no usage statistics, and, unless `dev`, no watching of the source tree (no inotify flood, no
    rerun when a file changes)."""
    cmd = [sys.executable, "-m", "streamlit", "run", str(script), "--server.address", address, "--server.port", str(port),
           "--server.headless", "true", "--browser.gatherUsageStats", "false"]
    if dev:
        cmd += ["--server.fileWatcherType", "auto", "--server.runOnSave", "true"]
    else:
        cmd += ["--server.fileWatcherType", "none", "--server.runOnSave", "false"]
    return cmd


@app.command()
def ui(
    port: int = typer.Option(8501, "--port", help="Port to listen on."),
    address: str = typer.Option("127.0.0.1", "--address",
                                help="Interface to listen on. The default serves this machine only; "
                                     "--address 0.0.0.0 exposes the UI (and the documents it is given) to "
                                     "everyone who can reach this machine: do it deliberately."),
    dev: bool = typer.Option(False, "--dev", help="Development: watch the source tree and rerun on save."),
) -> None:
    """Start the Streamlit web UI (http://127.0.0.1:8501 by default).

    The process becomes Streamlit (exec): stopping its pid (Ctrl-C, SIGTERM) stops the server, and
    nothing is left serving behind it."""
    script = Path(__file__).resolve().parent.parent / "streamlit_app.py"
    if not script.exists():
        fail(f"{script}: the Streamlit app is not next to the package (run from a source checkout)")
    if address not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"longdoc: serving on {address}: anyone who can reach this machine on port {port} can use the "
                   "UI and see what is uploaded to it", err=True)
    cmd = streamlit_command(script, port, address, dev)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(cmd[0], cmd)
    except OSError as exc:
        fail(f"cannot start Streamlit ({exc.strerror or exc})")


def _register_commands() -> None:
    from app.commands import contracts, engine, medical, patents, reports

    for module in (patents, contracts, reports, medical, engine):
        module.register(app)


_register_commands()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
