"""Structure anchors: numbering hierarchies in English and Chinese, headings, recitals, definitions,
schedules, signature blocks, cross-references, tables of contents, and the partition invariant."""

from __future__ import annotations

from pipelines.contracts.structure import parse_structure
from pipelines.documents import Document


def anchors(text: str) -> list[str]:
    return [c.anchor for c in parse_structure(Document.from_text(text)).clauses]


def check_partition(text: str) -> None:
    st = parse_structure(Document.from_text(text))
    pos = 0
    for c in st.clauses:
        assert c.start >= pos and text[pos:c.start].strip() == "", (c.anchor, text[pos:c.start])
        assert text[c.start:c.end] == text[c.start:c.end].strip() and c.end > c.start
        pos = c.end
    assert text[pos:].strip() == ""


ZH_CONTRACT = """房屋租赁合同

甲方：北京某某物业有限公司
乙方：张三

鉴于甲方拥有位于北京市的房屋一处，双方经协商一致，订立本合同。

第一章 总则

第一条 本合同所称“租赁物”是指甲方出租给乙方的房屋。

第二条 租期为三年，自2023年1月1日起至2025年12月31日止。

第二章 租金

第三条 租金为每月人民币5000元，乙方应当于每月5日前支付。

逾期支付的，乙方应当按日支付欠款的百分之一作为违约金。

第十条之一 甲方可以依照本合同第三条调整租金。

第４条 乙方不得转租。乙方有下列情形之一的，甲方有权解除合同：
（一）拖欠租金超过三个月的；
（二）擅自改变房屋用途的；
（三）损坏房屋的。

甲方（盖章）：
乙方（签字）：
日期：
"""


def test_chinese_numbering_and_kuan() -> None:
    st = parse_structure(Document.from_text(ZH_CONTRACT))
    assert st.language == "zh"
    a = [c.anchor for c in st.clauses]
    for expected in ("第一章", "第一条", "第二条", "第二章", "第三条", "第三条第二款", "第十条之一", "第四条",
                     "第四条(一)", "第四条(二)", "第四条(三)", "signature"):
        assert expected in a, (expected, a)
    by = st.by_anchor()
    assert by["第一章"].heading == "总则"
    assert by["第四条"].number == "第４条"  # full-width digits, canonical anchor
    assert by["第三条第二款"].parent == "第三条" and by["第三条第二款"].kind == "paragraph"
    assert by["第四条(二)"].parent == "第四条"
    assert any(c.kind == "recital" for c in st.clauses)
    assert "租赁物" in st.terms
    xr = [x for x in by["第十条之一"].xrefs]
    assert [(x.target, x.anchor) for x in xr] == [("第三条", "第三条")]
    check_partition(ZH_CONTRACT)


EN_CONTRACT = """MASTER SERVICES AGREEMENT

This Master Services Agreement is made between Acme Corp. ("Customer") and Widget Ltd. ("Supplier").

WHEREAS, Customer wishes to obtain services; and

WHEREAS, Supplier is willing to provide them.

NOW, THEREFORE, the parties agree as follows:

ARTICLE I
DEFINITIONS

Section 1.01 "Affiliate" means any entity controlling a party.

Section 1.02 "Services" means the services in Exhibit A.

ARTICLE II
SERVICES

Section 2.01 Performance. Supplier shall perform the Services:
(a) with due care;
(b) in accordance with Section 1.02; and
(c) within the periods below:
(i) thirty (30) days for set-up;
(ii) ten (10) days for each change;
(A) unless Customer agrees otherwise.

Section 2.02 Fees. Customer shall pay USD 10,000 per month, subject to Article III
and Section 2.01(c).

IN WITNESS WHEREOF, the parties have executed this Agreement.

By: ______________
Name: Jane Doe
Title: CEO

EXHIBIT A
SERVICES

1. Hosting of the platform.

2. Support during business hours.
"""


def test_english_hierarchy() -> None:
    st = parse_structure(Document.from_text(EN_CONTRACT))
    a = [c.anchor for c in st.clauses]
    for expected in ("Article I", "1.01", "1.02", "Article II", "2.01", "2.01(a)", "2.01(b)", "2.01(c)",
                     "2.01(c)(i)", "2.01(c)(ii)", "2.01(c)(ii)(A)", "2.02", "signature", "Exhibit A", "Exhibit A/1",
                     "Exhibit A/2", "recital-1", "recital-2", "operative-words"):
        assert expected in a, (expected, a)
    by = st.by_anchor()
    assert by["2.01(c)(i)"].parent == "2.01(c)"
    assert by["2.01"].heading == "Performance"
    assert by["1.01"].defines == ["Affiliate"]
    assert {"Customer", "Supplier", "Affiliate", "Services"} <= set(st.terms)
    # a wrapped line "and Section 2.01(c)." is not a clause; references resolve to anchors
    refs = {(x.target, x.anchor) for x in by["2.02"].xrefs}
    assert ("2.01(c)", "2.01(c)") in refs and ("III", None) in refs
    assert ("1.02", "1.02") in {(x.target, x.anchor) for x in by["2.01(b)"].xrefs}
    assert by["1.02"].xrefs[0].anchor == "Exhibit A"
    check_partition(EN_CONTRACT)


