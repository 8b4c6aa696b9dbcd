"""CJK character classes and shares (pipelines.text.script)."""

from __future__ import annotations

import re

import pytest

from pipelines.text.script import CJK, HAN, HAN_EXT, cjk_share, count_cjk, has_cjk, is_han


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
