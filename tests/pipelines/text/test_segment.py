"""Chinese word segmentation: words as offsets, Han runs only, the same words every time."""

from __future__ import annotations

from pipelines.text.segment import han_words


def test_words_are_offsets_into_the_han_runs() -> None:
    text = "按照城镇居民人均可支配收入或者农村居民人均纯收入标准，自2022年5月1日起施行。"
    spans = han_words(text)
    words = [text[s:e] for s, e in spans]
    assert "城镇居民" in words and "农村居民" in words and "纯收入" in words
    assert all(text[s:e].strip() and all("\u4e00" <= ch <= "\u9fff" for ch in text[s:e]) for s, e in spans)
    assert "2022" not in "".join(words) and "，" not in "".join(words)
    assert [s for s, _ in spans] == sorted(s for s, _ in spans)
    assert han_words(text) == spans  # deterministic (dictionary only)
    assert han_words(text, 2, 6) == [(2, 6)]  # a range inside the text
