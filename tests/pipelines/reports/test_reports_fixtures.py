"""The reports pipeline on PDFs drawn with reportlab (truth by construction): a Chinese broker
report (running header/footer, a two-column page, 图/表/附表, a footnote, deictic and chained
mentions), a 图表-numbered report, an English paper (ranges, externals, citations, sections)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

import tests.pipelines.reports.helpers as H
from pipelines.documents import Document, load_document
from pipelines.reports import analyse_document
from pipelines.reports.floats import parse_caption_start


@cache
def analysed(maker: str, tmp: str):
    path = Path(tmp) / f"{maker}.pdf"
    getattr(H, maker)(path)
    doc = load_document(path)
    return doc, analyse_document(doc, path.read_bytes())


@pytest.fixture(scope="module")
def tmpdir_str(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("reports"))


def phrase_span(doc: Document, phrase: str, page: int) -> tuple[int, int]:
    """Offsets of the first occurrence of `phrase` on `page`, whitespace ignored."""
    pg = doc.pages[page - 1]
    norm = re.sub(r"\s+", "", phrase)
    seg = doc.text[pg.char_start:pg.char_end]
    # find the phrase ignoring whitespace differences
    squeezed, index = [], []
    for k, ch in enumerate(seg):
        if not ch.isspace():
            squeezed.append(ch)
            index.append(k)
    pos = "".join(squeezed).find(norm)
    assert pos >= 0, f"{phrase!r} not on page {page}"
    return pg.char_start + index[pos], pg.char_start + index[pos + len(norm) - 1] + 1


def mentions_in(doc: Document, result, phrase: str, page: int) -> list:
    start, end = phrase_span(doc, phrase, page)
    hits = [m for m in result.mentions if m.span.char_start < end and start < m.span.char_end]
    assert hits, f"no mention found in {phrase!r}"
    return hits


def mention_at(doc: Document, result, phrase: str, page: int):
    """The first mention inside the first occurrence of `phrase` on `page`."""
    return mentions_in(doc, result, phrase, page)[0]


def targets_in(doc: Document, result, phrase: str, page: int) -> list[str]:
    """Targets of all mentions inside a phrase ("参见上文图1及附表2" holds two mentions)."""
    return sorted({t for m in mentions_in(doc, result, phrase, page) for t in m.targets})


CASES = [("make_zh_broker", H.ZH_BROKER_TRUTH), ("make_zh_exhibits", H.ZH_EXHIBITS_TRUTH), ("make_en_paper", H.EN_PAPER_TRUTH)]


@pytest.mark.parametrize("maker,truth", CASES, ids=[c[0] for c in CASES])
def test_fixture_mentions_resolve(maker, truth, tmpdir_str):
    doc, result = analysed(maker, tmpdir_str)
    wrong = []
    for phrase, page, want in truth:
        m = mention_at(doc, result, phrase, page)
        if want == "external":
            ok = m.resolution == "external" and not m.targets
        elif want == "partial":
            ok = m.targets == ["figure-2", "figure-3"] and "not found" in m.reason
        else:
            ok = targets_in(doc, result, phrase, page) == sorted(want) and m.resolution == "internal"
        if not ok:
            wrong.append((phrase, want, m.targets, m.resolution, m.reason))
    print(f"{maker}: {len(truth) - len(wrong)}/{len(truth)} mentions right")
    assert not wrong


def test_zh_broker_layout(tmpdir_str):
    doc, result = analysed("make_zh_broker", tmpdir_str)
    # running header and footer are furniture, not text
    assert "华信证券" not in doc.text and "免责声明" not in doc.text
    kinds = {f.kind for f in doc.furniture}
    assert {"header"} <= kinds and ({"footer"} & kinds or {"page_number"} & kinds)
    # the two-column page reads the left column before the right one
    assert doc.text.index("行业集中度持续提升") < doc.text.index("如前文所述") < doc.text.index("利润端的改善更为明显")
    ids = {t.id: t for t in result.targets}
    assert {"figure-1", "figure-2", "figure-3", "table-1", "table-2"} <= set(ids)
    # object boxes cover the drawn chart, not only the caption
    f1 = ids["figure-1"]
    assert f1.bbox[1] < 200 and f1.bbox[3] > 390 and f1.page == 1
    assert "收入（亿元）" in f1.description
    assert ids["figure-2"].bbox[2] < 300 < ids["figure-3"].bbox[0]  # side-by-side figures kept apart
    t1 = ids["table-1"]
    assert t1.rows[0] == ["公司", "营业收入", "净利润"] and t1.rows[1] == ["甲公司", "1200", "85"]
    assert "Columns: 公司 | 营业收入 | 净利润" in t1.description
    # footnote and its superscript marker
    notes = [t for t in result.targets if t.kind == "footnote"]
    assert len(notes) == 1 and "数据来源" in notes[0].caption
    marks = [m for m in result.mentions if m.kind == "footnote"]
    assert marks and marks[0].targets == [notes[0].id]
    # sections: 第三节 -> 三、投资建议
    m = mention_at(doc, result, "第三节讨论", 1)
    assert m.targets == ["section-cn3"]
    # chains: 前文所述 follows 上述图表, two hops, low confidence
    chain = mention_at(doc, result, "前文所述", 2)
    assert chain.kind == "chain" and chain.hops == 2 and chain.confidence < 0.5
    # 图4 does not exist: unresolved with the reason
    m4 = mention_at(doc, result, "图4展示", 4)
    assert m4.resolution == "unresolved"
    assert any(u.text == m4.text and u.why == "no_such_number" for u in result.unresolved)


def test_exhibit_titles_above_their_charts(tmpdir_str):
    """Broker layout: '图表1：…' over the chart, '资料来源' under it; each box takes its own chart."""
    _, result = analysed("make_zh_exhibits", tmpdir_str)
    ids = {t.id: t for t in result.targets}
    e1, e2 = ids["exhibit-1"], ids["exhibit-2"]
    assert e1.bbox[1] < 135 and 290 < e1.bbox[3] < 330, e1.bbox
    assert e2.bbox[1] > 320 and e2.bbox[3] > 490, e2.bbox
    assert "收入（亿元）" in e1.description and "毛利率（%）" in e2.description
    assert ids["exhibit-3"].rows[0] == ["指标", "2024E", "2025E"]


def test_en_paper_structure(tmpdir_str):
    doc, result = analysed("make_en_paper", tmpdir_str)
    ids = {t.id for t in result.targets}
    assert {"ref-1", "ref-2", "ref-3", "ref-4", "ref-5", "section-2.3", "table-1", "table-2"} <= ids
    assert "figure-1" in result.unreferenced_targets  # nothing mentions figure 1
    marks = [m for m in result.mentions if m.kind == "footnote"]
    assert len(marks) == 1 and marks[0].targets[0].startswith("footnote-")


def test_text_only_input_still_finds_captions_and_mentions():
    text = (
        "Results are in Table II and Fig. 3a; Exhibit 4 and Chart 2 summarise them.\n\n"
        "Fig. 3: Growth over time.\n\n"
        "Table II. Parameters of the model.\n\n"
        "Exhibit 4: Revenue by segment.\n\n"
        "Chart 2 | Margins.\n\n"
        "如图 2-1 所示，见续表 2-1。\n\n"
        "图 2-1 示例图片\n\n"
        "表 2-1 三线表示例\n\n"
        "续表 2-1 三线表示例\n"
    )
    doc = Document.from_text(text, doc_id="t")
    result = analyse_document(doc)
    ids = {t.id for t in result.targets}
    assert {"figure-3", "table-ii", "exhibit-4", "chart-2", "figure-2-1", "table-2-1"} <= ids
    first = result.mentions[0]
    assert first.text == "Table II" and first.targets == ["table-ii"]
    fig = next(m for m in result.mentions if m.text.startswith("Fig. 3"))
    assert fig.targets == ["figure-3"] and fig.panel == "a"
    assert not any(m.span.char_start == text.index("Fig. 3:") for m in result.mentions)  # a caption is no mention
    for s in [t.span for t in result.targets] + [m.span for m in result.mentions]:
        assert doc.text[s.char_start:s.char_end] == s.text


@pytest.mark.parametrize(
    "line,expect",
    [
        ("Figure 3: Growth", ("figure", "3")),
        ("Fig. 3a. Panels", ("figure", "3")),
        ("Table II. Parameters", ("table", "II")),
        ("图 2\u00ad1 示例图片", ("figure", "2-1")),
        ("图1-3 收入", ("figure", "1-3")),
        ("图表5：盈利预测", ("exhibit", "5")),
        ("续表 2-3 实验数据", ("table", "2-3")),
        ("Exhibit 4: Revenue", ("exhibit", "4")),
        ("表A.1 附录表", ("table", "A-1")),
    ],
)
def test_caption_labels_parse(line, expect):
    parsed = parse_caption_start(line)
    assert parsed is not None and (parsed[0], parsed[2]) == expect


def test_chinese_false_friends_are_not_mentions():
    doc = Document.from_text("他代表2个部门发表3篇文章，市场上表现良好，下表示例。\n\n表 2 数据\n", doc_id="z")
    result = analyse_document(doc)
    texts = [m.text for m in result.mentions]
    assert "表2" not in texts and "表3" not in texts and "上表" not in texts and "下表" not in texts


def test_hyperlink_picks_between_same_numbered_targets_and_scans_are_named(tmp_path):
    path = H.make_linked_duplicates(tmp_path / "links.pdf")
    doc = load_document(path)
    result = analyse_document(doc, path.read_bytes())
    figs = sorted(t.id for t in result.targets if t.kind == "figure")
    assert len(figs) == 2  # two captions 'Figure 1', on pages 1 and 3
    linked = mention_at(doc, result, "repeats Figure 1", 2)
    on_p3 = next(t.id for t in result.targets if t.kind == "figure" and t.page == 3)
    assert linked.targets == [on_p3] and "hyperlink" in linked.reason
    plain = mention_at(doc, result, "Compare Figure 1", 2)
    assert plain.resolution == "ambiguous" and plain.targets == []
    assert any(u.text == "Figure 1" and u.why == "ambiguous" and len(u.candidates) == 2 for u in result.unresolved)
    # page 4 has no text layer: a missing figure may be there, and the reason says so
    assert doc.metadata.get("pages_without_text") == "4"
    five = mention_at(doc, result, "Figure 5", 2)
    assert five.resolution == "unresolved"
    assert any(u.text == "Figure 5" and u.why == "no_text_layer" and "4" in u.reason for u in result.unresolved)


def test_external_wordings():
    text = (
        "We show results.\n\nFigure 3: Our result.\n\n"
        "Figure 3 in the original shows more; Figure 3 of the paper by Smith differs; "
        "Figure 3 in this paper is ours; see Figure 3 of Ref. 4; Figure 1b from Lamichhane et al. "
        "and Fig. 2 of Young et al. too; the original Figure 3 is reproduced here.\n"
    )
    result = analyse_document(Document.from_text(text, doc_id="x"))
    got = [(m.text, m.resolution) for m in result.mentions]
    assert got == [
        ("Figure 3", "external"), ("Figure 3", "external"), ("Figure 3", "internal"), ("Figure 3", "external"),
        ("Figure 1b", "external"), ("Fig. 2", "external"), ("Figure 3", "internal"),
    ], got


def test_chinese_captions_versus_sentences_starting_with_a_label():
    text = "正文。\n\n图表1：中国GDP增速\n\n图2 中国出口结构\n\n图3中可以看出出口下降，图2的数据。\n\n表1 在不同温度下的结果\n"
    result = analyse_document(Document.from_text(text, doc_id="zh"))
    assert {t.id: t.caption for t in result.targets} == {
        "exhibit-1": "中国GDP增速", "figure-2": "中国出口结构", "table-1": "在不同温度下的结果"}
    assert [(m.text, m.targets, m.resolution) for m in result.mentions] == [
        ("图3", [], "unresolved"), ("图2", ["figure-2"], "internal")]


def test_docx_report_captions_and_table_rows(tmp_path):
    import docx

    d = docx.Document()
    d.add_paragraph("Introduction. See Figure 1 and Table 1 below; the table below too.")
    d.add_paragraph("Figure 1: A chart.")
    d.add_paragraph("Table 1: Numbers.")
    t = d.add_table(rows=2, cols=2)
    for (r, c), v in {(0, 0): "a", (0, 1): "b", (1, 0): "1", (1, 1): "2"}.items():
        t.cell(r, c).text = v
    path = tmp_path / "r.docx"
    d.save(path)
    result = analyse_document(load_document(path))
    ids = {t.id: t for t in result.targets}
    assert ids["figure-1"].caption == "A chart." and ids["table-1"].rows == [["a", "b"], ["1", "2"]]
    assert [(m.text, m.targets) for m in result.mentions] == [
        ("Figure 1", ["figure-1"]), ("Table 1", ["table-1"]), ("the table below", ["table-1"])]


def test_list_of_figures_entries_are_not_captions(tmp_path):
    path = H.make_list_of_figures(tmp_path / "lof.pdf")
    doc = load_document(path)
    result = analyse_document(doc, path.read_bytes())
    figs = {t.id: t.page for t in result.targets if t.kind == "figure"}
    assert figs == {"figure-1": 2, "figure-2": 3}
    assert mention_at(doc, result, "as Figure 1 shows", 2).targets == ["figure-1"]
    assert mention_at(doc, result, "(Figure 2)", 3).targets == ["figure-2"]
