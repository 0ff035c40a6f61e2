"""NKey users: a new seed for each NATS user engram's deployment has (the server keeps only the public key)."""
import os
from dataclasses import dataclass
from pathlib import Path

import nacl.utils
import nkeys


@dataclass(frozen=True, repr=False)
class UserKey:
    """An NKey user: its seed (the secret a client signs with) and its public key (what the server keeps)."""

    seed: bytes
    public: str

    def __repr__(self) -> str:
        return f"UserKey({self.public})"


def new_user() -> UserKey:
    """A fresh NKey user from 32 random bytes (Ed25519)."""
    seed = nkeys.encode_seed(nacl.utils.random(32), nkeys.PREFIX_BYTE_USER)
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    return UserKey(seed=seed, public=public)


def public_of(seed_file: Path) -> str:
    """The public key of the user whose seed the file holds."""
    return str(nkeys.from_seed(bytearray(seed_file.read_bytes().strip())).public_key.decode())


def write_seed(path: Path, key: UserKey) -> None:
    """Write a seed readable by its owner alone (created with mode 0600, never group- or world-readable)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(key.seed + b"\n")
    os.chmod(path, 0o600)
