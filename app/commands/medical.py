"""`longdoc medical FOLDER [--question "..."] [--json]`: one patient's documents -> timeline,
conflicts, evidence on the terminal, or the export with --json.

FOLDER holds the patient's documents (a single file is accepted too). A file that cannot be read
stops the command with a one-line error naming it (exit 1). When the documents' identity evidence
(name, record number, sex, age, stays) shows several patients, each is reported on its own after a
line saying so and why; with --json the command refuses with that line (exit 2) and names
`longdoc batch`, which writes one export per patient. The LLM steps (`--llm`: in auto the
attention-attributed evidence, measured to help) and questions about the patient (`--ask`) as
every pipeline command has them; --question finds evidence for a conclusion (and, with --llm on,
answers it).
"""

from __future__ import annotations

from pathlib import Path

import typer

from app.commands import llm_options as lo


def register(app: typer.Typer) -> None:
    @app.command()
    def medical(
        folder: Path = typer.Argument(..., help="Folder with one patient's documents (.txt, .md, .docx, .pdf), or one file."),
        question: list[str] = typer.Option([], "--question", "-q", help="A conclusion or question to find evidence for (repeatable)."),
        as_json: bool = typer.Option(False, "--json", help="Print the JSON export."),
        no_embeddings: bool = typer.Option(False, "--no-embeddings", help="Lexical + concept evidence ranking only."),
        llm: str = lo.llm_option(),
        engine: bool = typer.Option(False, "--engine", help="Same as --llm on (kept for older scripts)."),
        ask: list[str] = lo.ask_option(),
        llm_budget: float = lo.budget_option(),
        model: Path | None = lo.model_option(),
        device: str | None = lo.device_option(),
        dtype: str | None = lo.dtype_option(),
        max_model_len: int | None = lo.max_len_option(),
        cache_dir: Path | None = lo.cache_dir_option(),
    ) -> None:
        """Trace a patient's record: entities, one timeline, conflicts, evidence for conclusions."""
        from app.export import to_json
        from app.render.medical import print_terminal
        from pipelines.documents import IngestError, load_document
        from pipelines.medical import MedicalPipeline

        lo.check_questions(ask)
        mode = "on" if engine else llm
        lo.make_run(mode, model, device, dtype, max_model_len, llm_budget)  # a bad --llm or setting: exit 2 now
        pipe = MedicalPipeline(use_embeddings=not no_embeddings)
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
        answered = True
        for k, g in enumerate(groups):
            part = [docs[i] for i in g.members]
            with lo.llm_progress(disable=as_json) as progress:
                run = lo.make_run(mode, model, device, dtype, max_model_len, llm_budget, progress, cache_dir)
                with lo.stop_on_ctrl_c(run):
                    result = pipe.run_documents(part, questions=question, llm=run)
                    answered = lo.ask_and_attach(run, result, part, ask, pipe) and answered
            if as_json:
                typer.echo(to_json(result), nl=False)
                break
            if len(groups) > 1:
                typer.echo(f"\n=== Patient {k + 1} of {len(groups)}: {', '.join(d.doc_id for d in part)} — {g.reason}")
            print_terminal(result)
            lo.print_llm(result, ask)
        if not answered:
            raise typer.Exit(1)

