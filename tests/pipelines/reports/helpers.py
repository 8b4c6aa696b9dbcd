"""Report PDFs for the reports tests, drawn with reportlab so the truth is known by construction.

- `make_zh_broker`: a Chinese broker-style report: running header and footer on every page,
  图1-图3 drawn as bar charts (rectangles, axis labels, legend) with captions under them, 表1 as a
  ruled table with its caption above, 附表2 on the last page, a two-column page, a footnote with a
  superscript marker, and the mentions 见图1 / 如图1所示 / 上图 / 下表 / 参见上文图1及附表2 / 图1-图3 /
  图 1 和图 2 / 上述图表 / 前文所述 / 第三节.
- `make_zh_exhibits`: a report numbering everything 图表N (图表1-图表2, 见图表3, 上述图表).
- `make_en_paper`: an English paper with Figs. 2 and 3, Figures 2–4, Table 2 below, the table
  above, the figures mentioned earlier, Figure 8 in [1], [1–4], [2, 5], (Smith et al., 2020),
  Section 2.3, a footnote, and a References list.
- `make_margin_column`, `make_table_page`, `make_two_columns`: reading-order cases.
"""

from __future__ import annotations

from pathlib import Path

from reportlab.lib.pagesizes import A4
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.cidfonts import UnicodeCIDFont
from reportlab.pdfgen import canvas

W, H = A4
CJK = "STSong-Light"


class Pen:
    """A canvas with top-left coordinates (like pdfplumber) and a CJK-aware font switch."""

    def __init__(self, path: Path, title: str = "fixture"):
        if CJK not in pdfmetrics.getRegisteredFontNames():
            pdfmetrics.registerFont(UnicodeCIDFont(CJK))
        self.c = canvas.Canvas(str(path), pagesize=A4, invariant=1)
        self.c.setTitle(title)
        self.page = 1

    def text(self, x: float, top: float, s: str, size: float = 10.5, font: str | None = None) -> None:
        cjk = any(ord(ch) > 0x2E80 for ch in s)
        self.c.setFont(font or (CJK if cjk else "Helvetica"), size)
        self.c.drawString(x, H - top - size, s)

    def centred(self, top: float, s: str, size: float = 10.5, x0: float = 0, x1: float = W) -> None:
        cjk = any(ord(ch) > 0x2E80 for ch in s)
        font = CJK if cjk else "Helvetica"
        width = pdfmetrics.stringWidth(s, font, size)
        self.text((x0 + x1 - width) / 2, top, s, size)

    def rect(self, x0: float, top: float, x1: float, bottom: float, fill: bool = False) -> None:
        self.c.rect(x0, H - bottom, x1 - x0, bottom - top, stroke=1, fill=1 if fill else 0)

    def hline(self, x0: float, x1: float, y: float) -> None:
        self.c.line(x0, H - y, x1, H - y)

    def vline(self, x: float, y0: float, y1: float) -> None:
        self.c.line(x, H - y0, x, H - y1)

    def furniture(self, header: str, footer: str) -> None:
        self.text(72, 30, header, 9)
        self.hline(72, W - 72, 44)
        self.centred(H - 40, footer.format(page=self.page), 9)

    def new_page(self) -> None:
        self.c.showPage()
        self.page += 1

    def save(self) -> None:
        self.c.save()


def bar_chart(p: Pen, x0: float, top: float, x1: float, bottom: float, values: list[float], labels: list[str], legend: str, ylabel: str) -> None:
    """Axes, bars, tick labels under the axis, a y-axis label and a legend."""
    p.hline(x0 + 30, x1, bottom - 20)
    p.vline(x0 + 30, top, bottom - 20)
    n = len(values)
    span = (x1 - x0 - 40) / n
    top_v = max(values)
    for i, (v, lab) in enumerate(zip(values, labels, strict=True)):
        bx = x0 + 40 + i * span
        h = (bottom - 20 - top - 20) * v / top_v
        p.c.setFillGray(0.6)
        p.rect(bx, bottom - 20 - h, bx + span * 0.6, bottom - 20, fill=True)
        p.c.setFillGray(0)
        p.text(bx, bottom - 16, lab, 8)
    p.text(x0, top, ylabel, 8)
    p.text(x1 - 70, top, legend, 8)


