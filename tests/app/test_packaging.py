"""Packaging and help text: the SPDX license string (no setuptools deprecation), flags without a
"<bool>" type in --help, and the install saying what it installs."""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import app

ROOT = Path(__file__).resolve().parents[2]


def test_license_is_an_spdx_string_and_setuptools_does_not_warn():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "Apache-2.0"
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist = apply_configuration(Distribution(), ROOT / "pyproject.toml")
    assert not [w for w in caught if "license" in str(w.message).lower()]
    assert dist.metadata.license_expression == "Apache-2.0"


@pytest.mark.parametrize("command", [[], ["batch"], ["ui"], ["generate"], ["ask"], ["bench"], ["patents"],
                                     ["contracts"], ["reports"], ["medical"]])
def test_help_shows_no_bool_type(command):
    res = CliRunner().invoke(app, [*command, "--help"])
    assert res.exit_code == 0, res.output
    assert "<bool>" not in res.output and "--help" in res.output


def test_setup_names_what_it_installs():
    text = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    install = [line for line in text.splitlines() if "pip install" in line and "-e" in line]
    assert install and all("--quiet" not in line and " -q " not in line for line in install)
    assert "setup: installing longdoc" in text
