"""Export files without a broker: a stored entry survives its line field for field, lines that are not importable are
refused with a message naming them, a file is checked whole before anything is imported, and a product's account may
export its tenant's memory but never import into it."""
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from engram_client import Forbidden, InvalidRequest, subjects
from engram_client.contract import EntryView, ExportedTurn, ExportHeader, ExportLine
from engram_client.portable import MAX_LINE_BYTES, check_file, read_export
from shared.store import MemoryEntry
from shared.tenancy import accounts
from shared.tenancy.nkeys import new_user
from shared.tenancy.quotas import Quota
from shared.tenancy.registry import Registry, TenantEntry
from shared.transfer import exported_entry, stored_entry
from shared.transfer.exporting import _turn_cursor

WHEN = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
ID = "6b1f4a4e-3c52-5a1e-9d2b-0c5e6f7a8b9c"


def stored(**fields: Any) -> MemoryEntry:
    """An entry with every field engram writes set to something other than its default."""
    values: dict[str, Any] = dict(
        id=ID, tenant_id="acme", user_id="ana", agent_id="bot", conversation_id="c1", kind="fact",
        text="Ana lives in Porto (stated 8 May 2023).", keywords=["porto"], persons=["Ana"], entities=["Porto"],
        location="Porto", topic="home", occurred_at=WHEN, created_at=WHEN + timedelta(seconds=1),
        updated_at=WHEN + timedelta(seconds=2), source_turn_ids=["t1", "t2"], importance=0.7, access_count=3,
        last_accessed_at=WHEN + timedelta(days=1), superseded_by="0c5e6f7a-8b9c-5a1e-9d2b-6b1f4a4e3c52",
        valid_to=WHEN + timedelta(days=2), merged_from=["1c5e6f7a-8b9c-5a1e-9d2b-6b1f4a4e3c52"], merged_into=None,
        unmerged={"persons": ["Ana"]}, subject="Ana", attribute="lives_in", value="Porto", slot_key="ana/lives_in",
        slot_by_model=True, same_fact_checked=True, outdated_by="2c5e6f7a-8b9c-5a1e-9d2b-6b1f4a4e3c52")
    values = {k: v for k, v in values.items() if k in MemoryEntry.model_fields}
    return MemoryEntry.model_validate({**values, **fields})


def line_of(entry: MemoryEntry) -> dict[str, Any]:
    """The entry's line in a file, as JSON."""
    return json.loads(exported_entry(entry).model_dump_json(exclude_none=True))  # type: ignore[no-any-return]


def test_a_stored_entry_survives_its_export_line_field_for_field() -> None:
    """Every field of a stored entry but its tenant is in its export line (shown or in `internal`), and the line read
    back gives the same entry, under the importing tenant."""
    entry = stored()
    line = line_of(entry)
    assert "tenant_id" not in line and "tenant_id" not in line["internal"]
    assert set(MemoryEntry.model_fields) - {"tenant_id"} == (set(EntryView.model_fields) | set(line["internal"]))
    parsed = ExportLine.model_validate_json(json.dumps(line)).root
    assert stored_entry(parsed, "acme") == entry  # type: ignore[arg-type]
    assert stored_entry(parsed, "moved") == entry.model_copy(update={"tenant_id": "moved"})  # type: ignore[arg-type]


@pytest.mark.parametrize(("change", "needle"), [
    ({"id": "entry-1"}, "is not a UUID"),
    ({"id": ID.upper()}, "is not written as engram writes it"),
    ({"conversation_id": "a conversation"}, "conversation_id 'a conversation'"),
    ({"text": "x" * 200_001}, "at most 200,000"),
    ({"text": "  "}, "must hold text"),
    ({"keywords": ["k"] * 10_001}, "keywords has 10,001 items"),
    ({"topic": "t" * 2_001}, "topic holds a string over 2,000"),
    ({"internal": {"text": "another text"}}, "name none of the entry's own fields"),
    ({"internal": {"tenant_id": "victim"}}, "name none of the entry's own fields"),
    ({"type": "profile"}, "does not match any of the expected tags"),
])
def test_a_line_that_is_not_an_importable_entry_is_refused_naming_what(change: dict[str, Any], needle: str) -> None:
    """An entry line with an id that is not engram's, an oversized text or list, or `internal` fields that would
    stand in for the entry's own or its tenant is refused, and the message says which."""
    with pytest.raises(ValidationError, match=needle):
        ExportLine.model_validate_json(json.dumps({**line_of(stored()), **change}))


def header(tenant: str = "acme", user_id: str | None = None) -> str:
    """A header line."""
    return ExportHeader(type="header", tenant_id=tenant, user_id=user_id, exported_at=WHEN).model_dump_json()


