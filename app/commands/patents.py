"""`longdoc patents FILE`: the claim tree of one patent on the terminal, or its export with --json."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def patents(
        file: Path = typer.Argument(..., help="A claims section or a whole patent (.txt, .md, .docx, .pdf)."),
        as_json: bool = typer.Option(False, "--json", help="Print the JSON export instead of the tree."),
    ) -> None:
        """Build the claim tree of one patent, with validation findings."""
        from rich.console import Console

        from app.export import to_json
        from app.render.patents import render_tree
        from pipelines.documents import IngestError, load_document
        from pipelines.patents import PatentsPipeline

        try:
            doc = load_document(file)
        except IngestError as exc:
            typer.echo(f"longdoc: {exc}", err=True)
            raise typer.Exit(1) from None
        pipe = PatentsPipeline()
        result = pipe.run_documents([doc])
        if as_json:
            typer.echo(to_json(result), nl=False)
        else:
            Console().print(render_tree(result))
