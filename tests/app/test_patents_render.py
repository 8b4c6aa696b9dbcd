"""The claim-tree drawings of app.render.patents: the terminal tree (rich and plain text) and Graphviz DOT."""

from __future__ import annotations

from app.render.patents import render_tree, render_tree_text, to_dot
from pipelines.patents import analyse_text
from tests.pipelines.patents.helpers import load_text


def test_tree_renderings():
    result = analyse_text(load_text("US7156074"))
    text = render_tree_text(result)
    assert "1 [apparatus] A throttle apparatus" in text and "5 [apparatus]" in text
    assert render_tree(result) is not None
    dot = to_dot(result)
    assert dot.startswith("digraph claims {") and '"2" -> "5";' in dot and '"3" -> "5";' in dot
    assert dot.count("->") == 6


def test_renderings_mark_findings_and_cancelled():
    result = analyse_text("1. A lid.\n2. (Canceled)\n3. The lid of claim 2, wherein x.\n")
    text = render_tree_text(result)
    assert "reference_to_cancelled" in text and "cancelled: 2" in text
    dot = to_dot(result)
    assert 'color="#d93025"' in dot and "dashed" in dot
