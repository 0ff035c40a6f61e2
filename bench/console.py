"""The console's pages over real HTTP for one user with many entries: p50, p95 and max per page, against 300 ms.

The stack is `engram up` on a nats-server of its own (bench/stack.py). One user of a fresh tenant gets its entries by
importing an export file made here (episodes, facts of which some are superseded, a profile), the cheapest way in
through engram's contract; each entry carries a dense vector named as this engram's embedder's, so the import writes
it as it is instead of embedding every text again. The console runs in this process under uvicorn on a loopback
port, with its own NATS connection, and an httpx client signed in as the operator asks for each page as a browser
would, one after another: a warm-up round, then `rounds` rounds. Beside each page's latency the table gives the NATS
requests it made (read from the console's connection: a request refused over the tenant's rate and asked again
counts twice) and the bytes it received from engram and sent to the browser.
"""
import asyncio
import contextlib
import html
import itertools
import random
import re
import secrets
import socket
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import uvicorn
from nats.aio.client import Client
from pydantic import SecretStr

from bench.stack import engram_up
from engram_client import MemoryClient, connection
from engram_client.contract import ExportedEntry, ExportHeader
from engram_client.security import ANONYMOUS
from services.console.app import build, console_for
from services.console.signin import SignIn
from shared.embedding import embedder_name, embedding_dim
from shared.evaluation.latency import percentiles
from shared.settings import Settings

BUDGET_MS = 300.0                         # the requirement: every page within it at p95
USER, NAME = "mira", "Mira"
START = datetime(2024, 1, 8, 8, 0, tzinfo=UTC)
ENTRIES_PER_CONVERSATION = 50
# Scheduled consolidation would go over the imported user in the middle of the rounds (and may score, outdate or
# forget what was imported): the pages are timed over the memory made here, with no consolidation running beside.
STACK_ENV = {"ENGRAM_CONSOLIDATE_INTERVAL_S": str(10 * 365 * 86400)}

_FRIENDS = ["Tom", "Ana", "Bo", "Lena", "Raj", "Sofia", "Jonas", "Priya"]
_PLACES = ["the harbour", "Lisbon", "the climbing gym", "her office", "the farmers' market", "Utrecht",
           "the old canal", "a ramen bar", "the library", "her parents' house", "the dentist", "Rotterdam Centraal"]
_DOINGS = ["had dinner with {f} at {p}", "went for a long run with {f} and ended up at {p}",
           "met {f} at {p} to plan a trip", "spent the afternoon at {p} reading", "argued with {f} about rent at {p}",
           "took {f} to {p} for a birthday", "worked late at {p} on the quarterly review",
           "lost her keys somewhere near {p}", "found a second-hand bike at {p}",
           "called {f} from {p} about the wedding"]
_AFTER = ["She said it was the best evening in weeks and wants to go back soon.",
          "It rained the whole time, so they ended up in a café talking about work.",
          "{f} brought up the move again; Mira is still not sure about leaving the city.",
          "She mentioned that her knee has been bothering her since the half marathon.",
          "They agreed to meet again next Thursday, same time, if the weather holds.",
          "Mira was tired after a week of deadlines and went home early.",
          "{f} recommended a book about Portuguese history that Mira wants to read.",
          "On the way back she stopped to buy flowers for her neighbour.",
          "She complained that the tram was late again and that the new timetable is worse.",
          "Mira said she is saving for a trip to Japan in the spring."]
