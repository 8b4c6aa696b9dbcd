"""Packaging and help text: the SPDX license string (no setuptools deprecation), the LICENSE file in
the wheel and the sdist, flags without a "<bool>" type in --help, and the install saying what it
installs."""

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


APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"  # apache.org LICENSE-2.0.txt


def test_license_file_is_the_apache_text_and_is_packaged(tmp_path):
    """LICENSE is the Apache License 2.0 text byte for byte, pyproject names it, and a wheel and an
    sdist built from this pyproject carry it (the build runs on a copy: the checkout stays clean)."""
    import hashlib
    import subprocess
    import sys
    import tarfile
    import zipfile

    assert hashlib.sha256((ROOT / "LICENSE").read_bytes()).hexdigest() == APACHE_2_0_SHA256
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license-files"] == ["LICENSE"]

    src = tmp_path / "src"
    (src / "app").mkdir(parents=True)  # one package of the project's, empty: the build reads the metadata
    (src / "app" / "__init__.py").write_text("")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        (src / name).write_bytes((ROOT / name).read_bytes())
    out = tmp_path / "out"
    built = []
    for hook in ("build_wheel", "build_sdist"):  # one process each: setuptools keeps state between them
        code = f"import sys; from setuptools import build_meta as b; print('BUILT', b.{hook}(sys.argv[1]))"
        run = subprocess.run([sys.executable, "-c", code, str(out)], cwd=src, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        built.append(run.stdout.rsplit("BUILT", 1)[1].strip())
    wheel_name, sdist_name = built
    with zipfile.ZipFile(out / wheel_name) as whl:
        names = whl.namelist()
        (licence,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert hashlib.sha256(whl.read(licence)).hexdigest() == APACHE_2_0_SHA256
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = whl.read(metadata).decode()
    assert "License-Expression: Apache-2.0" in meta and "License-File: LICENSE" in meta
    with tarfile.open(out / sdist_name) as sdist:
        assert any(m.name.endswith("/LICENSE") and m.name.count("/") == 1 for m in sdist.getmembers())
