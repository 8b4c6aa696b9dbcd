"""`longdoc reports FILE [--json]` and bad input: a scanned (image-only) or broken PDF gives one
line naming the file, exit status 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import tests.pipelines.reports.helpers as H
from app.commands.reports import register
from pipelines.documents import IngestError, load_document

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "reports"


def cli() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.command()
    def other() -> None:  # a second command keeps `reports` a subcommand
        pass

    return app


def invoke(*args: str):
    return CliRunner().invoke(cli(), list(args))


def test_json_export_on_stdout():
    res = invoke("reports", str(FIX / "eglen.pdf"), "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["pipeline"] == "reports" and data["schema_version"].startswith("reports/")
    assert any(m["targets"] == ["table-1"] for m in data["mentions"])


def test_terminal_output_is_readable():
    res = invoke("reports", str(FIX / "eglen.pdf"))
    assert res.exit_code == 0
    assert "Mentions" in res.stdout and "table-1" in res.stdout and "external" in res.stdout


@pytest.mark.parametrize("kind", ["scan", "broken", "missing", "not_pdf"])
def test_bad_file_one_line_error(tmp_path, kind):
    path = tmp_path / f"{kind}.pdf"
    if kind == "scan":
        H.make_image_only(path)
    elif kind == "broken":
        path.write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >>\n% truncated garbage \x00\x01")
    elif kind == "not_pdf":
        path.write_bytes(b"\x89PNG\r\n\x1a\n not a pdf at all")
    res = invoke("reports", str(path))
    assert res.exit_code == 1
    err = res.stderr.strip()
    assert len(err.splitlines()) == 1 and str(path) in err, err
    assert "Traceback" not in res.output
    if kind == "scan":
        assert "no text layer" in err


def test_scanned_pdf_raises_ingest_error(tmp_path):
    path = H.make_image_only(tmp_path / "scan.pdf")
    with pytest.raises(IngestError) as info:
        load_document(path)
    assert "scan.pdf" in str(info.value) and "\n" not in str(info.value)


def test_terminal_names_targets_by_their_printed_labels():
    """The thesis numbers per chapter ('图 2­1', printed with a soft hyphen): the reader sees the
    label as printed beside the id, in the targets table and in each mention's targets."""
    from rich.console import Console

    from app.render.reports import render_terminal, target_names
    from pipelines.reports import analyse_document

    pdf = FIX / "zh-sustechthesis-example.pdf"
    result = analyse_document(load_document(pdf), pdf.read_bytes())
    assert target_names(result, ["figure-2-1", "nope"]) == ["图 2\u00ad1 (figure-2-1)", "nope"]
    console = Console(width=250, record=True)
    console.print(render_terminal(result))
    out = console.export_text()
    assert "表 2\u00ad3 (table-2-3)" in out and "图 A\u00ad1" in out
