"""The console's plain parts: what a timeline puts under "now" and what in its history, the sign-in checks, and the
refusal to serve other machines without TLS and a token."""
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr

from engram_client.contract import EntryView
from engram_client.security import ANONYMOUS
from services.cli.console_command import guarded
from services.console import views
from services.console.sessions import PER_IDENTITY, Session, Sessions
from services.console.signin import Attempts, SignIn
from shared.errors import ConfigError
from shared.settings import Settings
from shared.tenancy.folder import TenantsFolder
from shared.tenancy.quotas import Quota, QuotaChanges

T0 = datetime(2024, 5, 6, 10, 0, tzinfo=UTC)
TOKEN = "an-operator-token-long-enough"


def view(entry_id: str, kind: str = "episodic", days: int = 0, **fields: object) -> EntryView:
    at = T0 + timedelta(days=days)
    return EntryView.model_validate({"id": entry_id, "conversation_id": "c1", "kind": kind, "text": f"text {entry_id}",
                                     "occurred_at": at, "created_at": at, "updated_at": at, "user_id": "u1",
                                     **fields})


def test_the_timeline_keeps_replaced_entries_in_the_history_only_and_chains_them() -> None:
    """A superseded or merged entry leaves "now" but stays in the history with what replaced it; a fact newer
    evidence may outdate stays current, marked; days are newest first; counts come from the reply."""
    derived = [view("f-old", "fact", 0, superseded_by="f-new"), view("f-new", "fact", 100),
               view("f-doubt", "fact", 5, outdated_by="e-kept"), view("p", "profile", 101)]
    page = [view("e-dup", days=3, merged_into="e-kept"), view("e-kept", days=4), *derived]
    counts = {"episodic": 2, "fact": 3, "profile": 1, "replaced": 2}
    t = views.timeline(page, derived, counts, older={"before": "2024-05-01T00:00:00+00:00"})
    assert [i.entry.id for i in t.facts] == ["f-new", "f-doubt"] and [i.entry.id for i in t.profile] == ["p"]
    states = {i.entry.id: (i.state, i.by.id if i.by else None) for d in t.days for i in d.items}
    assert states["f-old"] == ("superseded", "f-new") and states["e-dup"] == ("merged", "e-kept")
    assert states["f-doubt"] == ("outdated", "e-kept") and states["f-new"] == ("current", None)
    assert [d.day for d in t.days] == sorted((d.day for d in t.days), reverse=True)
    assert t.replaced == 2 and t.counts == {"episodic": 2, "fact": 3, "profile": 1} and t.older and t.first_page


def test_a_replacement_off_the_page_is_still_named() -> None:
    """An entry merged into one that is not on this page keeps the link to it (by id)."""
    t = views.timeline([view("e-dup", merged_into="e-elsewhere")], [], {"episodic": 1})
    [i] = t.days[0].items
    assert i.state == "merged" and i.by is None and i.by_id == "e-elsewhere"


def test_the_operator_token_signs_in_as_operator_and_nothing_else_does() -> None:
    """The exact token (surrounding spaces allowed) is the operator; a prefix, an extension, an empty or a
    seed-looking token without a registry is nobody."""
    signin = SignIn(SecretStr(TOKEN), None, ANONYMOUS)
    access = signin.check(f"  {TOKEN}\n")
    assert access is not None and access.operator and access.reaches("any-tenant")
    for wrong in ("", TOKEN[:-1], TOKEN + "x", "SU" + "A" * 56):
        assert signin.check(wrong) is None
    assert not signin.tenants_sign_in and signin.tenants() == []


def test_a_tenants_seed_signs_in_as_that_tenant_alone(tmp_path: Path) -> None:
    """With a registry, a tenant's seed signs in as that tenant (its connection carries the seed); after a rotation
    the old seed signs in nobody. Without an operator token, the token signs in nobody."""
    folder = TenantsFolder(tmp_path / "tenants")
    folder.init("mem", Quota())
    folder.add("acme", QuotaChanges(), Quota())
    folder.add("globex", QuotaChanges(), Quota())
    signin = SignIn(None, folder.registry_file, ANONYMOUS)
    seed = folder.tenant_seed("acme").read_text().strip()
    access = signin.check(seed)
    assert access is not None and access.tenant == "acme" and not access.operator
    assert access.reaches("acme") and not access.reaches("globex")
    assert access.security is not None and access.security.nkey_seed == seed and seed not in repr(access)
    assert signin.check(TOKEN) is None and signin.tenants() == ["acme", "globex"]
    folder.rotate("acme", Quota())
    assert signin.check(seed) is None
    rotated = signin.check(folder.tenant_seed("acme").read_text())
    assert rotated is not None and rotated.tenant == "acme"


