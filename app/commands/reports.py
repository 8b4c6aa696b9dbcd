"""`longdoc reports FILE.pdf [--json]`: every figure/table/section/citation mention of one research
report resolved to its target, on the terminal or as the JSON export; the LLM steps (`--llm`) and
questions about the report (`--ask`) as every pipeline command has them."""

from __future__ import annotations

from pathlib import Path

import typer

from app.commands import llm_options as lo


def register(app: typer.Typer) -> None:
    @app.command()
    def reports(
        file: Path = typer.Argument(..., help="A research report (.pdf; .txt/.md/.docx work without boxes and drawings)."),
        as_json: bool = typer.Option(False, "--json", help="Print the JSON export instead of the tables."),
        llm: str = lo.llm_option(),
        ask: list[str] = lo.ask_option(),
        llm_budget: float = lo.budget_option(),
        model: Path | None = lo.model_option(),
        device: str | None = lo.device_option(),
        dtype: str | None = lo.dtype_option(),
        max_model_len: int | None = lo.max_len_option(),
        cache_dir: Path | None = lo.cache_dir_option(),
    ) -> None:
        """Resolve every "see Figure 3", "如图1所示", "the table above" and "[12]" in one report."""
        from rich.console import Console

        from app.export import to_json
        from app.render.reports import render_terminal
        from pipelines.documents import IngestError, load_document
        from pipelines.reports import ReportsPipeline, analyse_document

        lo.check_questions(ask)
        try:
            doc = load_document(file)
            data = file.read_bytes() if doc.source_format == "pdf" else None
        except IngestError as exc:
            typer.echo(f"longdoc: {exc}", err=True)
            raise typer.Exit(1) from None
        except OSError as exc:
            typer.echo(f"longdoc: {file}: cannot be read ({exc.strerror or exc})", err=True)
            raise typer.Exit(1) from None
        with lo.llm_progress(disable=as_json) as progress:
            run = lo.make_run(llm, model, device, dtype, max_model_len, llm_budget, progress, cache_dir)
            with lo.stop_on_ctrl_c(run):
                result = analyse_document(doc, data, llm=run)
                answered = lo.ask_and_attach(run, result, [doc], ask, ReportsPipeline())
        if as_json:
            typer.echo(to_json(result), nl=False)
        else:
            Console().print(render_terminal(result))
            lo.print_llm(result, ask)
        if not answered:
            raise typer.Exit(1)
