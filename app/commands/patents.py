"""`longdoc patents FILE`: the claim tree of one patent on the terminal, or its export with --json;
the LLM steps (`--llm`) and questions about the patent (`--ask`) as every pipeline command has them
(app/commands/llm_options.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from app.commands import llm_options as lo


def register(app: typer.Typer) -> None:
    @app.command()
    def patents(
        file: Path = typer.Argument(..., help="A claims section or a whole patent (.txt, .md, .docx, .pdf)."),
        as_json: bool = typer.Option(False, "--json", help="Print the JSON export instead of the tree."),
        llm: str = lo.llm_option(),
        ask: list[str] = lo.ask_option(),
        llm_budget: float = lo.budget_option(),
        model: Path | None = lo.model_option(),
        device: str | None = lo.device_option(),
        dtype: str | None = lo.dtype_option(),
        max_model_len: int | None = lo.max_len_option(),
        cache_dir: Path | None = lo.cache_dir_option(),
    ) -> None:
        """Build the claim tree of one patent, with validation findings."""
        from rich.console import Console

        from app.export import to_json
        from app.render.patents import render_tree
        from pipelines.documents import IngestError, load_document
        from pipelines.patents import PatentsPipeline

        lo.check_questions(ask)
        try:
            doc = load_document(file)
        except IngestError as exc:
            typer.echo(f"longdoc: {exc}", err=True)
            raise typer.Exit(1) from None
        with lo.llm_progress(disable=as_json) as progress:
            run = lo.make_run(llm, model, device, dtype, max_model_len, llm_budget, progress, cache_dir)
            with lo.stop_on_ctrl_c(run):
                pipeline = PatentsPipeline()
                result = pipeline.run_documents([doc], llm=run)
                answered = lo.ask_and_attach(run, result, [doc], ask, pipeline)
        if as_json:
            typer.echo(to_json(result), nl=False)
        else:
            Console().print(render_tree(result))
            lo.print_llm(result, ask)
        if not answered:
            raise typer.Exit(1)
