"""Fresh ids, so tests never share tenants, users or conversations."""
import itertools
import os

_ids = itertools.count()


def unique(prefix: str) -> str:
    """A fresh id, so tests never share tenants, users or conversations."""
    return f"{prefix}{os.getpid()}-{next(_ids)}"
