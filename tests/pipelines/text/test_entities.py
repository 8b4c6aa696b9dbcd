"""Key entities and their retention (pipelines.text.entities), on English, Chinese and mixed text.
The expected values are those of the engine fallback's own extractor before it moved here."""

from __future__ import annotations

from pipelines.text.entities import entity_retention, entity_retention_texts, extract_entities

EN = ("On March 3, 2021 the Bank of England paid $5,000 (12.5%) to Acme Widget Corporation under the "
      "“Customer Data” terms; see clause 4817.")
ZH = "根据第二十三条，甲方应于2021年3月4日前支付500万元，期限为二十年，违约金为百分之十五。「保密信息」不得披露。"
MIX = "The Licensee (甲方) shall pay USD 12.5 million by 2021-03-04 under 《技术许可合同》 and 第5款."


def _found(text: str) -> list[tuple[str, str, int, int]]:
    return [(e.text, e.kind, e.start, e.end) for e in extract_entities(text)]


def test_english_entities() -> None:
    assert _found(EN) == [
        ("March 3, 2021", "date", 3, 16), ("Bank of England", "name", 21, 36), ("$5,000", "money", 42, 48),
        ("12.5%", "percent", 50, 55), ("Acme Widget Corporation", "name", 60, 83),
        ("Customer Data", "quoted", 95, 108), ("4817", "number", 128, 132),
    ]


def test_chinese_entities() -> None:
    assert _found(ZH) == [
        ("第二十三条", "article", 2, 7), ("2021年3月4日", "date", 12, 21), ("500万元", "money", 24, 29),
        ("二十年", "number", 33, 36), ("百分之十五", "percent", 41, 46), ("保密信息", "quoted", 48, 52),
    ]


def test_mixed_entities() -> None:
    assert _found(MIX) == [
        ("USD 12.5 million", "money", 28, 44), ("2021-03-04", "date", 48, 58),
        ("技术许可合同", "quoted", 66, 72), ("第5款", "article", 78, 81),
    ]


def test_spans_point_into_the_text_even_with_full_width_digits() -> None:
    text = "支付５００万元"  # NFKC turns the full-width digits into ASCII, one character each
    (ent,) = extract_entities(text)
    assert (ent.text, ent.kind) == ("500万元", "money")
    assert text[ent.start : ent.end] == "５００万元"


def test_lone_digits_and_leading_sentence_words_are_not_entities() -> None:
    assert _found("Step 1. The Court said so.") == []


def test_retention_by_spans() -> None:
    assert entity_retention(EN, [(0, 60)]) == (7, 4, ["Acme Widget Corporation", "Customer Data", "4817"])
    assert entity_retention(EN, [(0, len(EN))]) == (7, 7, [])
    assert entity_retention(EN, []) == (7, 0, [e.text for e in extract_entities(EN)])
    # an entity cut by the edge of the seen span is lost
    assert entity_retention(ZH, [(0, 5)])[1] == 0


def test_retention_by_texts() -> None:
    assert entity_retention_texts(ZH, [ZH[:30]]) == (6, 3, ["二十年", "百分之十五", "保密信息"])
    assert entity_retention_texts(ZH, [ZH]) == (6, 6, [])
