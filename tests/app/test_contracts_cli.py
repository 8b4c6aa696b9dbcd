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


def test_reader_names_and_plain_text_marks() -> None:
    """The GitHub ToS pair: clauses named by their headings, not ids such as `h:summary`; piped to a
    file (CliRunner is not a terminal) deletions and insertions are marked, not run together."""
    d = FIXTURES / "en-github-tos-2017-10-to-2018-05"
    r = compare_texts((d / "v1.txt").read_text(encoding="utf-8"), (d / "v2.txt").read_text(encoding="utf-8"))
    text = terminal_text(r)
    page = redline_html(r)
    for surface in (text, page, " ".join(s.text for s in r.summary)):
        assert "h:summary" not in surface and "h:the-github" not in surface
    assert "Summary: modified" in text and "B.2 Account Requirements → B.3 Account Requirements" in text
    assert "[-October 11, 2017-]{+May 25, 2018+}" in text and "[-account-]{+Account+}" in text
    assert "accountAccount" not in text and "2017May" not in text
    res = CliRunner().invoke(cli_app(), ["contracts", str(d / "v1.txt"), str(d / "v2.txt")])
    assert res.exit_code == 0 and "[-October 11, 2017-]{+May 25, 2018+}" in res.stdout
    assert "accountAccount" not in res.stdout