def ruled_table(p: Pen, x0: float, top: float, widths: list[float], rows: list[list[str]], row_h: float = 18) -> float:
    """A fully ruled table; returns its bottom."""
    x_edges = [x0]
    for w in widths:
        x_edges.append(x_edges[-1] + w)
    bottom = top + row_h * len(rows)
    for r in range(len(rows) + 1):
        p.hline(x_edges[0], x_edges[-1], top + r * row_h)
    for x in x_edges:
        p.vline(x, top, bottom)
    for r, row in enumerate(rows):
        for k, cell in enumerate(row):
            p.text(x_edges[k] + 4, top + r * row_h + 4, cell, 9)
    return bottom


HEADER = "华信证券 | 新能源行业深度报告"
FOOTER = "请务必阅读正文之后的免责声明部分    第 {page} 页"


def make_zh_broker(path: Path) -> Path:
    """The Chinese broker fixture (4 pages). Truth in `ZH_BROKER_TRUTH`."""
    p = Pen(path, "zh broker fixture")
    # page 1: one column, figure 1 with caption under it, a footnote
    p.furniture(HEADER, FOOTER)
    p.centred(70, "新能源汽车行业深度报告：渗透率持续提升", 16)
    p.text(72, 110, "一、行业概览", 13)
    lines = [
        "2023年行业收入增长显著，见图1。销量数据来自行业协会统计口径",
        "如图1所示，行业收入在三年内翻倍，增速高于市场预期。",
    ]
    for i, s in enumerate(lines):
        p.text(72, 135 + i * 20, s)
    # a superscript footnote marker after 统计口径
    marker_x = 72 + pdfmetrics.stringWidth(lines[0], CJK, 10.5)
    p.text(marker_x + 1, 133, "1", 6)
    bar_chart(p, 150, 190, 440, 380, [3.0, 4.5, 6.2], ["2021", "2022", "2023"], "营业收入", "收入（亿元）")
    p.centred(392, "图1：行业收入规模（亿元）", 10)
    p.text(72, 425, "上图显示，收入规模逐年扩大，其中2023年增幅最大。")
    p.text(72, 445, "本报告第三节讨论竞争格局，附录给出公司财务数据。")
    p.hline(72, 200, 740)
    p.text(72, 748, "1 数据来源：中国汽车工业协会，经本公司整理。", 8)
    # page 2: two columns: figures 2 and 3 side by side; mentions
    p.new_page()
    p.furniture(HEADER, FOOTER)
    p.text(72, 70, "二、竞争格局", 13)
    left = [
        "行业集中度持续提升，参见上文图1及附表2。",
        "头部企业市场份额稳定，图1-图3给出了",
        "收入、销量和利润三个维度的对比。",
        "从图 1 和图 2 可以看出，收入与销量",
        "同步增长，上述图表均来自公司年报。",
        "如前文所述，行业仍处于成长阶段。",
    ]
    right = [
        "利润端的改善更为明显，如图3所示，",
        "毛利率自2021年起逐年回升，龙头",
        "企业的规模效应已经开始显现，下表",
        "列出了主要公司的财务数据，供投资",
        "者参考，其余公司数据见附表2。",
        "我们维持行业推荐评级，详见下文。",
    ]
    for i, s in enumerate(left):
        p.text(72, 100 + i * 18, s)
    for i, s in enumerate(right):
        p.text(310, 100 + i * 18, s)
    bar_chart(p, 72, 230, 280, 380, [120, 180, 260], ["2021", "2022", "2023"], "销量", "销量（万辆）")
    p.centred(392, "图2：行业销量（万辆）", 10, 72, 280)
    bar_chart(p, 310, 230, 523, 380, [8.0, 11.0, 15.5], ["2021", "2022", "2023"], "毛利率", "毛利率（%）")
    p.centred(392, "图3：行业毛利率（%）", 10, 310, 523)
    p.centred(430, "表1：主要公司财务数据（亿元）", 10)
    ruled_table(p, 110, 450, [120, 120, 120], [["公司", "营业收入", "净利润"], ["甲公司", "1200", "85"], ["乙公司", "860", "52"], ["丙公司", "430", "21"]])
    p.text(72, 560, "由上表可知，甲公司的收入规模领先。", 10.5)
    # page 3: section 三 and a mention of section
    p.new_page()
    p.furniture(HEADER, FOOTER)
    p.text(72, 70, "三、投资建议", 13)
    p.text(72, 100, "结合第三节的分析，我们看好龙头企业。风险提示见第四部分。")
    p.text(72, 120, "图2中的销量增速与表1中的收入数据相互印证。")
    # page 4: appendix table 附表2 (caption above), and a 图4 mention with no such figure
    p.new_page()
    p.furniture(HEADER, FOOTER)
    p.text(72, 70, "附录", 13)
    p.centred(100, "附表2：其他公司财务数据（亿元）", 10)
    ruled_table(p, 110, 120, [120, 120, 120], [["公司", "营业收入", "净利润"], ["丁公司", "210", "9"], ["戊公司", "150", "6"]])
    p.text(72, 200, "图4展示的区域分布数据将在后续报告中更新。")
    p.save()
    return path