def test_roman_versus_letters() -> None:
    text = "(a) one;\n\n(b) two;\n\n(h) eight;\n\n(i) nine, a letter after (h);\n\n(j) ten.\n"
    assert anchors(text) == ["(a)", "(b)", "(h)", "(i)", "(j)"]
    st = parse_structure(Document.from_text(text))
    assert st.clauses[3].style == "paren-low-alpha"
    text2 = "1. Terms\n\n(a) first;\n\n(i) sub one;\n\n(ii) sub two;\n\n(b) second.\n"
    assert anchors(text2) == ["1", "1(a)", "1(a)(i)", "1(a)(ii)", "1(b)"]


def test_page_break_continuation_and_wrapped_lines() -> None:
    text = ("1.1 Term. This Agreement starts on the Effective Date and continues for the period set out\n"
            "in Section 4.2 of the Order Form unless terminated earlier\f under Section 1.2.\n\n"
            "1.2 Termination. Either party may terminate on notice.\n")
    st = parse_structure(Document.from_text(text))
    assert [c.anchor for c in st.clauses] == ["1.1", "1.2"]
    assert "under Section 1.2." in text[st.clauses[0].start:st.clauses[0].end]
    check_partition(text)


def test_table_of_contents_is_not_clauses() -> None:
    text = ("Contents\n\n1. Services\n2. Fees\n3. Term\n\n"
            "1. Services\n\nThe supplier provides the services.\n\n2. Fees\n\nFees are due monthly.\n\n"
            "3. Term\n\nOne year.\n")
    a = anchors(text)
    assert a.count("1") == 1 and a.count("2") == 1 and a.count("3") == 1
    st = parse_structure(Document.from_text(text))
    assert st.by_anchor()["1"].start == text.index("1. Services\n\nThe")


def test_corpus_texts_partition_and_anchor_uniqueness(csa: str, zh_law: str) -> None:
    for text in (csa, zh_law):
        check_partition(text)
        a = anchors(text)
        assert len(a) == len(set(a))
    a = anchors(csa)
    assert {"1", "1.1", "2.1(a)", "6.5(b)", "15.26"} <= set(a)
    assert "第二十四条第二款" in anchors(zh_law)


def test_more_numbering_styles() -> None:
    zh = "第一部分 通用条款\n\n第一条 总则。\n\n1）甲方义务；\n\n2）乙方义务。\n\n（1）子项；\n\n第二部分 专用条款\n\n第二条 附则。\n"
    assert anchors(zh) == ["第一部分", "第一条", "第一条1)", "第一条2)", "第一条2)(1)", "第二部分", "第二条"]
    en = "1. Services\n\n1) hosting;\n\n2) support.\n\n2. Fees\n\nClause 3 Term\n\nThe term is one year.\n"
    assert anchors(en) == ["1", "1.1)", "1.2)", "2", "3"]
    sched = "1. A\n\n1.1 x.\n\nEXHIBIT A\n\n1. Scope\n\n1.1 y.\n\n(a) z.\n"
    assert anchors(sched) == ["1", "1.1", "Exhibit A", "Exhibit A/1", "Exhibit A/1.1", "Exhibit A/1.1(a)"]


def test_lettered_recitals_do_not_contain_the_body() -> None:
    text = ("SHARE PURCHASE AGREEMENT\n\nRECITALS\n\nA. The Seller owns the Shares.\n\nB. The Buyer wishes to buy them.\n\n"
            "NOW, THEREFORE, the parties agree:\n\n1. Sale\n\n1.1 The Seller sells the Shares.\n\n"
            "GENERAL TERMS\n\n1. Notices\n\nNotices are in writing.\n")
    a = anchors(text)
    assert a[:4] == ["h:share-purchase-agreement", "recital-1", "A", "B"]
    assert "1" in a and "1.1" in a and "A.1" not in a
    assert a[-2:] == ["h:general-terms", "1~2"]