# Facts: (attribute, how it is said, the values a newer statement moves through), about Mira and about her friends.
_ATTRIBUTES = [("lives_in", "lives in", ["Utrecht", "Rotterdam", "Delft", "Leiden", "Haarlem"]),
               ("works_at", "works at", ["Philips", "ASML", "Booking.com", "a design studio", "the hospital"]),
               ("drives", "drives", ["a red Fiat", "an old Volvo", "no car, only a bike", "a leased Polestar"]),
               ("trains_at", "trains at", ["the climbing gym", "a boxing club", "the pool", "a running club"]),
               ("learns", "is learning", ["Portuguese", "Japanese", "the cello", "to sail", "pottery"]),
               ("partner", "is together with", ["Jonas", "Sam", "Noor", "Felix"]),
               ("doctor", "sees as doctor", ["Dr. Vos", "Dr. Bakker", "Dr. Smit"]),
               ("reads", "is reading", ["a book on Portuguese history", "a thriller by Tana French", "Middlemarch"]),
               ("pet", "has as pet", ["a cat called Pip", "a dog called Bram", "no pet any more"]),
               ("team", "supports", ["Feyenoord", "Ajax", "FC Utrecht"])]
_LIKES = ["sushi", "jazz", "hiking", "board games", "spicy food", "black coffee", "early mornings", "cats",
          "crime podcasts", "gardening", "modern art", "cycling holidays", "tea", "thrillers", "salsa dancing",
          "rainy Sundays", "street food", "opera", "camping", "horror films", "Italian wine", "the beach",
          "long train rides", "karaoke", "chess"]
_QUERIES = ["Where does Mira live now?", "Who did Mira have dinner with at the harbour?", "Where does Mira work?",
            "What is Mira learning?", "What happened with the bike?", "When is Mira going to Japan?",
            "What did Tom recommend to read?", "Does Mira like sushi?"]


@dataclass
class Seeded:
    """What the benchmark stored for its user, and the entries whose pages it opens."""

    path: Path
    entries: int
    kinds: dict[str, int]
    superseded: int
    conversations: int
    days: int
    episode_id: str
    superseded_id: str


@dataclass
class Page:
    """One page as a browser asks for it, and what its rounds measured."""

    name: str
    method: str
    path: str
    shows: str                     # what the page holds when it is the page asked for (not a sign-in or an error)
    download: bool = False
    form: Callable[[], dict[str, str]] | None = None
    samples_ms: list[float] = field(default_factory=list)
    nats_requests: list[int] = field(default_factory=list)
    nats_kb: list[float] = field(default_factory=list)
    response_kb: float = 0.0


def _text(rng: random.Random, first: str) -> str:
    """`first` followed by sentences of the day, 200-600 characters in all."""
    target = rng.randint(200, 600)
    text = first
    for sentence in rng.sample(_AFTER, len(_AFTER)):
        if len(text) >= target:
            break
        text += " " + sentence.format(f=rng.choice(_FRIENDS))
    return text if len(text) <= 600 else text[:600].rsplit(" ", 1)[0].rstrip(",;") + "…"


def _unit(rng: np.random.Generator, dim: int) -> list[float]:
    vector = rng.standard_normal(dim).astype(np.float32)
    return [float(x) for x in vector / np.linalg.norm(vector)]


@dataclass(frozen=True)
class Slot:
    """A fact a newer statement replaces: about whom, which attribute, and its values with how each is said."""

    subject: str
    attribute: str
    values: list[tuple[str, str]]

    @property
    def key(self) -> str:
        """The supersede key, as engram writes it (shared/compress/model.py)."""
        return f"{self.subject.casefold()}\x1f{self.attribute}"


def _slots(count: int) -> list[Slot]:
    """At most `count` slots: Mira's attributes, her likes (a slot per object), then her friends' attributes."""
    def about(who: str) -> list[Slot]:
        return [Slot(who, a, [(v, f"{who} {said} {v}.") for v in values]) for a, said, values in _ATTRIBUTES]

    likes = [Slot(NAME, f"preference:{like}", [(verb, f"{NAME} {verb} {like}.") for verb in ("likes", "loves",
                                                                                            "no longer likes")])
             for like in _LIKES]
    return (about(NAME) + likes + [s for f in _FRIENDS for s in about(f)])[:count]