# (text as printed, page, expected target ids or a resolution)
ZH_BROKER_TRUTH = [
    ("见图1", 1, ["figure-1"]),
    ("如图1所示", 1, ["figure-1"]),
    ("上图", 1, ["figure-1"]),
    ("参见上文图1及附表2", 2, ["figure-1", "table-2"]),
    ("图1-图3", 2, ["figure-1", "figure-2", "figure-3"]),
    ("图 1 和图 2", 2, ["figure-1", "figure-2"]),
    ("上述图表", 2, ["figure-1", "figure-2"]),
    ("如图3所示", 2, ["figure-3"]),
    ("下表", 2, ["table-1"]),
    ("见附表2", 2, ["table-2"]),
    ("上表", 2, ["table-1"]),
    ("图2中", 3, ["figure-2"]),
    ("表1中", 3, ["table-1"]),
]


def make_zh_exhibits(path: Path) -> Path:
    """A report that numbers figures and tables together as 图表N."""
    p = Pen(path, "zh exhibits fixture")
    p.furniture("东方研究所 | 公司点评", "第 {page} 页")
    p.text(72, 70, "公司业绩点评", 14)
    p.text(72, 100, "公司收入结构见图表1，毛利率变化见图表2。")
    # broker style: the title above the chart, the source line under it
    p.text(150, 128, "图表1：公司分季度收入", 10)
    bar_chart(p, 150, 146, 440, 300, [5, 7, 9], ["Q1", "Q2", "Q3"], "收入", "收入（亿元）")
    p.text(150, 304, "资料来源：公司公告，东方研究所", 8)
    p.text(150, 330, "图表2：公司分季度毛利率", 10)
    bar_chart(p, 150, 348, 440, 502, [20, 22, 25], ["Q1", "Q2", "Q3"], "毛利率", "毛利率（%）")
    p.text(150, 506, "资料来源：公司公告，东方研究所", 8)
    p.text(72, 555, "图表1-图表2表明盈利能力改善，上述图表数据来自公司公告。")
    p.new_page()
    p.furniture("东方研究所 | 公司点评", "第 {page} 页")
    p.centred(70, "图表3：盈利预测（百万元）", 10)
    ruled_table(p, 110, 90, [120, 120, 120], [["指标", "2024E", "2025E"], ["营业收入", "3200", "3900"], ["净利润", "410", "520"]])
    p.text(72, 180, "盈利预测见图表3，我们给予买入评级。")
    p.save()
    return path


ZH_EXHIBITS_TRUTH = [
    ("见图表1", 1, ["exhibit-1"]),
    ("见图表2", 1, ["exhibit-2"]),
    ("图表1-图表2", 1, ["exhibit-1", "exhibit-2"]),
    ("上述图表", 1, ["exhibit-1", "exhibit-2"]),
    ("见图表3", 2, ["exhibit-3"]),
]


