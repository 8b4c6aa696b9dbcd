"""A real contract altered in known ways (renumber, move, edit an amount, split a clause, Chinese
第十条之一 and 款 insertions, obligation and negation edits): exactly those changes must be found."""

from __future__ import annotations

import re

from pipelines.contracts.pipeline import apply_changes, compare_texts


def changed_rows(r):
    return [x for x in r.alignment if x.change != "unchanged"]


def clause_line(text: str, number: str) -> str:
    m = re.search(rf"(?m)^{re.escape(number)} .*$", text)
    assert m, number
    return m.group(0)


def renumber_section_1(text: str, start: int, shift: int = 1) -> str:
    """1.k -> 1.(k+shift) for k >= start, at line starts only."""
    def sub(m: re.Match) -> str:
        k = int(m.group(1))
        return f"1.{k + shift} " if k >= start else m.group(0)
    return re.sub(r"(?m)^1\.(\d+) ", sub, text)


def test_insert_renumbers_following_clauses(csa: str) -> None:
    new = "1.3 Onboarding. Provider will hold two onboarding sessions for Customer's administrators at no extra charge."
    b = renumber_section_1(csa, 3)
    b = b.replace(clause_line(b, "1.4"), new + "\n\n" + clause_line(b, "1.4"))
    r = compare_texts(csa, b)
    ch = {(x.a, x.b): x for x in changed_rows(r)}
    assert set(ch) == {(None, "1.3"), ("1.3", "1.4"), ("1.4", "1.5"), ("1.5", "1.6"), ("1.6", "1.7"), ("1.7", "1.8")}
    assert ch[(None, "1.3")].change == "added"
    for k in range(3, 8):
        row = ch[(f"1.{k}", f"1.{k + 1}")]
        assert row.change == "renumbered" and row.renumbered and not row.edited and not row.moved
        assert [op.op for op in row.diff if op.op != "equal"] == ["renumber"]
    assert apply_changes(r, csa) == b


def test_move_with_edit_is_one_event(csa: str) -> None:
    line = clause_line(csa, "14.7")
    moved = line.replace("14.7 No Publicity.", "5.5 No Publicity.").replace("publicly announce", "publicly disclose")
    b = csa.replace(line + "\n\n", "")
    b = re.sub(r"(?m)^14\.(\d+) ", lambda m: f"14.{int(m.group(1)) - 1} " if int(m.group(1)) > 7 else m.group(0), b)
    b = b.replace(clause_line(b, "5.4"), clause_line(b, "5.4") + "\n\n" + moved)
    r = compare_texts(csa, b)
    ch = {(x.a, x.b): x for x in changed_rows(r)}
    mv = ch.pop(("14.7", "5.5"))
    assert mv.change == "moved" and mv.moved and mv.edited and mv.renumbered
    assert any(op.op == "replace" and op.a_span.text == "announce" and op.b_span.text == "disclose" for op in mv.diff)
    assert all(x.a is not None and x.b is not None for x in ch.values()), "no deletion + insertion for the move"
    assert set(ch) == {(f"14.{k}", f"14.{k - 1}") for k in range(8, 17)}
    assert all(x.change == "renumbered" and not x.edited for x in ch.values())
    assert apply_changes(r, csa) == b


def test_amount_percentage_duration_edits_are_flagged(csa: str) -> None:
    line = clause_line(csa, "5.2")
    a = csa.replace(line, line + " Customer will also pay a minimum annual fee of USD 10,000.")
    b = a.replace("USD 10,000", "USD 12,500").replace("within 15 days", "within 10 days").replace(
        "fifty percent (50%)", "forty percent (40%)")
    r = compare_texts(a, b)
    ch = {(x.a, x.b): x for x in changed_rows(r)}
    assert set(ch) == {("5.2", "5.2"), ("5.4", "5.4"), ("15.1", "15.1")}
    assert [(f.kind, f.detail) for f in ch[("5.2", "5.2")].flags] == [("amount", "USD 10,000 → USD 12,500")]
    assert [(f.kind, f.detail) for f in ch[("5.4", "5.4")].flags] == [("duration", "15 days → 10 days")]
    kinds = {f.kind for f in ch[("15.1", "15.1")].flags}
    assert "percentage" in kinds
    assert all(f.material for x in ch.values() for f in x.flags if f.kind in {"amount", "duration", "percentage"})
    assert r.summary[0].material and {s.b for s in r.summary[:3]} == {"5.2", "5.4", "15.1"}


def test_split_clause(csa: str) -> None:
    line = clause_line(csa, "1.2")
    cut = line.index(" Any credits earned")
    first, second = line[:cut], "1.3 Service Credits." + line[cut:]
    b = renumber_section_1(csa, 3)
    b = b.replace(line, first + "\n\n" + second)
    r = compare_texts(csa, b)
    ch = {(x.a, x.b): x for x in changed_rows(r)}
    split = {k: v for k, v in ch.items() if v.change == "split"}
    assert set(split) == {("1.2", "1.2"), ("1.2", "1.3")}
    assert len({v.group for v in split.values()}) == 1
    rest = {k for k, v in ch.items() if v.change != "split"}
    assert rest == {(f"1.{k}", f"1.{k + 1}") for k in range(3, 8)}
    assert all(ch[k].change == "renumbered" for k in rest)
    assert apply_changes(r, csa) == b


def test_definition_change_flags_users(csa: str) -> None:
    b = csa.replace('"Feedback" means suggestions, feedback, or comments', '"Feedback" means written suggestions or comments')
    r = compare_texts(csa, b)
    assert [(x.a, x.change) for x in changed_rows(r)] == [("15.12", "modified")]
    users = [x for x in r.alignment if any(f.kind == "definition_changed" for f in x.flags)]
    assert {"1.6", "15.9"} <= {x.b for x in users}
    for x in users:
        f = next(f for f in x.flags if f.kind == "definition_changed")
        assert f.b_span.text == "Feedback" and not f.material


