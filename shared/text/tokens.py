"""Token counting with a real BPE tokenizer that ships its vocabulary (bpe-openai: cl100k, o200k) and works offline."""
import functools
import warnings
from collections.abc import Iterator
from typing import Any

# bpe-openai refuses one input of over 200,000 tokens; a piece of this many characters stays far below that
# (at most 4 tokens a character), and long texts are counted piece by piece, split where there is white space.
PIECE_CHARS = 20_000
CACHED_CHARS = 4_096  # counts of texts up to this long are cached; longer ones would fill memory


@functools.cache
def _encoding(name: str) -> Any:
    with warnings.catch_warnings():
        # bpe-openai reads its bundled vocabulary (at import) through a deprecated importlib.resources call.
        warnings.simplefilter("ignore", DeprecationWarning)
        from bpe_openai import get_encoding

        return get_encoding(name)


def _pieces(text: str) -> Iterator[str]:
    start = 0
    while len(text) - start > PIECE_CHARS:
        cut = max(text.rfind("\n", start, start + PIECE_CHARS), text.rfind(" ", start, start + PIECE_CHARS))
        end = cut + 1 if cut > start else start + PIECE_CHARS
        yield text[start:end]
        start = end
    yield text[start:]


def _count(text: str, encoding: str) -> int:
    enc = _encoding(encoding)
    return sum(len(enc.encode_ordinary(piece)) for piece in _pieces(text))


@functools.lru_cache(maxsize=8192)
def _count_cached(text: str, encoding: str) -> int:
    return _count(text, encoding)


def count(text: str, encoding: str = "cl100k_base") -> int:
    """How many tokens `text` costs a model using `encoding`.

    Cached for short texts: a conversation's memories are recalled again at nearly every turn, and counting is
    most of rendering.
    """
    return _count_cached(text, encoding) if len(text) <= CACHED_CHARS else _count(text, encoding)


def truncate(text: str, max_tokens: int, encoding: str = "cl100k_base") -> str:
    """The longest prefix of `text` within `max_tokens` tokens."""
    enc = _encoding(encoding)
    kept: list[str] = []
    room = max_tokens
    for piece in _pieces(text):
        ids = enc.encode_ordinary(piece)
        if len(ids) > room:
            kept.append(str(enc.decode(ids[:room])))
            break
        kept.append(piece)
        room -= len(ids)
    return "".join(kept)
