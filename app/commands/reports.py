"""`longdoc reports FILE.pdf [--json]`: every figure/table/section/citation mention of one research
report resolved to its target, on the terminal or as the JSON export."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def reports(
        file: Path = typer.Argument(..., help="A research report (.pdf; .txt/.md/.docx work without boxes and drawings)."),
        as_json: bool = typer.Option(False, "--json", help="Print the JSON export instead of the tables."),
    ) -> None:
        """Resolve every "see Figure 3", "如图1所示", "the table above" and "[12]" in one report."""
        from rich.console import Console

        from app.export import to_json
        from app.render.reports import render_terminal
        from pipelines.documents import IngestError, load_document
        from pipelines.reports import analyse_document

        try:
            doc = load_document(file)
            data = file.read_bytes() if doc.source_format == "pdf" else None
        except IngestError as exc:
            typer.echo(f"longdoc: {exc}", err=True)
            raise typer.Exit(1) from None
        except OSError as exc:
            typer.echo(f"longdoc: {file}: cannot be read ({exc.strerror or exc})", err=True)
            raise typer.Exit(1) from None
        result = analyse_document(doc, data)
        if as_json:
            typer.echo(to_json(result), nl=False)
        else:
            Console().print(render_terminal(result))
