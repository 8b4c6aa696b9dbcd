"""The reports pipeline on the real PDFs of the corpus (copied to tests/fixtures/reports/ with their
truth): target detection F1 by (kind, number, page), mention-to-target accuracy, the span
invariant, determinism, hyperlinks as free ground truth, and the margin-column reading order."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from app.export import to_json
from benchmarks.eval.reports_evaluate import score
from pipelines.documents import load_document
from pipelines.reports import ReportResult, analyse_document
from pipelines.reports.layout import build_layout

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "reports"
NAMES = ["debuyl", "eglen", "zh-sustechthesis-example"]


@cache
def analysed(name: str):
    pdf = FIX / f"{name}.pdf"
    doc = load_document(pdf)
    return doc, analyse_document(doc, pdf.read_bytes())


def truth(name: str) -> dict:
    return json.loads((FIX / f"{name}.truth.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", NAMES)
def test_targets_and_mentions_against_truth(name):
    doc, result = analysed(name)
    s = score(result, truth(name))
    t, m = s["targets"], s["mentions"]
    print(f"{name}: target F1 {t['f1']:.3f} (P {t['precision']:.3f}, R {t['recall']:.3f}); "
          f"mention accuracy {m['correct']}/{m['truth']} = {m['accuracy']:.3f}, strict {m['strict_accuracy']:.3f}")
    wrong = [r for r in s["rows"] if not r["correct"]]
    assert t["f1"] >= 0.95, t
    assert m["accuracy"] >= 0.95, wrong


@pytest.mark.parametrize("name", NAMES)
def test_every_span_points_into_the_text(name):
    doc, result = analysed(name)
    spans = [t.span for t in result.targets] + [m.span for m in result.mentions] + [u.span for u in result.unresolved]
    assert spans
    for s in spans:
        assert doc.text[s.char_start:s.char_end] == s.text
        assert s.page == doc.page_of(s.char_start)
    for m in result.mentions:
        assert m.text == m.span.text and m.page == m.span.page
        assert set(m.targets) <= {t.id for t in result.targets}
        assert 0.0 <= m.confidence <= 1.0 and m.reason
    ids = [t.id for t in result.targets]
    assert len(ids) == len(set(ids))


def test_external_mentions_are_not_linked():
    _, result = analysed("eglen")
    for m in result.mentions:
        if m.text.lower() in ("figure 1", "figure 2", "figure 3", "table 2"):
            assert m.targets == [] and m.resolution == "external", m
    table1 = [m for m in result.mentions if m.text == "Table 1"]
    assert table1 and table1[0].targets == ["table-1"]


@pytest.mark.parametrize("name", ["debuyl", "zh-sustechthesis-example"])
def test_hyperlinks_as_free_ground_truth(name):
    """hyperref links over mentions point at the target's page: the resolution must agree with most
    of them without having used them (confidence aside, the targets come from the numbers)."""
    doc, result = analysed(name)
    layout = build_layout(doc, (FIX / f"{name}.pdf").read_bytes())
    pages = {t.id: t.page for t in result.targets}
    agree = total = 0
    for m in result.mentions:
        if m.kind not in ("figure", "table") or not m.targets or m.bbox is None:
            continue
        links = [lk for lk in layout.pages[m.page].links if lk.bbox[0] < m.bbox[2] and m.bbox[0] < lk.bbox[2] and lk.bbox[1] < m.bbox[3] and m.bbox[1] < lk.bbox[3]]
        if not links:
            continue
        total += 1
        agree += any(lk.dest_page in {pages[t] for t in m.targets} for lk in links)
    layout.close()
    assert total >= 5
    print(f"{name}: {agree}/{total} linked mentions agree with the PDF's internal links")
    # LaTeX puts a longtable's anchor on the page before the table, so a few may disagree
    assert agree / total >= 0.8


def test_margin_column_is_not_interleaved_with_the_body():
    doc, _ = analysed("debuyl")
    lines = doc.text.splitlines()
    for marker in ("Edited by", "Reviewed by", "Received", "Published", "Rajesh Singh"):
        line = next(x for x in lines if marker in x)
        assert len(line) < 40, line  # the margin entry stands alone, no body text beside it
    assert "In the present work, we replicate the results of Young et al. 2001" in doc.text


def test_tables_parsed_and_described():
    _, result = analysed("zh-sustechthesis-example")
    t = next(t for t in result.targets if t.id == "table-2-1")
    assert t.rows and t.rows[0] == ["文件名", "描述"]
    assert "文件名" in t.description and "thuthesis.dtx" in t.description
    t23 = next(t for t in result.targets if t.id == "table-2-3")
    assert t23.continued_on == [13]
    fig = next(t for t in result.targets if t.id == "figure-2-1")
    assert fig.bbox and fig.bbox[3] - fig.bbox[1] > 100  # the drawn figure, not just its caption line


def test_export_is_deterministic_and_round_trips():
    pdf = FIX / "eglen.pdf"
    doc = load_document(pdf)
    a = to_json(analyse_document(doc, pdf.read_bytes()))
    b = to_json(analyse_document(load_document(pdf), pdf.read_bytes()))
    assert a == b
    back = ReportResult.model_validate_json(a)
    assert to_json(back) == a
    data = json.loads(a)
    for key in ("schema_version", "document", "targets", "mentions", "unresolved", "unreferenced_targets", "pipeline", "input_sha256"):
        assert key in data
    for key in ("id", "kind", "label", "number", "caption", "description", "page", "bbox", "span"):
        assert key in data["targets"][0]
    for key in ("text", "span", "page", "bbox", "kind", "targets", "hops", "confidence", "reason"):
        assert key in data["mentions"][0]


def test_registry_and_batch_input_use_the_pdf():
    from pipelines.base import PipelineInput
    from pipelines.registry import get_pipeline

    pipe = get_pipeline("reports")
    result = pipe.run_input(PipelineInput("eglen.pdf", (FIX / "eglen.pdf",)))
    assert result.pipeline == "reports" and len(result.input_sha256) == 64
    assert result.stats["internal_links"] > 0  # the PDF bytes were read, not only the text
    assert "figures/tables" in pipe.summary_line(result)


@pytest.mark.parametrize("name", NAMES)
def test_object_boxes_hold_their_caption_and_do_not_overlap(name):
    _, result = analysed(name)
    ours = {(t.kind, t.number): t for t in result.targets if t.kind in ("figure", "table")}
    for tt in truth(name)["targets"]:
        t = ours[(tt["kind"], tt["number"])]
        cx0, ctop, cx1, cbottom = tt["caption_bbox"]
        x0, top, x1, bottom = t.bbox
        assert x0 - 2 <= cx0 and top - 2 <= ctop and cx1 <= x1 + 2 and cbottom <= bottom + 2, (t.id, t.bbox, tt["caption_bbox"])
        assert bottom - top > 3 * (cbottom - ctop), t.id  # more than the caption: the drawing or the rows
    floats = list(ours.values())
    for a in floats:
        for b in floats:
            if a.id < b.id and a.page == b.page:
                inter_w = min(a.bbox[2], b.bbox[2]) - max(a.bbox[0], b.bbox[0])
                inter_h = min(a.bbox[3], b.bbox[3]) - max(a.bbox[1], b.bbox[1])
                assert inter_w <= 0 or inter_h <= 2, (a.id, a.bbox, b.id, b.bbox)
