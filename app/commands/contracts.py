"""`longdoc contracts A B`: compare two versions of a contract — a redline report on the terminal,
the JSON export with --json, a self-contained HTML redline with --html FILE; the LLM steps (`--llm`)
and questions over both versions (`--ask`) as every pipeline command has them."""

from __future__ import annotations

from pathlib import Path

import typer

from app.commands import llm_options as lo


def register(app: typer.Typer) -> None:
    @app.command()
    def contracts(
        version_a: Path = typer.Argument(..., help="The earlier version (.txt, .md, .docx, .pdf)."),
        version_b: Path = typer.Argument(..., help="The later version (.txt, .md, .docx, .pdf)."),
        as_json: bool = typer.Option(False, "--json", help="Print the JSON export instead of the report."),
        html_out: Path | None = typer.Option(None, "--html", help="Also write a self-contained HTML redline here."),
        semantic: bool = typer.Option(False, "--semantic", help="Blend MiniLM similarity into the score (English)."),
        show_unchanged: bool = typer.Option(False, "--all", help="Show unchanged clauses in the report too."),
        llm: str = lo.llm_option(),
        ask: list[str] = lo.ask_option(),
        llm_budget: float = lo.budget_option(),
        model: Path | None = lo.model_option(),
        device: str | None = lo.device_option(),
        dtype: str | None = lo.dtype_option(),
        max_model_len: int | None = lo.max_len_option(),
        cache_dir: Path | None = lo.cache_dir_option(),
    ) -> None:
        """Align every clause of two versions of a contract and explain every change, material changes first."""
        from app.export import output_problem, to_json, write_atomic
        from app.render.contracts import redline_html, render_terminal
        from pipelines.contracts import AlignConfig, ContractsPipeline, compare_documents
        from pipelines.documents import IngestError, load_document

        lo.check_questions(ask)
        if html_out is not None and (problem := output_problem(html_out)):
            typer.echo(f"longdoc: --html {html_out}: {problem}", err=True)
            raise typer.Exit(2)
        docs = []
        for path in (version_a, version_b):
            try:
                docs.append(load_document(path))
            except IngestError as exc:
                typer.echo(f"longdoc: {exc}", err=True)
                raise typer.Exit(1) from None
        with lo.llm_progress(disable=as_json) as progress:
            run = lo.make_run(llm, model, device, dtype, max_model_len, llm_budget, progress, cache_dir)
            with lo.stop_on_ctrl_c(run):
                result = compare_documents(docs[0], docs[1], AlignConfig(semantic=semantic), llm=run)
                answered = lo.ask_and_attach(run, result, docs, ask, ContractsPipeline())
        if html_out is not None:
            try:
                write_atomic(html_out, redline_html(result, docs[0], docs[1]))
            except OSError as exc:  # the path checked out above, and something changed since
                typer.echo(f"longdoc: could not write --html {html_out}: {exc.strerror or exc}", err=True)
                raise typer.Exit(1) from None
        if as_json:
            typer.echo(to_json(result), nl=False)
        else:
            from rich.console import Console

            console = Console()
            # piped to a file there are no colours: mark deletions and insertions in the text
            console.print(render_terminal(result, show_unchanged=show_unchanged, marks=not console.is_terminal))
            lo.print_llm(result, ask)
        if not answered:
            raise typer.Exit(1)