def make_en_paper(path: Path) -> Path:
    """An English two-page paper with numbered, ranged, deictic, chained and external mentions."""
    p = Pen(path, "en paper fixture")
    p.text(72, 60, "Pair correlations in a toy model", size=15)
    p.text(72, 95, "1 Introduction", 12)
    body = [
        "We study a toy model of clustering [1]. Earlier work [1-4] and reviews [2, 5] show",
        "that clusters form quickly (Smith et al., 2020). Figure 8 in [1] shows the original",
        "result, and Fig. 2 of Young et al. gives a second view. Our Figs. 2 and 3 repeat them.",
        "Section 2.3 gives the method; Figures 2-4 give the results.",
    ]
    for i, s in enumerate(body):
        p.text(72, 120 + i * 16, s)
    mark_x = 72 + pdfmetrics.stringWidth(body[3], "Helvetica", 10.5)
    p.text(mark_x + 1, 166, "1", 6)
    p.text(72, 200, "2 Methods", 12)
    p.text(72, 220, "2.3 Simulation", 11)
    p.text(72, 240, "Particles move at random. Table 1 lists the parameters, and the table below lists them again.")
    p.centred(265, "Table 1: Model parameters.", 10)
    ruled_table(p, 150, 285, [120, 120], [["Parameter", "Value"], ["Diffusion", "0.001"], ["Rate", "0.5"]])
    p.text(72, 350, "The table above was used for every run.")
    bar_chart(p, 150, 380, 440, 560, [1, 3, 2], ["a", "b", "c"], "count", "density")
    p.centred(572, "Figure 1: A snapshot of the particles.", 10)
    p.hline(72, 200, 740)
    p.text(72, 748, "1 The code is available from the authors.", 8)
    p.new_page()
    p.text(72, 60, "3 Results", 12)
    bar_chart(p, 150, 90, 440, 250, [2, 4, 3], ["x", "y", "z"], "pcf", "g(r)")
    p.centred(262, "Figure 2: Pair correlation function.", 10)
    bar_chart(p, 150, 290, 440, 450, [4, 2, 1], ["x", "y", "z"], "decay", "g(t)")
    p.centred(462, "Figure 3: Decay over time.", 10)
    p.text(72, 490, "The figures mentioned earlier agree with theory. Table 2 below is a summary.")
    p.centred(515, "Table 2: Summary of runs.", 10)
    ruled_table(p, 150, 535, [120, 120], [["Run", "Result"], ["A", "ok"], ["B", "ok"]])
    p.text(72, 600, "References", 12)
    refs = [
        "[1] W. R. Young, A. J. Roberts. Reproductive pair correlations. Nature, 2001.",
        "[2] A. Author. A review of clustering. J. Theor. Biol., 2010.",
        "[3] B. Writer. Another paper. Phys. Rev. E, 2012.",
        "[4] C. Person. Yet another. Ecology, 2015.",
        "[5] J. Smith, K. Lee et al. Clusters. Science, 2020.",
    ]
    for i, s in enumerate(refs):
        p.text(72, 625 + i * 15, s, 9)
    p.save()
    return path


EN_PAPER_TRUTH = [
    ("[1]", 1, ["ref-1"]),
    ("[1-4]", 1, ["ref-1", "ref-2", "ref-3", "ref-4"]),
    ("[2, 5]", 1, ["ref-2", "ref-5"]),
    ("(Smith et al., 2020)", 1, ["ref-5"]),
    ("Figure 8", 1, "external"),
    ("Fig. 2", 1, "external"),
    ("Figs. 2 and 3", 1, ["figure-2", "figure-3"]),
    ("Section 2.3", 1, ["section-2.3"]),
    ("Figures 2-4", 1, "partial"),  # figure 4 does not exist: 2 and 3 linked, 4 reported missing
    ("Table 1", 1, ["table-1"]),
    ("the table below", 1, ["table-1"]),
    ("The table above", 1, ["table-1"]),
    ("The figures mentioned earlier", 2, ["figure-2", "figure-3"]),
    ("Table 2", 2, ["table-2"]),
]


def make_margin_column(path: Path) -> Path:
    """A page with a narrow left margin column (journal metadata) beside full-width body text."""
    p = Pen(path, "margin column")
    p.text(130, 60, "A Title That Spans The Body Width Of The Page", 14)
    margin = ["Edited by", "Jane Doe", "Reviewed by", "John Roe", "Received", "1 May 2024", "Published", "9 June 2024"]
    for i, s in enumerate(margin):
        p.text(40, 120 + i * 11, s, 8)
    body = [f"Body line {k:02d} of the introduction runs across the whole column width here." for k in range(1, 21)]
    for i, s in enumerate(body):
        p.text(130, 115 + i * 13, s, 10)
    p.save()
    return path