def seed_file(path: Path, tenant: str, entries: int, settings: Settings, seed: int = 11) -> Seeded:
    """Write an export file of tenant `tenant` holding `entries` entries of one user (USER): one profile, a tenth
    facts (about a third of them superseded by a newer statement of the same fact), the rest episodes, over a day
    every few hours' worth of entries and a conversation per ENTRIES_PER_CONVERSATION entries."""
    rng, vectors = random.Random(seed), np.random.default_rng(seed)
    dim, embedder = embedding_dim(settings), embedder_name(settings)
    facts = max(2, entries // 10)
    conversations = max(3, entries // ENTRIES_PER_CONVERSATION)
    span_days = max(30, entries // 5)
    step = timedelta(days=span_days) / max(1, entries)
    slots = _slots(max(1, facts * 2 // 3))
    lines: list[ExportedEntry] = []

    def entry(kind: str, n: int, text: str, **more: Any) -> ExportedEntry:
        occurred = START + step * n + timedelta(minutes=rng.randint(0, 90))
        conversation = f"chat-{n * conversations // entries:03d}"
        fields: dict[str, Any] = {
            "type": "entry", "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)), "user_id": USER,
            "conversation_id": conversation, "kind": kind, "text": text,
            "keywords": sorted({w.strip(".,;").lower() for w in text.split() if len(w) > 6})[:8],
            "persons": [NAME, *sorted({f for f in _FRIENDS if f in text})], "occurred_at": occurred,
            "created_at": occurred + timedelta(minutes=5), "updated_at": occurred + timedelta(minutes=5),
            "source_turn_ids": [f"{conversation}-t{n * 4 + i}" for i in range(4)],
            "importance": round(rng.uniform(0.3, 0.9), 2), "internal": {"speaker_ids": [USER]},
            "dense": _unit(vectors, dim), "embedder": embedder, **more}
        return ExportedEntry.model_validate(fields)

    # Episodes and facts interleave along time; the facts of a slot are stated in turn, each superseding the last.
    fact_at = set(rng.sample(range(entries - 1), facts))
    by_slot: dict[int, ExportedEntry] = {}
    now_said: dict[int, str] = {}
    stated = 0
    for n in range(entries - 1):
        if n in fact_at:
            number = stated % len(slots)
            slot = slots[number]
            value, said = slot.values[(stated // len(slots)) % len(slot.values)]
            stated += 1
            line = entry("fact", n, _text(rng, said), subject=slot.subject, attribute=slot.attribute, value=value,
                         slot_key=slot.key)
            before = by_slot.get(number)
            if before is not None:
                lines[lines.index(before)] = before.model_copy(update={
                    "superseded_by": line.id, "valid_to": line.occurred_at, "updated_at": line.created_at})
            by_slot[number], now_said[number] = line, said
        else:
            doing = rng.choice(_DOINGS).format(f=rng.choice(_FRIENDS), p=rng.choice(_PLACES))
            line = entry("episodic", n, _text(rng, f"{NAME} {doing}."), location=rng.choice(_PLACES))
        lines.append(line)
    profile = f"Profile of {USER} (as of {lines[-1].occurred_at:%d %B %Y}):\n" + "\n".join(
        f"- {said}" for said in now_said.values())
    lines.append(entry("profile", entries - 1, profile[:600].rsplit("\n", 1)[0], importance=1.0))
    header = ExportHeader(type="header", tenant_id=tenant, exported_at=datetime.now(UTC), engram_version="bench")
    with path.open("w", encoding="utf-8") as out:
        for written in (header, *lines):
            out.write(written.model_dump_json(exclude_none=True) + "\n")
    superseded = [f for f in lines if f.superseded_by]
    # The entry pages open an episode and the oldest statement of the longest chain (its history is the longest).
    longest = max(superseded, key=lambda f: sum(1 for g in superseded if g.slot_key == f.slot_key))
    oldest = min((f for f in superseded if f.slot_key == longest.slot_key), key=lambda f: f.occurred_at)
    kinds = {k: sum(1 for e in lines if e.kind == k) for k in ("episodic", "fact", "profile")}
    return Seeded(path=path, entries=len(lines), kinds=kinds, superseded=len(superseded),
                  conversations=len({e.conversation_id for e in lines}),
                  days=len({e.occurred_at.date() for e in lines}),
                  episode_id=next(e.id for e in lines[len(lines) // 2:] if e.kind == "episodic"),
                  superseded_id=oldest.id)


@contextlib.asynccontextmanager
async def serving(nc: Client, nats_url: str, token: str) -> AsyncIterator[str]:
    """The console (as `engram console` builds it) under uvicorn on a free loopback port; yields its base URL."""
    app = build(console_for(SignIn(SecretStr(token), None, ANONYMOUS), nc, nats_url, "mem", secure_cookies=False))
    server = uvicorn.Server(uvicorn.Config(app, access_log=False, log_level="warning", lifespan="on"))
    # Bound here, so no other process takes the port first. Named TCP, as the sockets `engram console` binds by
    # host and port are: asyncio sets TCP_NODELAY only on those, and without it a response's body waits ~40 ms
    # behind its headers for the client's delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if task.done() or time.monotonic() > deadline:
                raise RuntimeError("the console did not start under uvicorn")
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task
        sock.close()


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    if found is None:
        raise RuntimeError(f"no CSRF token in the page: {html[:300]}")
    return found.group(1)


async def sign_in(web: httpx.AsyncClient, token: str) -> None:
    """Sign in as the operator (the session's cookie stays in `web`)."""
    form = await web.get("/signin")
    signed = await web.post("/signin", data={"csrf": _csrf(form.text), "token": token})
    if signed.status_code != 303:
        raise RuntimeError(f"sign-in answered {signed.status_code}: {signed.text[:300]}")


async def _ask(web: httpx.AsyncClient, nc: Client, page: Page) -> tuple[float, int, float, httpx.Response]:
    """One request of the page: ms until its whole body is in, NATS requests and KB received over NATS for it."""
    sent, received = nc.stats["out_msgs"], nc.stats["in_bytes"]
    started = time.perf_counter()
    response = await web.request(page.method, page.path, data=page.form() if page.form else None)
    elapsed_ms = (time.perf_counter() - started) * 1e3
    if response.status_code != 200 or page.shows not in response.text:
        raise RuntimeError(f"{page.name} ({page.method} {page.path}) answered {response.status_code} without "
                           f"{page.shows!r}: {response.text[:500]}")
    return elapsed_ms, int(nc.stats["out_msgs"] - sent), (nc.stats["in_bytes"] - received) / 1024, response


async def oldest_page(web: httpx.AsyncClient, tenant: str) -> tuple[str, int]:
    """The path of the user's timeline's last (oldest) page, following its "older" links, and how many pages in."""
    path, pages_in = f"/t/{tenant}/user?id={USER}", 1
    while True:
        older = re.search(r'href="([^"]+)" id="older"', (await web.get(path)).text)
        if older is None:
            return path, pages_in
        path, pages_in = html.unescape(older.group(1)), pages_in + 1


def pages(tenant: str, seeded: Seeded, csrf: Callable[[], str], oldest: tuple[str, int]) -> list[Page]:
    """The pages a person browsing the user's memory opens, in the order they would."""
    queries = itertools.cycle(_QUERIES)
    return [
        Page("tenant", "GET", f"/t/{tenant}", f"/user?id={USER}"),
        Page("timeline", "GET", f"/t/{tenant}/user?id={USER}", 'id="history"'),
        Page(f"timeline, oldest page ({oldest[1]})", "GET", oldest[0], 'id="history"'),
        Page("entry: episode", "GET", f"/t/{tenant}/entry?id={seeded.episode_id}", 'id="state">current<'),
        Page("entry: superseded fact", "GET", f"/t/{tenant}/entry?id={seeded.superseded_id}",
             'id="state">superseded<'),
        Page("recall form", "GET", f"/t/{tenant}/recall?user={USER}", 'id="recall-form"'),
        Page("recall (POST, k=10, explain)", "POST", f"/t/{tenant}/recall", 'id="ranked"',
             form=lambda: {"csrf": csrf(), "query": next(queries), "user_id": USER, "conversation_id": "",
                           "k": "10", "token_budget": "", "mode": "fast"}),
        Page("forget confirmation", "GET", f"/t/{tenant}/forget?user={USER}", f'id="target">{USER}<'),
        Page("export download", "GET", f"/t/{tenant}/export?user={USER}", '"type":"header"', download=True),
    ]


def _row(page: Page) -> dict[str, Any]:
    stats = percentiles(page.samples_ms)
    return {"page": page.name, "method": page.method, "path": page.path, "n": stats.n, "p50": stats.p50,
            "p95": stats.p95, "max": max(page.samples_ms), "mean": stats.mean,
            "within_budget": stats.p95 <= BUDGET_MS, "nats_requests_min": min(page.nats_requests),
            "nats_requests_max": max(page.nats_requests), "nats_kb": statistics.fmean(page.nats_kb),
            "response_kb": page.response_kb, "samples_ms": [round(ms, 2) for ms in page.samples_ms]}


async def measure(url: str, tenant: str, seeded: Seeded, rounds: int) -> list[dict[str, Any]]:
    """Serve the console on its own NATS connection, sign in, and time every page over a warm-up and `rounds`."""
    token = secrets.token_urlsafe(24)
    nc = await connection.connect(url, "bench-console")
    try:
        async with serving(nc, url, token) as base, httpx.AsyncClient(base_url=base, timeout=60) as web:
            await sign_in(web, token)
            session_csrf = _csrf((await web.get(f"/t/{tenant}/recall?user={USER}")).text)
            browsed = pages(tenant, seeded, lambda: session_csrf, await oldest_page(web, tenant))
            for round_number in range(rounds + 1):  # the first is the warm-up
                for page in browsed:
                    elapsed_ms, requests, nats_kb, response = await _ask(web, nc, page)
                    if page.download and response.text.count("\n") < seeded.entries + 1:
                        raise RuntimeError(f"the export holds {response.text.count(chr(10))} lines, not "
                                           f"{seeded.entries + 1}")
                    if round_number > 0:
                        page.samples_ms.append(elapsed_ms)
                        page.nats_requests.append(requests)
                        page.nats_kb.append(nats_kb)
                        page.response_kb = len(response.content) / 1024
    finally:
        await connection.close(nc)
    return [_row(p) for p in browsed]


async def run(entries: int, rounds: int, settings: Settings) -> dict[str, Any]:
    """Store `entries` entries for one user of a fresh tenant, then time the console's pages over `rounds` rounds."""
    tenant = f"console-{secrets.token_hex(3)}"
    with tempfile.TemporaryDirectory(prefix="engram-bench-") as tmp:
        folder = Path(tmp)
        seeded = seed_file(folder / "seed.jsonl", tenant, entries, settings)
        with engram_up(folder / "stack", STACK_ENV) as url:
            async with await MemoryClient.connect(url, tenant, timeout_s=120) as client:
                started = time.perf_counter()
                imported = await client.import_from(seeded.path)
                fill_s = time.perf_counter() - started
            if imported.entries_written != seeded.entries:
                raise RuntimeError(f"the import wrote {imported.entries_written} of {seeded.entries} entries")
            rows = await measure(url, tenant, seeded, rounds)
    shown = [r for r in rows if r["page"] != "export download"]
    return {"entries": seeded.entries, "user": USER, "kinds": seeded.kinds, "superseded": seeded.superseded,
            "conversations": seeded.conversations, "days": seeded.days, "rounds": rounds, "budget_ms": BUDGET_MS,
            "fill_s": fill_s, "pages": shown, "download": next(r for r in rows if r["page"] == "export download"),
            "all_within_budget": all(r["within_budget"] for r in shown)}
