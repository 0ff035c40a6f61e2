"""Token counting with a real BPE tokenizer that ships its vocabulary (bpe-openai: cl100k, o200k) and works offline."""
import functools
import warnings
from typing import Any


@functools.cache
def _encoding(name: str) -> Any:
    with warnings.catch_warnings():
        # bpe-openai reads its bundled vocabulary (at import) through a deprecated importlib.resources call.
        warnings.simplefilter("ignore", DeprecationWarning)
        from bpe_openai import get_encoding

        return get_encoding(name)


@functools.lru_cache(maxsize=8192)
def count(text: str, encoding: str = "cl100k_base") -> int:
    """How many tokens `text` costs a model using `encoding`.

    Cached: a conversation's memories are recalled again at nearly every turn, and counting is most of rendering.
    """
    return len(_encoding(encoding).encode_ordinary(text))


def truncate(text: str, max_tokens: int, encoding: str = "cl100k_base") -> str:
    """The longest prefix of `text` within `max_tokens` tokens."""
    enc = _encoding(encoding)
    ids = enc.encode_ordinary(text)
    if len(ids) <= max_tokens:
        return text
    return str(enc.decode(ids[:max_tokens]))
