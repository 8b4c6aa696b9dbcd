"""`longdoc medical FOLDER [--question "..."] [--json]`: one patient's documents -> timeline,
conflicts, evidence on the terminal, or the export with --json.

FOLDER holds the patient's documents (a single file is accepted too). A file that cannot be read
stops the command with a one-line error naming it (exit 1).
"""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def medical(
        folder: Path = typer.Argument(..., help="Folder with one patient's documents (.txt, .md, .docx, .pdf), or one file."),
        question: list[str] = typer.Option([], "--question", "-q", help="A conclusion or question to find evidence for (repeatable)."),
        as_json: bool = typer.Option(False, "--json", help="Print the JSON export."),
        no_embeddings: bool = typer.Option(False, "--no-embeddings", help="Lexical + concept evidence ranking only."),
        engine: bool = typer.Option(False, "--engine", help="Optional: re-rank evidence with the engine's attention attribution."),
    ) -> None:
        """Trace a patient's record: entities, one timeline, conflicts, evidence for conclusions."""
        from app.export import to_json
        from pipelines.documents import IngestError, load_document
        from pipelines.medical.pipeline import MedicalPipeline

        pipe = MedicalPipeline(use_embeddings=not no_embeddings, engine_rerank=engine)
        if not folder.exists():
            typer.echo(f"longdoc: {folder}: no such file or folder", err=True)
            raise typer.Exit(1)
        if folder.is_dir():
            inputs = pipe.discover(folder)
            paths = [p for inp in inputs for p in inp.paths]
            if not paths:
                typer.echo(f"longdoc: {folder}: no documents (.txt, .md, .docx, .pdf) found", err=True)
                raise typer.Exit(1)
        else:
            paths = [folder]
        docs = []
        for p in paths:
            try:
                docs.append(load_document(p))
            except IngestError as exc:
                typer.echo(f"longdoc: {exc}", err=True)
                raise typer.Exit(1) from None
        import hashlib

        h = hashlib.sha256()
        for p in sorted(paths, key=lambda p: p.name):
            h.update(p.name.encode("utf-8") + b"\0")
            h.update(hashlib.sha256(p.read_bytes()).digest())
        result = pipe.run_documents(docs, input_sha256=h.hexdigest(), questions=question)
        if as_json:
            typer.echo(to_json(result), nl=False)
            return
        _print(result)


def _print(result) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    con = Console()
    p = result.patient
    anchors = ", ".join(f"{k} {a.date}" for k, a in p.anchors.items()) or "none found"
    con.print(f"[bold]Patient[/bold] {p.id} · sex {p.sex or '?'} · age {p.age or '?'} · anchors: {anchors}")
    con.print(f"{len(result.documents)} documents, {len(result.entities)} entities, {len(result.events)} events, "
              f"{len(result.relations)} relations, {len(result.conflicts)} conflicts")
    t = Table(title="Timeline (events with a date)", show_lines=False)
    for col in ("date", "event", "type", "status", "sources"):
        t.add_column(col)
    for ev in result.events:
        if not ev.time.start or ev.type in ("lab", "vital") and ev.status == "present" and ev.concept.startswith("vital:"):
            continue
        t.add_row(ev.time.start, ev.concept, ev.type, ev.status, ", ".join(ev.documents))
    con.print(t)
    for c in result.conflicts:
        con.print(f"[red]conflict[/red] {c.date}: {escape(c.description)}")
    for ev in result.evidence:
        con.print(f"\n[bold]{'Diagnosis' if ev.kind == 'diagnosis' else 'Question'}:[/bold] {escape(ev.claim)}  [dim]({ev.method})[/dim]")
        for it in ev.supporting[:3]:
            con.print(f"  [green]+ {it.score:.3f}[/green] {escape(it.doc_id)} \\[{it.section or '-'}] {escape(it.span.text[:140])}")
        for it in ev.contradicting[:2]:
            con.print(f"  [red]- {it.score:.3f}[/red] {escape(it.doc_id)} \\[{it.section or '-'}] {escape(it.span.text[:140])}")
    for w in result.warnings:
        con.print(f"[yellow]warning[/yellow] {w}")
