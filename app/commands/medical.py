"""`longdoc medical FOLDER [--question "..."] [--json]`: one patient's documents -> timeline,
conflicts, evidence on the terminal, or the export with --json.

FOLDER holds the patient's documents (a single file is accepted too). A file that cannot be read
stops the command with a one-line error naming it (exit 1). When the documents' identity evidence
(name, record number, sex, age, stays) shows several patients, each is reported on its own after a
line saying so and why; with --json the command refuses with that line (exit 2) and names
`longdoc batch`, which writes one export per patient.
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
        llm: str = typer.Option("auto", "--llm",
                                help="LLM steps: off (rules only), auto (only steps measured to help with the configured "
                                     "model: none yet for medical), on (re-rank evidence with the engine's attention)."),
        engine: bool = typer.Option(False, "--engine", help="Same as --llm on."),
    ) -> None:
        """Trace a patient's record: entities, one timeline, conflicts, evidence for conclusions."""
        from app.export import to_json
        from app.render.medical import print_terminal
        from pipelines.documents import IngestError, load_document
        from pipelines.llm import step_enabled
        from pipelines.medical import MedicalPipeline

        try:
            rerank = engine or step_enabled("medical.engine_rerank", llm)
        except ValueError as exc:
            typer.echo(f"longdoc: {exc}", err=True)
            raise typer.Exit(2) from None
        pipe = MedicalPipeline(use_embeddings=not no_embeddings, engine_rerank=rerank)
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
        groups = pipe.patients(docs)
        if len(groups) > 1:
            why = "; ".join(f"{', '.join(docs[i].doc_id for i in g.members[:3])}{' …' if len(g.members) > 3 else ''}: "
                            f"{g.describe()}" for g in groups[:4])
            head = (f"longdoc: {folder}: the documents are of {len(groups)} patients, not one "
                    f"({why}{'; …' if len(groups) > 4 else ''})")
            if as_json:
                typer.echo(head + f"; one export each: longdoc batch {folder} --pipeline medical --out DIR", err=True)
                raise typer.Exit(2)
            typer.echo(head + "; each is reported on its own.")
        for k, g in enumerate(groups):
            part = [docs[i] for i in g.members]
            result = pipe.run_documents(part, questions=question)
            if as_json:
                typer.echo(to_json(result), nl=False)
                return
            if len(groups) > 1:
                typer.echo(f"\n=== Patient {k + 1} of {len(groups)}: {', '.join(d.doc_id for d in part)} — {g.reason}")
            print_terminal(result)

