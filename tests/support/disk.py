"""Reading the stores' files as a data-protection officer would: which files under a folder hold a string, and what
each file is (a stream's message block, a replicated stream's raft log, a Qdrant Edge segment or write-ahead log).

The scan reads raw bytes, so it is blind to data a store compresses or encrypts: `compressed_streams` names the
streams whose blocks are not stored as written (the NATS nodes the tests start have no encryption at rest), and
Qdrant Edge stores payloads and its WAL uncompressed (a scan before a forget finds the string there; see the
forget-on-disk test). A raft log entry of a message past 8 KB is s2-compressed by nats-server (its
`compressThreshold`): strings looked for this way must travel in small messages.
"""
import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from nats.aio.client import Client
from nats.js.api import StoreCompression

_STREAM_FILE = re.compile(r"streams/(?P<stream>[^/]+)/(?P<rest>.+)$")
_RAFT_FILE = re.compile(r"_js_/(?P<group>[^/]+)/(?P<rest>.+)$")
_QDRANT_SEGMENT = re.compile(r"segments/(?P<segment>[^/]+)/(?P<rest>.+)$")
_QDRANT_WAL = re.compile(r"wal/(?P<file>[^/]+)$")


@dataclass(frozen=True)
class Found:
    """A file that holds the string: the place (a NATS node, or engram's data folder), the file, what it is."""

    place: str
    path: str      # relative to the place's folder
    count: int     # occurrences in the file
    what: str      # "stream MEM_TURNS_t: message block", "raft log of KV_MEM_WM_TURNS", "Qdrant Edge WAL", ...
    raft_log: bool

    def __str__(self) -> str:
        return f"{self.place}: {self.path} ({self.what}, {self.count}x)"


def describe(relative: str, raft_groups: dict[str, str]) -> tuple[str, bool]:
    """What a file under a NATS store or engram's data folder is, and whether it is a raft log."""
    if match := _RAFT_FILE.search(relative):
        group = match["group"]
        owner = "the meta group" if group == "_meta_" else raft_groups.get(group, f"group {group}")
        return f"raft log of {owner}", True
    if match := _STREAM_FILE.search(relative):
        rest = match["rest"]
        kind = "message block" if rest.endswith(".blk") else "consumer state" if rest.startswith("obs/") else rest
        return f"stream {match['stream']}: {kind}", False
    if match := _QDRANT_WAL.search(relative):
        return f"Qdrant Edge WAL ({match['file']})", False
    if match := _QDRANT_SEGMENT.search(relative):
        return f"Qdrant Edge segment {match['segment'][:8]}: {match['rest']}", False
    return relative, False


# Consonants in upper case: a stored payload may be LZ4-compressed, which breaks up a string at any 4 bytes seen
# earlier in the same value; hex (like any id's) or lower-case letters (like the field names) sometimes were.
TOKEN_LETTERS = "BCDFGHJKLMNPQRSVWXY"


def scan_token() -> str:
    """A unique ASCII token to say and then look for on disk: `ZQ7` and 26 random upper-case consonants."""
    return "ZQ7" + "".join(secrets.choice(TOKEN_LETTERS) for _ in range(26))


def holding(places: dict[str, Path], needle: str, raft_groups: dict[str, str] | None = None) -> list[Found]:
    """Every file under each place's folder whose bytes hold `needle` (ASCII, matched case-insensitively, so a
    store that lowercases what it indexes is caught too). Files that vanish while being read are skipped."""
    wanted = needle.lower().encode("ascii")
    found: list[Found] = []
    for place, folder in places.items():
        # os.walk skips a folder that vanishes mid-walk (a raft group's, removed with its stream); rglob raised
        files = (Path(root) / name for root, _, names in os.walk(folder) for name in names)
        for path in sorted(p for p in files if p.is_file() and not p.is_symlink()):
            try:
                count = path.read_bytes().lower().count(wanted)
            except FileNotFoundError:  # a block compacted or a segment replaced while the scan ran
                continue
            if count:
                relative = path.relative_to(folder).as_posix()
                what, raft_log = describe(relative, raft_groups or {})
                found.append(Found(place=place, path=relative, count=count, what=what, raft_log=raft_log))
    return found


async def stream_names(nc: Client) -> list[str]:
    """Every stream of the connection's account."""
    reply = await nc.request("$JS.API.STREAM.NAMES", b"{}", timeout=5)
    return list(json.loads(reply.data).get("streams") or [])


async def raft_groups(nc: Client) -> dict[str, str]:
    """The raft group of each replicated stream, named by its stream (`S-R3F-…` → `stream MEM_DLQ`)."""
    groups: dict[str, str] = {}
    for name in await stream_names(nc):
        info = await nc.jetstream().stream_info(name)
        if info.cluster is not None and info.cluster.raft_group:
            groups[info.cluster.raft_group] = f"stream {name}"
    return groups


async def compressed_streams(nc: Client) -> list[str]:
    """The streams whose blocks are stored compressed (a byte scan cannot see into them)."""
    found = []
    for name in await stream_names(nc):
        compression = (await nc.jetstream().stream_info(name)).config.compression
        if compression not in (None, StoreCompression.NONE):
            found.append(f"{name} ({compression})")
    return found
