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


def test_tree_shows_what_each_claim_adds_and_the_counts():
    result = analyse_text(load_text("US7472552"))
    text = render_tree_text(result, width=200)
    lines = text.splitlines()
    assert "10 claims, 1 independent, 0 multiple dependent; for USPTO fees: 10 claims, 1 independent" in lines[0]
    assert lines[1].strip("└─ ").startswith("1 [method] A method of controlling an ice maker")
    assert "2 [method] wherein the first and second housing portions have" in text
    assert "The method of claim" not in text
    # the fan assembly's items under "wherein the fan assembly comprises"
    at = next(i for i, line in enumerate(lines) if "· wherein the fan assembly comprises" in line)
    indent = lines[at].index("·")
    assert all(lines[at + k].index("·") > indent for k in (1, 2, 3))
    assert "· mounting hooks" in lines[at + 3]
    dot = to_dot(result)
    assert "wherein the first and second housing" in dot and "The method of claim" not in dot


def test_claim_one_tree_first_and_info_findings_as_notes():
    result = analyse_text(load_text("US7643973"))
    roots = [t.number for t in result.trees]
    assert len(roots) >= 2 and roots[0] == 1
    dot = to_dot(result)
    assert '{ rank=same; "1" -> ' in dot
    text = render_tree_text(analyse_text(load_text("US6981466")), width=200)
    assert "ℹ antecedent_basis_inherent" in text and "⚠ antecedent_basis_inherent" not in text


def test_counts_line_names_fees_due():
    from app.render.patents import counts_line

    text = "1. A lid.\n" + "".join(f"{n}. The lid of claim 1, wherein x{n}.\n" for n in range(2, 16))
    text += "".join(f"{n}. The lid of any of claims 5-15, wherein y{n}.\n" for n in range(16, 28))
    line = counts_line(analyse_text(text))
    assert line == ("27 claims, 1 independent, 12 multiple dependent; for USPTO fees: 147 claims, 1 independent "
                    "(127 over 20, multiple dependent claim fee)")
