"""Chat messages built to be slow for text rules: long runs of what patterns repeat (a character, a doubled one, a
word, a date, a number), in English and Chinese, up to the contract's longest turn, and random mixes of both scripts."""
import random

from engram_client.contract.base import MAX_TEXT_CHARS

_CHINESE_RUNS = ("我", "我我", "的", "了了", "是", "在在", "很", "最喜欢", "住在", "哈哈", "年", "月", "日", "号")
_ENGLISH_RUNS = ("I ", "my favourite ", "in May ", "a, ", "1 of ", "Mr. ", "and I ", "moved to ", "5 ", "the the ",
                 "we we ", "2023-05-08 ", "last ", "'", "!? ")


def _fill(unit: str, length: int) -> str:
    return (unit * (length // len(unit) + 1))[:length]


def hostile_texts(seed: int = 7, mixes: int = 2, long_every: int = 6) -> list[str]:
    """Runs of each unit at 45 characters (where exponential patterns had already taken seconds), and of every
    `long_every`-th unit at the longest turn, each ended by a character no rule wants; then `mixes` random texts of
    both scripts at the longest turn."""
    units = (*_CHINESE_RUNS, *_ENGLISH_RUNS)
    texts = [_fill(unit, 45) + "?" for unit in units]
    texts += [_fill(unit, MAX_TEXT_CHARS - 1) + "?" for unit in units[::long_every]]
    rng = random.Random(seed)
    alphabet = [*_CHINESE_RUNS, *_ENGLISH_RUNS, "，", "。", " ", "\n", "Ana ", "李雷 ", "2023年5月8日 ", "May 8th "]
    for _ in range(mixes):
        text = ""
        while len(text) < MAX_TEXT_CHARS:
            text += rng.choice(alphabet) * rng.randint(1, 40)
        texts.append(text[:MAX_TEXT_CHARS])
    return texts