def test_failed_attempts_block_an_address_for_a_minute() -> None:
    """Past the limit an address is blocked; another address is not."""
    attempts = Attempts(per_minute=3)
    for _ in range(3):
        assert not attempts.blocked("10.0.0.1")
        attempts.failed("10.0.0.1")
    assert attempts.blocked("10.0.0.1") and not attempts.blocked("10.0.0.2")


@pytest.mark.parametrize(("host", "token", "tls", "refused"), [
    ("127.0.0.1", None, False, None),
    ("0.0.0.0", None, False, "TLS (--tls-cert, --tls-key) and a token"),
    ("0.0.0.0", TOKEN, False, "without TLS"),
    ("0.0.0.0", None, True, "without a token"),
    ("0.0.0.0", TOKEN, True, None),
    ("console.example", TOKEN, False, "without TLS"),
])
def test_a_bind_other_machines_reach_needs_tls_and_a_token(host: str, token: str | None, tls: bool,
                                                           refused: str | None, tmp_path: Path) -> None:
    """Loopback serves as it is (a token is made for the run); any other address needs both a configured token and
    TLS, and the refusal names what is missing."""
    settings = Settings(console_token=SecretStr(token) if token else None)
    cert, key = (tmp_path / "cert.pem", tmp_path / "key.pem") if tls else (None, None)
    if refused is None:
        got, on = guarded(settings, None, host, cert, key)
        assert on is tls and (got is None) is (token is None)
        return
    with pytest.raises(ConfigError, match=refused.replace("(", r"\(").replace(")", r"\)")):
        guarded(settings, None, host, cert, key)


def test_half_a_tls_configuration_and_a_short_token_are_refused(tmp_path: Path) -> None:
    """--tls-cert without --tls-key is refused, and so is a token too short to guard a port (without showing it)."""
    with pytest.raises(ConfigError, match="both --tls-cert and --tls-key"):
        guarded(Settings(), None, "127.0.0.1", tmp_path / "cert.pem", None)
    with pytest.raises(ConfigError) as short:
        guarded(Settings(console_token=SecretStr("tiny-secret")), None, "127.0.0.1", None, None)
    assert "tiny-secret" not in str(short.value)


def test_a_forget_of_many_entries_names_every_one_though_it_shows_twenty() -> None:
    """The confirmation shows the newest twenty of thirty entries, and carries all thirty ids to the erase."""
    found = [view(f"e{i:02d}", days=i) for i in range(30)]
    p = views.preview("entries", "30", {"episodic": 30}, ["c1"], found, ids=[e.id for e in found])
    assert len(p.entries) == 20 and p.entries[0].id == "e29" and len(p.ids) == 30


async def test_one_identity_keeps_at_most_its_share_of_sessions_and_a_revoked_key_ends_its_own(
        tmp_path: Path) -> None:
    """Signing in again and again as one identity ends that identity's oldest sessions only; a tenant session whose
    key was rotated since is gone at its next request."""
    folder = TenantsFolder(tmp_path / "tenants")
    folder.init("mem", Quota())
    folder.add("acme", QuotaChanges(), Quota())
    signin = SignIn(SecretStr(TOKEN), folder.registry_file, ANONYMOUS)
    sessions = Sessions(operator_nc=object(), signin=signin)  # type: ignore[arg-type]
    operator = signin.check(TOKEN)
    assert operator is not None
    first = [await sessions.start(operator, "nats://unused") for _ in range(PER_IDENTITY)]
    assert all(sessions.get(s.id) is s for s in first)
    newer = await sessions.start(operator, "nats://unused")
    assert sessions.get(first[0].id) is None and first[0].ended.is_set()
    assert sessions.get(newer.id) is newer and sessions.get(first[1].id) is first[1]
    tenant = signin.check(folder.tenant_seed("acme").read_text())
    assert tenant is not None and tenant.security is not None
    revocable = Session(id="s-acme", access=tenant, nc=object(), owns_connection=False)  # type: ignore[arg-type]
    sessions._sessions[revocable.id] = revocable
    assert sessions.get("s-acme") is revocable
    folder.rotate("acme", Quota())
    assert sessions.get("s-acme") is None and revocable.ended.is_set()


def test_an_unreadable_registry_signs_in_no_tenant(tmp_path: Path) -> None:
    """A registry file that is missing or not a registry refuses tenants' seeds (and lists no tenant) instead of
    failing the request."""
    folder = TenantsFolder(tmp_path / "tenants")
    folder.init("mem", Quota())
    folder.add("acme", QuotaChanges(), Quota())
    seed = folder.tenant_seed("acme").read_text()
    for broken in ("{not json", ""):
        folder.registry_file.write_text(broken)
        signin = SignIn(None, folder.registry_file, ANONYMOUS)
        assert signin.check(seed) is None and signin.tenants() == []
    folder.registry_file.unlink()
    assert SignIn(None, folder.registry_file, ANONYMOUS).check(seed) is None
