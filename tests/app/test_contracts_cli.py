"""The contracts surfaces in the app: the `longdoc contracts` command (JSON, HTML, errors), the terminal
report and the HTML redline."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from app.render.contracts import redline_html, render_terminal, terminal_text
from pipelines.contracts import compare_texts
from tests.pipelines.contracts.data import FIXTURES, SMALL_A, SMALL_B


def test_terminal_and_html() -> None:
    r = compare_texts(SMALL_A, SMALL_B, "a.txt", "b.txt")
    text = terminal_text(r)
    assert "Changes (material first)" in text and "USD 100 → USD 150" in text
    assert render_terminal(r) is not None
    page = redline_html(r)
    assert page.startswith("<!DOCTYPE html>") and "<del>" in page and "<ins>" in page
    assert 'href="#row-' in page and "http" not in page.split("<body>")[1]  # self-contained


def cli_app() -> typer.Typer:
    from app.commands.contracts import register

    app = typer.Typer()
    register(app)

    @app.command()
    def _other() -> None:  # a second command, so typer keeps `contracts` as a subcommand
        pass

    return app


def test_cli_json_and_errors(tmp_path: Path) -> None:
    a = FIXTURES / "en-commonpaper-dpa-1.0-to-1.1" / "v1.txt"
    b = FIXTURES / "en-commonpaper-dpa-1.0-to-1.1" / "v2.txt"
    runner = CliRunner()
    res = runner.invoke(cli_app(), ["contracts", str(a), str(b), "--json", "--html", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["pipeline"] == "contracts" and d["stats"]["modified"] == 1
    assert (tmp_path / "r.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    res2 = runner.invoke(cli_app(), ["contracts", str(a), str(b), "--json"])
    assert res2.stdout == res.stdout  # deterministic
    res = runner.invoke(cli_app(), ["contracts", str(a), str(b)])
    assert res.exit_code == 0 and "10.1" in res.stdout
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"%PDF-1.4 not really")
    res = runner.invoke(cli_app(), ["contracts", str(a), str(bad)])
    assert res.exit_code == 1
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "broken.pdf" in err[0]
