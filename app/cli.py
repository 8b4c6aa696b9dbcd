"""The `longdoc` command line.

    longdoc batch FOLDER [--pipeline NAME] --out DIR [--jobs N] [--force] [--json]
    longdoc schema PIPELINE
    longdoc ui                             (the Streamlit app)
    longdoc patents|contracts|reports|medical ...   (one document or patient; app/commands/<name>.py)
    longdoc ask|generate|bench ...         (the engine; app/commands/engine.py)

Human text by default, JSON with --json. Exit codes: 0 success, 1 some input failed, 2 usage
error, 130 interrupted. Heavy modules are imported inside commands so `--help` stays fast.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import typer

app = typer.Typer(
    name="longdoc",
    help="Local analysis of long documents: patents, contracts, medical records, research reports.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def fail(message: str, code: int = 1) -> None:
    """Print a one-line error on stderr and exit."""
    typer.echo(f"longdoc: {message}", err=True)
    raise typer.Exit(code)


@app.command()
def batch(
    folder: Path = typer.Argument(..., help="Folder of inputs, or of one subfolder per pipeline."),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder (one JSON per input + summary.json)."),
    pipeline: str | None = typer.Option(None, "--pipeline", "-p", help="Pipeline to run; omit when FOLDER has one subfolder per pipeline."),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Worker processes."),
    force: bool = typer.Option(False, "--force", help="Recompute outputs that are already up to date."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Run a pipeline over every document in a folder."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from app.batch import BatchUsageError, plan, run_batch

    try:
        tasks = plan(folder, out, pipeline, force)
    except BatchUsageError as exc:
        fail(str(exc), 2)
    console = Console(stderr=True)
    if not tasks:
        console.print(f"[yellow]no inputs found in {folder}[/yellow]")
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, disable=quiet or as_json, transient=False) as progress:
        bar = progress.add_task("analysing", total=len(tasks))

        def advance(outcome) -> None:
            progress.advance(bar)
            if outcome.status == "failed":
                progress.console.print(f"[red]failed[/red] {outcome.reason}")

        report = run_batch(tasks, folder, out, jobs=jobs, on_outcome=advance)
    summary = report.to_dict()
    if as_json:
        typer.echo(json.dumps(summary, indent=2, ensure_ascii=False))
    else:
        c = summary["counts"]
        parts = f"{c['ok']} done, {c['skipped']} up to date, {c['failed']} failed"
        if report.interrupted:
            parts += f", interrupted with {c['not_run']} not run"
        typer.echo(f"{parts} in {summary['elapsed_s']:.1f}s; results in {out}/ (summary: {out}/summary.json)")
    raise typer.Exit(report.exit_code)


@app.command()
def schema(pipeline: str = typer.Argument(..., help="Pipeline name.")) -> None:
    """Print the JSON Schema of a pipeline's export."""
    from app.export import json_schema
    from pipelines.registry import available

    if pipeline not in available():
        fail(f"unknown pipeline {pipeline!r}; available: {', '.join(available())}", 2)
    typer.echo(json_schema(pipeline), nl=False)


@app.command()
def ui(port: int = typer.Option(8501, help="Port on 127.0.0.1.")) -> None:
    """Start the Streamlit web UI on 127.0.0.1."""
    script = Path(__file__).resolve().parent.parent / "streamlit_app.py"
    if not script.exists():
        fail(f"{script}: the Streamlit app is not next to the package (run from a source checkout)")
    cmd = [sys.executable, "-m", "streamlit", "run", str(script), "--server.address", "127.0.0.1", "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false"]
    raise typer.Exit(subprocess.call(cmd))


def _register_commands() -> None:
    from app.commands import contracts, engine, medical, patents, reports

    for module in (patents, contracts, reports, medical, engine):
        module.register(app)


_register_commands()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
