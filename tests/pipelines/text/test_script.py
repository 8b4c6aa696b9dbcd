"""CJK character classes and shares (pipelines.text.script)."""

from __future__ import annotations

import re

import pytest

from pipelines.text.script import (
    CJK,
    HAN,
    HAN_EXT,
    cjk_share,
    count_cjk,
    detect_language,
    has_cjk,
    is_cjk_wide,
    is_han,
    to_halfwidth,
)


def test_cjk_share_counts_cjk_against_latin_letters_only() -> None:
    assert cjk_share("") == 0.0
    assert cjk_share("123, 456!") == 0.0
    assert cjk_share("Hello") == 0.0
    assert cjk_share("你好") == 1.0
    assert cjk_share("ab你好") == 0.5
    # kana and Hangul count as CJK here
    assert cjk_share("カタカナ한국") == 1.0
    mixed = "The Licensee (甲方) shall pay USD 12.5 million by 2021-03-04 under 《技术许可合同》 and 第5款."
    assert cjk_share(mixed) == pytest.approx(10 / 49)


def test_the_three_classes_nest() -> None:
    han, ext, cjk = (re.compile(f"[{c}]") for c in (HAN, HAN_EXT, CJK))
    for ch, in_han, in_ext, in_cjk in [
        ("中", True, True, True),
        ("㐀", False, True, True),  # U+3400, Extension A
        ("䷀", False, True, False),  # U+4DC0, Yijing hexagram: inside HAN_EXT's one range only
        ("あ", False, False, True),
        ("한", False, False, True),
        ("。", False, False, False),
        ("A", False, False, False),
    ]:
        assert (bool(han.match(ch)), bool(ext.match(ch)), bool(cjk.match(ch))) == (in_han, in_ext, in_cjk), ch
        assert is_han(ch) == in_han


def test_has_and_count() -> None:
    assert has_cjk("claim 1 一种方法") and not has_cjk("claim 1. A method")
    assert not has_cjk("カタカナ") and has_cjk("カタカナ", chars=CJK)
    assert count_cjk("一种A方法。") == 4
    assert count_cjk("㐀中", chars=HAN_EXT) == 2 and count_cjk("㐀中") == 1


def test_cjk_wide_class_for_pdf_word_joining() -> None:
    for ch in ("中", "。", "「", "あ", "Ａ", "，", "\U00020000", "豈"):
        assert is_cjk_wide(ch), ch
    for ch in ("A", "é", " ", "1", "\u2fff"):
        assert not is_cjk_wide(ch), ch


def test_cjk_share_bases() -> None:
    text = "第1条 甲方 Party A"  # 4 Han, 6 ASCII letters, 14 characters
    assert cjk_share(text, HAN, "latin") == pytest.approx(4 / 10)
    assert cjk_share(text, HAN, "letters") == pytest.approx(4 / 10)
    assert cjk_share("é中", HAN, "letters") == 0.5 and cjk_share("é中", HAN, "latin") == 1.0
    assert cjk_share(text, HAN, "text") == pytest.approx(4 / 14)
    assert cjk_share("   ", HAN, "text") == 0.0
    with pytest.raises(ValueError):
        cjk_share(text, HAN, "words")


def test_detect_language_thresholds_and_their_edges() -> None:
    # patents: Han / (Han + ASCII letters) >= 0.25
    assert detect_language("一abc", 0.25, "latin", inclusive=True) == "zh"
    assert detect_language("一abcd", 0.25, "latin", inclusive=True) == "en"
    assert detect_language("123", 0.25, "latin", inclusive=True) == "en"
    # contracts: Han / letters > 0.3
    assert detect_language("一二三abcdefg", 0.3, "letters") == "en"  # exactly 0.3
    assert detect_language("一二三abcdef", 0.3, "letters") == "zh"
    # medical: Han / characters > 0.1
    assert detect_language("一" + "1" * 9, 0.1, "text") == "en"  # exactly 0.1
    assert detect_language("一" + "1" * 8, 0.1, "text") == "zh"
    assert detect_language("", 0.1, "text") == "en"
    assert detect_language("患者主诉腹痛三天。 Temp 38.5C", 0.1, "text") == "zh"
    assert detect_language("Patient reports 腹痛 for three days and a fever.", 0.3, "letters") == "en"


def test_to_halfwidth_keeps_length() -> None:
    assert to_halfwidth("Ｓｅｃｔｉｏｎ　１２") == "Section 12"
    s = "第１２条（ａ）"
    assert len(to_halfwidth(s)) == len(s) and to_halfwidth(s) == "第12条(a)"
