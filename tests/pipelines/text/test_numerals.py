"""Chinese and Roman numerals both ways (pipelines.text.numerals)."""

from __future__ import annotations

import pytest

from pipelines.text.numerals import (
    CN_NUMERAL_CHARS,
    ROMAN_MAX,
    chinese_to_int,
    int_to_chinese,
    int_to_roman,
    parse_number,
    roman_to_int,
)
from pipelines.text.script import to_halfwidth


@pytest.mark.parametrize("s, n", [
    ("一", 1), ("十", 10), ("十二", 12), ("二十", 20), ("一十二", 12), ("两千", 2000), ("一百零二", 102),
    ("一百〇二", 102), ("廿三", 23), ("卅", 30), ("三万五千", 35000), ("一万零二十", 10020), ("两亿", 200_000_000),
    ("壹佰贰拾叁", 123), ("零", 0), ("〇", 0), ("一二三", 123), ("二〇二二", 2022),
])
def test_chinese_to_int(s: str, n: int) -> None:
    assert chinese_to_int(s) == n


def test_chinese_to_int_rejects_other_characters_and_can_refuse_digit_strings() -> None:
    assert chinese_to_int("") is None and chinese_to_int("十2") is None and chinese_to_int("第三") is None
    assert chinese_to_int("一二三", digit_by_digit=False) is None
    assert chinese_to_int("二十三", digit_by_digit=False) == 23 and chinese_to_int("三", digit_by_digit=False) == 3
    assert "两" in CN_NUMERAL_CHARS and "〇" in CN_NUMERAL_CHARS and "廿" in CN_NUMERAL_CHARS


@pytest.mark.parametrize("n, s", [
    (0, "零"), (1, "一"), (10, "十"), (12, "十二"), (20, "二十"), (105, "一百零五"), (110, "一百一十"),
    (1005, "一千零五"), (1050, "一千零五十"), (10020, "一万零二十"), (123456, "十二万三千四百五十六"),
])
def test_int_to_chinese(n: int, s: str) -> None:
    assert int_to_chinese(n) == s


def test_chinese_round_trip() -> None:
    for n in list(range(0, 2100)) + [9999, 10000, 10001, 99999, 100000, 1234567]:
        assert chinese_to_int(int_to_chinese(n)) == n


@pytest.mark.parametrize("s, n", [("i", 1), ("IV", 4), ("ix", 9), ("XIV", 14), ("xl", 40), ("XC", 90),
                                  ("MCMXCIV", 1994), ("mmxxvi", 2026)])
def test_roman_to_int(s: str, n: int) -> None:
    assert roman_to_int(s) == n == roman_to_int(s, strict=False)


def test_roman_strict_and_lenient() -> None:
    for bad in ("IIII", "VV", "IC", "IVX", "vx"):
        assert roman_to_int(bad) is None
    assert roman_to_int("IIII", strict=False) == 4
    assert roman_to_int("IC", strict=False) == 99
    assert roman_to_int("VV", strict=False) == 10
    assert roman_to_int("") is None and roman_to_int("XIA", strict=False) is None


def test_int_to_roman() -> None:
    assert int_to_roman(14) == "xiv" and int_to_roman(14, upper=True) == "XIV"
    assert int_to_roman(90, upper=True) == "XC" and int_to_roman(100, upper=True) == "C"
    assert int_to_roman(1994) == "mcmxciv" and int_to_roman(0) == ""
    for n in range(1, 4000):
        assert roman_to_int(int_to_roman(n)) == n


def test_int_to_roman_is_bounded() -> None:
    """Past ROMAN_MAX a number is written in decimal: 10^12 would otherwise be 10^9 "m"s (issue 21)."""
    assert ROMAN_MAX == 3999 and int_to_roman(3999, upper=True) == "MMMCMXCIX"
    assert int_to_roman(4000) == "4000" and int_to_roman(10**12, upper=True) == "1000000000000"
    assert roman_to_int("mmmm") is None and roman_to_int("mmmm", strict=False) == 4000


def test_parse_number_reads_every_kind() -> None:
    assert parse_number("12") == 12 and parse_number("１２") == 12 and parse_number(" 12 ") == 12
    assert parse_number("十二") == 12 and parse_number("XII") == 12 and parse_number("xii") == 12
    assert parse_number("vv") is None and parse_number("IIII") is None and parse_number("abc") is None
    # report headings (第三章, 三、) read Chinese digit strings as no number
    assert parse_number("一二") == 12 and parse_number("一二", digit_by_digit=False) is None
    assert parse_number("十二", digit_by_digit=False) == 12 and parse_number("12", digit_by_digit=False) == 12


# numbers as contracts write them (clause numbers, 第X条, Article XIV)
@pytest.mark.parametrize("s,n", [("十二", 12), ("一百零二", 102), ("二十", 20), ("廿三", 23), ("两千", 2000),
                                 ("１２", 12), ("XIV", 14), ("iv", 4), ("二〇二二", 2022), ("一万零五", 10005)])
def test_parse_number_contract_numbers(s: str, n: int) -> None:
    assert parse_number(s) == n


def test_contract_numbers_round_trip() -> None:
    for n in list(range(1, 130)) + [1000, 1010, 2022, 10005]:
        assert parse_number(int_to_chinese(n)) == n
    assert parse_number("vv") is None and parse_number("IIII") is None
    assert to_halfwidth("Ｓｅｃｔｉｏｎ　１２") == "Section 12"
