"""Which writing system a character belongs to, where that changes how text is split into words."""
from shared.text import patterns

# Han ideographs: Chinese words are not separated by spaces, so runs of them are segmented instead of split.
HAN = "\u4e00-\u9fff"
HAN_RUN = patterns.compile(f"[{HAN}]{{2,}}+")


def is_han(char: str) -> bool:
    """A Chinese (Han) ideograph."""
    return "\u4e00" <= char <= "\u9fff"


def is_cjk(char: str) -> bool:
    """A character of Chinese, Japanese (kana) or Korean (Hangul) script, where each carries about a word."""
    return "\u3040" <= char <= "\u9fff" or "\uac00" <= char <= "\ud7af" or "\uf900" <= char <= "\ufaff"


def han_runs(text: str) -> list[str]:
    """The runs of two or more Han characters in `text`, in order."""
    return HAN_RUN.findall(text)


def approximate_words(text: str) -> float:
    """Words in `text`, counting a Chinese word as about 1.5 Han characters and splitting the rest on spaces."""
    han = sum(1 for c in text if is_han(c))
    spaced = "".join(" " if is_han(c) else c for c in text).split()
    return len(spaced) + han / 1.5