def test_obligation_negation_and_reference_flags(csa: str) -> None:
    b = csa.replace("Customer will promptly notify Provider", "Customer may notify Provider")
    b = b.replace("Provider is not responsible for any inability", "Provider is responsible for any inability")
    b = b.replace("in accordance with Section 12 (Confidentiality)", "in accordance with Section 13 (Confidentiality)")
    r = compare_texts(csa, b)
    rows = {x.a: x for x in changed_rows(r)}
    obl = [f for f in rows["1.4"].flags if f.kind == "obligation"]
    assert obl and obl[0].detail.startswith("will → may") and "weaker" in obl[0].detail
    neg = [f for f in rows["3"].flags if f.kind == "negation"]
    assert neg and "removed not" in neg[0].detail and neg[0].a_span.text == "not"
    if "Section 12 (Confidentiality)" in csa and "in accordance with Section 12 (Confidentiality)" in csa:
        xr = [f for x in rows.values() for f in x.flags if f.kind == "cross_reference"]
        assert xr and xr[0].material


ZH = """第一条 租赁期限为三年。

第二条 乙方应当按月支付租金人民币五万元。

逾期支付的，乙方应当支付违约金。

第三条 乙方不得转租。

第十条 本合同一式两份。

第十一条 本合同自双方签字之日起生效。
"""


def test_chinese_alterations() -> None:
    b = ZH.replace("乙方应当按月支付租金人民币五万元", "乙方可以按季支付租金人民币十万元")
    b = b.replace("乙方不得转租。", "乙方经甲方同意可以转租。")
    b = b.replace("第十一条", "第十条之一 争议由甲方所在地法院管辖。\n\n第十一条")
    b = b.replace("逾期支付的，乙方应当支付违约金。", "乙方应当提供担保。\n\n逾期支付的，乙方应当支付违约金。")
    r = compare_texts(ZH, b)
    ch = {(x.a, x.b): x for x in changed_rows(r)}
    assert set(ch) == {("第二条", "第二条"), (None, "第二条第二款"), ("第二条第二款", "第二条第三款"),
                       ("第三条", "第三条"), (None, "第十条之一")}
    kinds = {f.kind: f for f in ch[("第二条", "第二条")].flags}
    assert kinds["amount"].detail == "人民币五万元 → 人民币十万元"
    assert "应当 → 可以" in kinds["obligation"].detail and "weaker" in kinds["obligation"].detail
    assert ch[("第二条第二款", "第二条第三款")].change == "renumbered"
    assert not ch[("第二条第二款", "第二条第三款")].edited
    assert any(f.kind in {"obligation", "negation"} for f in ch[("第三条", "第三条")].flags)
    assert apply_changes(r, ZH) == b
    # the Chinese redline pairs the changed words (五 / 十 inside them)
    ops = [(o.op, o.a_span.text if o.a_span else "", o.b_span.text if o.b_span else "") for o in ch[("第二条", "第二条")].diff]
    assert ("replace", "五", "十") in ops or any(o[0] == "replace" and "五" in o[1] and "十" in o[2] for o in ops)


def test_full_width_and_whitespace_are_formatting_only() -> None:
    a = "第１条 租金为每月５０００元。\n\n第２条 本合同自签字之日起生效。\n"
    b = "第1条 租金为每月5000元。\n\n第2条   本合同自签字之日起生效。\n"
    r = compare_texts(a, b)
    assert [x.change for x in r.alignment] == ["unchanged", "unchanged"]
    assert any(op.op == "format" for x in r.alignment for op in x.diff) or any(
        op.op == "renumber" for x in r.alignment for op in x.diff) is False
    assert apply_changes(r, a) == b


def test_party_name_and_bare_chinese_definition() -> None:
    a = 'This Agreement is made between Acme Corp. ("Customer") and Widget Ltd. ("Supplier").\n\n1. Fees\n\n1.1 Customer shall pay.\n'
    r = compare_texts(a, a.replace("Widget Ltd.", "Gadget Holdings Limited"))
    party = [f for x in r.alignment for f in x.flags if f.kind == "party"]
    assert [f.detail for f in party] == ["Widget Ltd. → Gadget Holdings Limited"] and party[0].material
    zh = "第一条 本合同所称租赁物是指甲方出租的房屋。\n\n第二条 甲方为北京某某物业有限公司。\n\n第三条 租赁物由乙方维护。\n"
    zb = zh.replace("北京某某物业有限公司", "上海某某置业有限公司").replace("出租的房屋", "出租的房屋及车位")
    r = compare_texts(zh, zb)
    flags = {(x.a, f.kind): f for x in r.alignment for f in x.flags}
    assert flags[("第二条", "party")].detail == "北京某某物业有限公司 → 上海某某置业有限公司"
    assert flags[("第三条", "definition_changed")].b_span.text == "租赁物"


def test_merged_clauses(csa: str) -> None:
    l2, l3 = clause_line(csa, "1.2"), clause_line(csa, "1.3")
    merged = l2 + " " + l3[len("1.3 "):]
    b = csa.replace(l2 + "\n\n" + l3, merged)
    b = renumber_section_1(b, 4, shift=-1)
    r = compare_texts(csa, b)
    ch = {(x.a, x.b): x for x in changed_rows(r)}
    merged_rows = {k for k, v in ch.items() if v.change == "merged"}
    assert merged_rows == {("1.2", "1.2"), ("1.3", "1.2")}
    assert {k for k, v in ch.items() if v.change != "merged"} == {(f"1.{k}", f"1.{k - 1}") for k in range(4, 8)}
    assert apply_changes(r, csa) == b
