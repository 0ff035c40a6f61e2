"""Subjects and streams are built in one place; one function gives both the pattern and the address."""
from engram_client import subjects
from shared.messaging import streams


def test_pattern_and_address_come_from_one_function() -> None:
    """Each subject function gives the {tenant} pattern without a tenant and the address with one, for turns, recall,
    flush, dead letters and events."""
    assert subjects.turns("mem") == "mem.{tenant}.turns"
    assert subjects.turns("mem", "acme") == "mem.acme.turns"
    assert subjects.recall("mem", "acme") == "mem.acme.recall"
    assert subjects.flush("x", "acme") == "x.acme.flush"
    assert subjects.dlq("mem", "acme") == "mem.dlq.acme.>"
    assert subjects.dlq("mem", "acme", "ingestor") == "mem.dlq.acme.ingestor"
    assert subjects.events("mem", "acme", "entry_created") == "mem.acme.events.entry_created"
    assert subjects.events("mem", "acme") == "mem.acme.events.>"


def test_each_tenant_has_a_stream_of_its_turns_and_flushes_in_one_order() -> None:
    """A tenant's stream, MEM_TURNS_<tenant>, captures its turns and flushes together (the legacy MEM_TURNS held
    every tenant's), and the dead-letter stream captures every tenant's per-consumer subjects."""
    assert streams.turns_stream("mem", "acme") == "MEM_TURNS_acme"
    assert streams.turns_subjects("mem", "acme") == ["mem.acme.turns", "mem.acme.flush"]
    assert streams.turns_subjects("mem") == ["mem.*.turns", "mem.*.flush"]
    assert streams.legacy_turns_stream("mem") == "MEM_TURNS"
    assert streams.dlq_subjects("mem") == ["mem.dlq.*.*"]


def test_a_subject_parses_back_to_tenant_and_kind() -> None:
    """A three-token subject parses back to its tenant and kind, while a longer subject or an empty tenant parses as
    unknown."""
    assert subjects.parse(subjects.turns("mem", "acme")) == ("acme", "turns")
    assert subjects.parse("mem.acme.events.entry_created") == ("unknown", "")
    assert subjects.parse("mem..turns") == ("unknown", "")