def turn(turn_id: str = "t9", **fields: Any) -> str:
    """A working-memory turn line."""
    return ExportedTurn(type="turn", conversation_id="c2", turn_id=turn_id, speaker="Ana", role="user",
                        text="I am flying to Oslo tomorrow.", ts=WHEN, user_id="ana", **fields).model_dump_json()


def write(tmp_path: Path, *lines: str) -> Path:
    """A file of these lines."""
    path = tmp_path / "export.jsonl"
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def test_a_good_file_is_counted_and_a_file_of_another_tenant_needs_mapping(tmp_path: Path) -> None:
    """check_file counts a good file's entries and turns; the same file for another tenant is refused unless
    mapped."""
    path = write(tmp_path, header(), json.dumps(line_of(stored())), "", turn())
    assert (check_file(path, "acme").entries, check_file(path, "acme").turns) == (1, 1)
    with pytest.raises(Forbidden, match="holds the memory of tenant 'acme', not of tenant 'other'; import it with "
                                        "--map-tenant"):
        check_file(path, "other")
    assert check_file(path, "other", map_tenant=True).entries == 1


@pytest.mark.parametrize(("lines", "error", "needle"), [
    ([json.dumps({"type": "entry"})], InvalidRequest, ":1: not a line of an engram export"),
    ([turn()], InvalidRequest, ":1: an export file starts with its header line"),
    ([header(), header()], InvalidRequest, ":2: a second header"),
    ([header(), "{not json"], InvalidRequest, ":2: not a line of an engram export: invalid ExportLine"),
    ([header(), json.dumps({**line_of(stored()), "tenant_id": "victim"})], Forbidden,
     ":2: entry 6b1f4a4e-3c52-5a1e-9d2b-0c5e6f7a8b9c names tenant 'victim', but the file is of tenant 'acme'"),
    ([header(), turn(tenant_id="victim")], Forbidden, ":2: turn 't9' names tenant 'victim'"),
    ([header(user_id="bo"), turn()], InvalidRequest,
     ":2: turn 't9' belongs to user 'ana', but the file holds the memory of user 'bo' only"),
    ([header(), json.dumps(line_of(stored())), json.dumps(line_of(stored()))], InvalidRequest,
     ":3: entry 6b1f4a4e-3c52-5a1e-9d2b-0c5e6f7a8b9c was on line 2 already"),
    ([header(), turn(), turn()], InvalidRequest, ":3: turn 't9' was on line 2 already"),
    ([], InvalidRequest, "holds no header line"),
])
def test_a_hostile_or_broken_file_is_refused_whole_naming_the_line(
        tmp_path: Path, lines: list[str], error: type[Exception], needle: str) -> None:
    """A file without its header first, with malformed lines, lines naming another tenant or user, or an entry or
    turn twice is refused by check_file (before anything is sent), naming the file's line."""
    with pytest.raises(error, match=needle.replace("(", r"\(")):
        check_file(write(tmp_path, *lines), "acme")


def test_a_line_past_the_size_bound_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    """A line longer than MAX_LINE_BYTES is refused by its number, read no further than the bound."""
    path = tmp_path / "huge.jsonl"
    with path.open("w", encoding="utf-8") as f:
        f.write(header() + "\n")
        f.write('{"type": "entry", "text": "' + "x" * (MAX_LINE_BYTES + 10) + '"}\n')
    with pytest.raises(InvalidRequest, match=f":2: the line is longer than {MAX_LINE_BYTES:,} bytes"):
        list(read_export(path))


def test_turn_cursors_parse_back_and_others_are_refused() -> None:
    """A turns page's cursor is `<sequence>:<conversation id>` (ids may hold ':'); anything else is refused."""
    assert _turn_cursor("12:c:1") == (12, "c:1")
    assert _turn_cursor(None) == (0, None)
    for bad in ("c1", ":c1", "x:c1", "1:"):
        with pytest.raises(InvalidRequest, match="is not a turns cursor"):
            _turn_cursor(bad)


def test_a_product_may_export_its_tenant_but_never_import_into_it() -> None:
    """The accounts engram renders export each tenant's export subject to its product's account alone, and no
    tenant's import subject to anyone: only engram's own account (operators) reaches it."""
    registry = Registry(engram_nkey=new_user().public, system_nkey=new_user().public).with_tenant(
        "acme", TenantEntry(nkey=new_user().public, added_at=WHEN))
    rendered = accounts.render(registry, Quota())
    config = json.loads(rendered.split("accounts: ", 1)[1].split("\nsystem_account", 1)[0])
    exported = {e.get("service") for e in config[accounts.ENGRAM_ACCOUNT]["exports"]}
    imported = {i["service"]["subject"] for i in config[accounts.account_of("acme")]["imports"] if "service" in i}
    allowed = set(config[accounts.account_of("acme")]["users"][0]["permissions"]["publish"]["allow"])
    assert subjects.export("mem", "acme") in exported & imported & allowed
    assert subjects.import_("mem", "acme") not in exported | imported | allowed
