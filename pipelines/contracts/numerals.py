"""Numbers as contracts write them: Arabic, full-width, Chinese (一百零二, 两, 〇, 廿), Roman, letters.

`parse_number(s)` turns any of them into an int (or None); `to_chinese(n)` writes the canonical
Chinese form used in anchors (第十二条), so 第12条, 第１２条 and 第十二条 share one anchor.
"""

from __future__ import annotations

import unicodedata

_CN_DIGITS = {
    "零": 0, "〇": 0, "○": 0, "Ｏ": 0, "一": 1, "壹": 1, "二": 2, "贰": 2, "貳": 2, "两": 2, "兩": 2,
    "三": 3, "叁": 3, "參": 3, "四": 4, "肆": 4, "五": 5, "伍": 5, "六": 6, "陆": 6, "陸": 6,
    "七": 7, "柒": 7, "八": 8, "捌": 8, "九": 9, "玖": 9,
}
_CN_UNITS = {"十": 10, "拾": 10, "百": 100, "佰": 100, "千": 1000, "仟": 1000}
_CN_BIG = {"万": 10_000, "萬": 10_000, "亿": 100_000_000, "億": 100_000_000}
CN_NUMERAL_CHARS = "".join(_CN_DIGITS) + "".join(_CN_UNITS) + "".join(_CN_BIG) + "廿卅"

_ROMAN = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}


def to_halfwidth(s: str) -> str:
    """Full-width ASCII (Ｓｅｃｔｉｏｎ １２) to half-width; everything else unchanged."""
    return "".join(
        chr(ord(c) - 0xFEE0) if 0xFF01 <= ord(c) <= 0xFF5E else (" " if c == "\u3000" else c) for c in s
    )


def parse_chinese(s: str) -> int | None:
    """一百零二 -> 102, 十二 -> 12, 两千 -> 2000, 廿三 -> 23, 一二三 (digit by digit) -> 123."""
    if not s or any(c not in CN_NUMERAL_CHARS for c in s):
        return None
    s = s.replace("廿", "二十").replace("卅", "三十")
    if all(c in _CN_DIGITS for c in s) and len(s) > 1:  # 二〇二二
        return int("".join(str(_CN_DIGITS[c]) for c in s))
    total, section, digit = 0, 0, None
    for c in s:
        if c in _CN_DIGITS:
            digit = _CN_DIGITS[c]
        elif c in _CN_UNITS:
            section += (1 if digit is None else digit) * _CN_UNITS[c]
            digit = None
        else:  # 万 / 亿
            section += digit or 0
            total += (section or 1) * _CN_BIG[c]
            section, digit = 0, None
    return total + section + (digit or 0)


def parse_roman(s: str) -> int | None:
    """XIV -> 14 (case-insensitive); None when `s` is not a well-formed Roman numeral."""
    t = s.lower()
    if not t or any(c not in _ROMAN for c in t):
        return None
    total = 0
    for i, c in enumerate(t):
        v = _ROMAN[c]
        total += -v if i + 1 < len(t) and _ROMAN[t[i + 1]] > v else v
    return total if to_roman(total) == t else None


def to_roman(n: int) -> str:
    out = []
    for v, sym in ((1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"), (50, "l"),
                   (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")):
        while n >= v:
            out.append(sym)
            n -= v
    return "".join(out)


def parse_number(s: str) -> int | None:
    """Any single number token: 12, １２, 十二, XII; None when it is none of them."""
    s = unicodedata.normalize("NFKC", s).strip()
    if s.isdigit():
        return int(s)
    return parse_chinese(s) if s and s[0] in CN_NUMERAL_CHARS else parse_roman(s)


def to_chinese(n: int) -> str:
    """12 -> 十二, 102 -> 一百零二, 20 -> 二十 (the form statutes and contracts use)."""
    if n == 0:
        return "零"
    digits = "零一二三四五六七八九"
    if n >= 10_000:
        high, low = divmod(n, 10_000)
        rest = to_chinese(low) if low else ""
        return to_chinese(high) + "万" + ("零" if 0 < low < 1000 else "") + rest
    out, zero = [], False
    for value, unit in ((1000, "千"), (100, "百"), (10, "十"), (1, "")):
        d, n = divmod(n, value)
        if d:
            if zero:
                out.append("零")
                zero = False
            out.append(digits[d] + unit)
        elif out:
            zero = True
    s = "".join(out)
    return s[1:] if s.startswith("一十") else s
