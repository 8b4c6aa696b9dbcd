"""The layout's import rules (DESIGN.md, "Rooms and what they may import"), read from the source
with `ast`: every import statement of every module, including those inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = ("contracts", "medical", "patents", "reports")
SHARED = ("base", "registry", "documents", "text", "llm")  # what every pipeline and the app may import


def _imports(path: Path, package: tuple[str, ...] | None = None) -> list[tuple[int, str]]:
    """(line, module) for every import in a file; relative imports resolved against its package
    (by default the one its place under the repository root names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    if package is None:
        package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ((node.module,) if node.module else ()))
            else:
                mod = node.module or ""
            out.append((node.lineno, mod))
            # `from pipelines import contracts` imports the subpackage
            out += [(node.lineno, f"{mod}.{a.name}") for a in node.names if mod in ("pipelines", "engine", "app")]
    return out


def _modules(room: str) -> list[Path]:
    top = ROOT / room
    return sorted(top.rglob("*.py")) if top.is_dir() else [top]


def _violations(room: str, allowed) -> list[str]:
    bad = []
    for path in _modules(room):
        for line, mod in _imports(path):
            why = allowed(path, mod)
            if why:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {mod}: {why}")
    return bad


def _top(mod: str) -> str:
    return mod.split(".")[0]


def test_kernels_import_nothing_of_the_project():
    def rule(path, mod):
        return "longdoc_kernels imports only torch/triton" if _top(mod) in ("engine", "pipelines", "app") else None

    assert _violations("longdoc_kernels", rule) == []


def test_engine_imports_no_pipeline_or_app():
    def rule(path, mod):
        return "the engine imports nothing above it" if _top(mod) in ("pipelines", "app", "streamlit") else None

    assert _violations("engine", rule) == []


def test_pipelines_never_import_the_app_or_each_other():
    def rule(path, mod):
        if _top(mod) in ("app", "streamlit"):
            return "pipelines never import the app or UI packages"
        parts = mod.split(".")
        if parts[0] != "pipelines" or len(parts) < 2:
            return None
        own = path.relative_to(ROOT / "pipelines").parts
        if parts[1] in PIPELINES and (len(own) < 2 or own[0] != parts[1]):
            return "a pipeline (or shared code) imports another pipeline"
        return None

    assert _violations("pipelines", rule) == []


def _engine_public_names() -> set[str]:
    """The names in engine/__init__.py's __all__ (`from engine import X` reads as module engine.X)."""
    tree = ast.parse((ROOT / "engine" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return {ast.literal_eval(e) for e in node.value.elts}
    return set()


def test_shared_pipeline_code_imports_only_the_engine_interface():
    """documents/, text/ and llm/ stand under every pipeline: they may use the engine's public API and
    its error and interface types, not its internals."""

    def rule(path, mod):
        rel = path.relative_to(ROOT / "pipelines").parts
        if rel[0] not in ("documents", "text", "llm") or _top(mod) != "engine":
            return None
        if mod in ("engine", "engine.errors", "engine.fallback", "engine.fallback.tools"):
            return None
        return None if mod.removeprefix("engine.") in _engine_public_names() else "engine internals"

    assert _violations("pipelines", rule) == []


@pytest.mark.parametrize("room", ["app", "streamlit_app.py"])
def test_app_imports_pipelines_through_their_public_packages(room):
    def rule(path, mod):
        parts = mod.split(".")
        if parts[0] != "pipelines" or len(parts) < 3:
            return None
        if parts[1] in SHARED:
            return None
        return "the app imports a pipeline's package (its __init__), not its modules"

    assert _violations(room, rule) == []


def test_the_reader_sees_nested_and_relative_imports(tmp_path):
    """Imports inside functions and relative ones are found (so the rules above can fail)."""
    src = tmp_path / "probe.py"
    src.write_text("def f():\n    from pipelines.medical import MedicalPipeline\nfrom ..patents import x\n"
                   "from pipelines import reports\n")
    found = _imports(src, package=("pipelines", "contracts"))
    assert (2, "pipelines.medical") in found
    assert (3, "pipelines.patents") in found
    assert (4, "pipelines.reports") in found


@pytest.mark.parametrize("room", ["app", "pipelines", "engine", "longdoc_kernels", "streamlit_app.py"])
def test_the_product_imports_no_benchmark_or_test_code(room):
    def rule(path, mod):
        return "benchmarks/ and tests/ are tools, not product" if _top(mod) in ("benchmarks", "tests") else None

    assert _violations(room, rule) == []