def make_two_columns(path: Path) -> Path:
    """A two-column page with a full-width title and a full-width line at the bottom."""
    p = Pen(path, "two columns")
    p.centred(60, "Two Column Article Title", 14)
    for i in range(24):
        p.text(72, 100 + i * 13, f"Left column sentence number {i + 1:02d} goes on.", 9.5)
        p.text(310, 100 + i * 13, f"Right column sentence number {i + 1:02d} goes on.", 9.5)
    p.text(72, 440, "A closing full-width line that crosses the gutter between both of the columns above.", 9.5)
    p.save()
    return path


def make_table_page(path: Path) -> Path:
    """A short page that is mostly a two-column table: it must read row by row."""
    p = Pen(path, "table page")
    p.centred(80, "Table 1: Files of the template.", 10)
    rows = [["name", "description"], ["alpha.cls", "the class file"], ["beta.sty", "the style file"], ["gamma.bst", "bibliography style"],
            ["delta.bbx", "biblatex style"], ["epsilon.cbx", "citation style"], ["zeta.def", "definitions"], ["eta.cfg", "configuration"]]
    for i, (a, b) in enumerate(rows):
        p.text(170, 110 + i * 22, a, 10)
        p.text(300, 110 + i * 22, b, 10)
    p.save()
    return path


def make_image_only(path: Path) -> Path:
    """A PDF with a drawing and no text layer (what a scan looks like to a text extractor)."""
    p = Pen(path, "scan")
    p.rect(100, 100, 400, 400, fill=True)
    p.save()
    return path


def make_linked_duplicates(path: Path) -> Path:
    """Two captions 'Figure 1' (main text, page 1; appendix, page 3); on page 2 one mention with an
    internal link to page 3 and one without any link. Page 4 is a drawing without text."""
    p = Pen(path, "links")
    p.c.bookmarkPage("p1")
    bar_chart(p, 150, 80, 440, 250, [1, 2, 3], ["a", "b", "c"], "series", "value")
    p.centred(262, "Figure 1: Main result.", 10)
    p.new_page()
    p.text(72, 80, "The appendix repeats Figure 1 with more data.")
    p.text(72, 100, "Compare Figure 1 with the text; see also Figure 5 for the map.")
    x0 = 72 + pdfmetrics.stringWidth("The appendix repeats ", "Helvetica", 10.5)
    x1 = x0 + pdfmetrics.stringWidth("Figure 1", "Helvetica", 10.5)
    p.c.linkRect("", "p3", (x0, H - 80 - 12, x1, H - 80), relative=0)
    p.new_page()
    p.c.bookmarkPage("p3")
    p.text(72, 60, "Appendix", 12)
    bar_chart(p, 150, 80, 440, 250, [3, 2, 1], ["a", "b", "c"], "series", "value")
    p.centred(262, "Figure 1: Appendix result.", 10)
    p.new_page()
    p.rect(100, 100, 400, 400, fill=True)
    p.save()
    return path


def make_list_of_figures(path: Path) -> Path:
    """Page 1: a list of figures (entries stacked, no dot leaders); pages 2-3: the figures."""
    p = Pen(path, "lof")
    p.text(72, 60, "List of Figures", 14)
    for i, s in enumerate(["Figure 1: Revenue growth   2", "Figure 2: Margin by year   3"]):
        p.text(72, 100 + i * 14, s, 10.5)
    p.new_page()
    p.text(72, 60, "Revenue grew fast, as Figure 1 shows.")
    bar_chart(p, 150, 90, 440, 260, [1, 2, 3], ["2021", "2022", "2023"], "revenue", "CNY bn")
    p.centred(272, "Figure 1: Revenue growth", 10)
    p.new_page()
    p.text(72, 60, "Margins improved (Figure 2).")
    bar_chart(p, 150, 90, 440, 260, [3, 4, 5], ["2021", "2022", "2023"], "margin", "%")
    p.centred(272, "Figure 2: Margin by year", 10)
    p.save()
    return path
