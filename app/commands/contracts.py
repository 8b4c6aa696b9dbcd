"""`longdoc contracts A B`: compare two versions of a contract — a redline report on the terminal,
the JSON export with --json, a self-contained HTML redline with --html FILE."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def contracts(
        version_a: Path = typer.Argument(..., help="The earlier version (.txt, .md, .docx, .pdf)."),
        version_b: Path = typer.Argument(..., help="The later version (.txt, .md, .docx, .pdf)."),
        as_json: bool = typer.Option(False, "--json", help="Print the JSON export instead of the report."),
        html_out: Path | None = typer.Option(None, "--html", help="Also write a self-contained HTML redline here."),
        semantic: bool = typer.Option(False, "--semantic", help="Blend MiniLM similarity into the score (English)."),
        show_unchanged: bool = typer.Option(False, "--all", help="Show unchanged clauses in the report too."),
    ) -> None:
        """Align every clause of two versions of a contract and explain every change, material changes first."""
        from app.export import to_json, write_atomic
        from app.render.contracts import redline_html, render_terminal
        from pipelines.contracts import AlignConfig, compare_documents
        from pipelines.documents import IngestError, load_document

        docs = []
        for path in (version_a, version_b):
            try:
                docs.append(load_document(path))
            except IngestError as exc:
                typer.echo(f"longdoc: {exc}", err=True)
                raise typer.Exit(1) from None
        result = compare_documents(docs[0], docs[1], AlignConfig(semantic=semantic))
        if html_out is not None:
            write_atomic(html_out, redline_html(result, docs[0], docs[1]))
        if as_json:
            typer.echo(to_json(result), nl=False)
        else:
            from rich.console import Console

            console = Console()
            # piped to a file there are no colours: mark deletions and insertions in the text
            console.print(render_terminal(result, show_unchanged=show_unchanged, marks=not console.is_terminal))
