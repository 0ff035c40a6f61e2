"""Day and month numbers as Chinese dates write them, in digits or numerals ("3月3日", "十二月二十五日")."""

_DIGITS = {"〇": 0, "零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
ZH_NUMBER = r"(?:\d{1,2}|[一二三四五六七八九]?十[一二三四五六七八九]?|[一二两三四五六七八九])"


def zh_int(text: str) -> int:
    """The value of a `ZH_NUMBER` match: "12" -> 12, "十二" -> 12, "二十五" -> 25, "五" -> 5."""
    if text.isdigit():
        return int(text)
    if "十" in text:
        tens, _, ones = text.partition("十")
        return _DIGITS.get(tens, 1) * 10 + _DIGITS.get(ones, 0)
    return _DIGITS[text]
