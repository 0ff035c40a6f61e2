"""`engram mcp`'s guards as plain functions: which addresses count as loopback, the bearer token's checks, and
forget's confirm tokens (once, for one request, until they expire; a clock of the test's own)."""
import pytest
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import SecretStr

from services.mcp.auth import StaticTokenVerifier, http_token
from services.mcp.confirm import MAX_PENDING, Confirmations, Target
from services.tokens import checked_token, is_loopback
from shared.errors import ConfigError
from shared.settings import Settings

TOKEN = SecretStr("s3cret-" + "k" * 20)
ONE = Target(everything=False, entry_ids=("a",))


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("LocalHost", True), ("0.0.0.0", False), ("::", False), ("10.0.0.5", False), ("example.org", False),
    ("localhost.example.org", False), ("", False)])
def test_only_addresses_of_this_machine_count_as_loopback(host: str, loopback: bool) -> None:
    """127.0.0.0/8, ::1 and localhost are loopback; every other address or host name is not."""
    assert is_loopback(host) is loopback


def test_no_token_is_needed_on_loopback_and_one_is_required_elsewhere() -> None:
    """Without a token loopback serves and 0.0.0.0 is refused, saying how to fix it; a configured token is kept."""
    assert http_token(None, None, "127.0.0.1", "ana") is None
    with pytest.raises(ConfigError, match=r"--token-file PATH .* or ENGRAM_MCP_TOKEN"):
        http_token(None, None, "0.0.0.0", "ana")
    token = http_token(TOKEN, None, "0.0.0.0", "ana")
    assert token is not None and token.get_secret_value() == TOKEN.get_secret_value()


def test_the_token_setting_is_secret() -> None:
    """ENGRAM_MCP_TOKEN is read as a SecretStr: neither the settings' repr nor the verifier's shows it."""
    settings = Settings(mcp_token=TOKEN)
    assert TOKEN.get_secret_value() not in repr(settings)
    assert TOKEN.get_secret_value() not in repr(StaticTokenVerifier(TOKEN))


@pytest.mark.parametrize("value", ["short", "has a space in the middle", "tab\tseparated-and-long-enough",
                                   "non-ascii-é-long-enough-token"])
def test_a_token_unfit_for_a_header_is_refused_without_being_shown(value: str) -> None:
    """Too short, or not one header word of printable ASCII: refused, and the message does not show it."""
    with pytest.raises(ConfigError) as refused:
        checked_token(SecretStr(value), "ENGRAM_MCP_TOKEN")
    assert value not in str(refused.value)


async def test_the_verifier_accepts_exactly_the_token() -> None:
    """The same token is accepted (without the token itself on the access it grants); any other is not."""
    verifier = StaticTokenVerifier(TOKEN)
    access = await verifier.verify_token(TOKEN.get_secret_value())
    assert access is not None and TOKEN.get_secret_value() not in access.model_dump_json()
    for other in ("", TOKEN.get_secret_value()[:-1], TOKEN.get_secret_value() + "k", "é" * 27):
        assert await verifier.verify_token(other) is None


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_confirm_token_confirms_its_request_once() -> None:
    """The token of a preview confirms that request; used again, or for another request, it is refused."""
    confirmations = Confirmations(clock=Clock())
    issued = confirmations.issue(ONE)
    confirmations.redeem(issued.token, ONE, "ana")
    with pytest.raises(ToolError, match="unknown or already used"):
        confirmations.redeem(issued.token, ONE, "ana")
    other = confirmations.issue(ONE)
    with pytest.raises(ToolError, match="issued for the entries a, not for everything engram holds about user 'ana'"):
        confirmations.redeem(other.token, Target(everything=True), "ana")
    with pytest.raises(ToolError, match="unknown or already used"):  # a refused token is gone too
        confirmations.redeem(other.token, ONE, "ana")


def test_a_confirm_token_expires() -> None:
    """Past the TTL a token is refused as expired; just before it, it still confirms."""
    clock = Clock()
    confirmations = Confirmations(ttl_s=300, clock=clock)
    late, in_time = confirmations.issue(ONE), confirmations.issue(ONE)
    clock.now += 299.9
    confirmations.redeem(in_time.token, ONE, "ana")
    clock.now += 0.1
    with pytest.raises(ToolError, match="expired"):
        confirmations.redeem(late.token, ONE, "ana")


def test_unconfirmed_previews_are_bounded() -> None:
    """Previews nobody confirms do not pile up: expired ones go at the next preview, and past MAX_PENDING the oldest
    token lapses."""
    clock = Clock()
    confirmations = Confirmations(ttl_s=300, clock=clock)
    for _ in range(10):
        confirmations.issue(ONE)
    clock.now += 301
    confirmations.issue(ONE)
    assert len(confirmations) == 1
    first = confirmations.issue(ONE)
    for _ in range(MAX_PENDING):
        confirmations.issue(ONE)
    assert len(confirmations) == MAX_PENDING
    with pytest.raises(ToolError, match="unknown"):
        confirmations.redeem(first.token, ONE, "ana")
