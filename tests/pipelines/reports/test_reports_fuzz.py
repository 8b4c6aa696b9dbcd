"""Property test: any mix of labels, numbers, ranges, deictic and chained phrases, citations and
headings (plain text input) analyses without error, every span points into the text, every
mention's targets exist, and the export is the same on a second run."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.export import to_json
from pipelines.documents import Document
from pipelines.reports import analyse_document

TOKENS = [
    "Figure", "Fig.", "Figs.", "Table", "Tables", "Exhibit", "Chart", "图", "表", "图表", "附表", "续表",
    "1", "2", "3", "2-1", "2.3", "II", "A-1", "A1", "3a", " ", " ", "–", "-", " and ", "、", "和", "及", ", ",
    ":", "：", ". ", "\n", "\n\n", "见", "如", "所示", "上图", "下表", "上述图表", "前文所述",
    "the table above", "the following figure", "the figures mentioned earlier", "[1]", "[1–3]", "[2, 5]",
    "(Smith et al., 2020)", "Smith and Lee (2019)", "Section 2.3", "第三节", "第2章", "Eq. (2)", "公式 (2-1)",
    "References\n", "参考文献\n", "[1] A. Smith. Title. 2020.\n", "1 Introduction\n", "2.3 Methods\n",
    "一、概览\n", "in [1]", "of Young et al.", "x = y + 1 (2)\n", "footnote 1",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=80))
def test_any_text_analyses_cleanly(parts):
    text = "".join(parts)
    doc = Document.from_text(text, doc_id="fuzz")
    result = analyse_document(doc)
    ids = {t.id for t in result.targets}
    assert len(ids) == len(result.targets)
    for s in [t.span for t in result.targets] + [m.span for m in result.mentions] + [u.span for u in result.unresolved]:
        assert doc.text[s.char_start:s.char_end] == s.text
    for m in result.mentions:
        assert set(m.targets) <= ids
        assert 0 <= m.hops <= 3 and 0.0 <= m.confidence <= 1.0
    assert set(result.unreferenced_targets) <= ids
    assert to_json(analyse_document(Document.from_text(text, doc_id="fuzz"))) == to_json(result)
