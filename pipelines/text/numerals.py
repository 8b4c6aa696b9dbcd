"""Numbers written in Chinese or Roman numerals, read and written.

Chinese (`chinese_to_int`, `int_to_chinese`): the digits 零〇○Ｏ一…九 with 两/兩 for 2 and the
financial forms (壹贰叁…玖), the units 十拾 百佰 千仟, the large units 万萬 亿億, and 廿 (20) / 卅
(30). A string of digits only (二〇二二) reads digit by digit. `int_to_chinese` writes the form
statutes, contracts and Word's "chineseCounting" lists use: 十二, 二十, 一百零五, 一万零二十.

Roman (`roman_to_int`, `int_to_roman`): i v x l c d m in either case. Strict reading accepts only
the canonical form (XIV, not XIIII or IVX); lenient reading adds and subtracts whatever it is given.
Numerals are written up to `ROMAN_MAX` (MMMCMXCIX); a larger number is written in decimal (a
forged list numbering starting at 10^12 would otherwise be a billion "m"s).

`parse_number` reads one number token of any of these kinds, or Arabic digits (full-width too).
"""

from __future__ import annotations

import unicodedata

CN_DIGITS: dict[str, int] = {
    "零": 0, "〇": 0, "○": 0, "Ｏ": 0, "一": 1, "壹": 1, "二": 2, "贰": 2, "貳": 2, "两": 2, "兩": 2,
    "三": 3, "叁": 3, "參": 3, "四": 4, "肆": 4, "五": 5, "伍": 5, "六": 6, "陆": 6, "陸": 6,
    "七": 7, "柒": 7, "八": 8, "捌": 8, "九": 9, "玖": 9,
}
CN_UNITS: dict[str, int] = {"十": 10, "拾": 10, "百": 100, "佰": 100, "千": 1000, "仟": 1000}
CN_BIG_UNITS: dict[str, int] = {"万": 10_000, "萬": 10_000, "亿": 100_000_000, "億": 100_000_000}
CN_NUMERAL_CHARS = "".join(CN_DIGITS) + "".join(CN_UNITS) + "".join(CN_BIG_UNITS) + "廿卅"

_CN_WRITE = "零一二三四五六七八九"
ROMAN_MAX = 3999
_ROMAN = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}
_ROMAN_WRITE = ((1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"), (50, "l"),
                (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i"))


def chinese_to_int(s: str, *, digit_by_digit: bool = True) -> int | None:
    """一百零二 -> 102, 十二 -> 12, 两千 -> 2000, 廿三 -> 23, 三万五千 -> 35000; a string of digits
    only (一二三, 二〇二二) reads digit by digit, or gives None with `digit_by_digit=False`.
    None when `s` holds anything but Chinese numeral characters."""
    if not s or any(c not in CN_NUMERAL_CHARS for c in s):
        return None
    s = s.replace("廿", "二十").replace("卅", "三十")
    if all(c in CN_DIGITS for c in s) and len(s) > 1:
        return int("".join(str(CN_DIGITS[c]) for c in s)) if digit_by_digit else None
    total, section, digit = 0, 0, None
    for c in s:
        if c in CN_DIGITS:
            digit = CN_DIGITS[c]
        elif c in CN_UNITS:
            section += (1 if digit is None else digit) * CN_UNITS[c]
            digit = None
        else:  # 万 / 亿
            section += digit or 0
            total += (section or 1) * CN_BIG_UNITS[c]
            section, digit = 0, None
    return total + section + (digit or 0)


def int_to_chinese(n: int) -> str:
    """12 -> 十二, 102 -> 一百零二, 20 -> 二十, 10020 -> 一万零二十, 0 -> 零 (n >= 0)."""
    if n == 0:
        return "零"
    if n >= 10_000:
        high, low = divmod(n, 10_000)
        rest = int_to_chinese(low) if low else ""
        return int_to_chinese(high) + "万" + ("零" if 0 < low < 1000 else "") + rest
    out, zero = [], False
    for value, unit in ((1000, "千"), (100, "百"), (10, "十"), (1, "")):
        d, n = divmod(n, value)
        if d:
            if zero:
                out.append("零")
                zero = False
            out.append(_CN_WRITE[d] + unit)
        elif out:
            zero = True
    s = "".join(out)
    return s[1:] if s.startswith("一十") else s


def roman_to_int(s: str, *, strict: bool = True) -> int | None:
    """XIV -> 14, xiv -> 14. Strict: None unless `s` is the canonical numeral (`int_to_roman` gives
    it back). Lenient: any string of the seven letters, each subtracted when a larger one follows
    (IIII -> 4, IC -> 99). None for an empty string or another character."""
    t = s.lower()
    if not t or any(c not in _ROMAN for c in t):
        return None
    total = 0
    for i, c in enumerate(t):
        v = _ROMAN[c]
        total += -v if i + 1 < len(t) and _ROMAN[t[i + 1]] > v else v
    if strict and int_to_roman(total) != t:
        return None
    return total


def int_to_roman(n: int, *, upper: bool = False) -> str:
    """14 -> "xiv" (or "XIV" with `upper`); "" for n <= 0; decimal digits past `ROMAN_MAX` (4000 -> "4000")."""
    if n > ROMAN_MAX:
        return str(n)
    out = []
    for v, sym in _ROMAN_WRITE:
        while n >= v:
            out.append(sym)
            n -= v
    s = "".join(out)
    return s.upper() if upper else s


def parse_number(s: str, *, digit_by_digit: bool = True) -> int | None:
    """One number token of any kind: 12, １２, 十二, XII (strict); None when it is none of them.
    `digit_by_digit` is passed to `chinese_to_int` (一二 -> 12, or None)."""
    s = unicodedata.normalize("NFKC", s).strip()
    if s.isdigit():
        return int(s)
    if s and s[0] in CN_NUMERAL_CHARS:
        return chinese_to_int(s, digit_by_digit=digit_by_digit)
    return roman_to_int(s)
