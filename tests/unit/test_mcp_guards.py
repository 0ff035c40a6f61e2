"""`engram mcp`'s guards as plain functions: which addresses count as loopback, and the bearer token's checks."""
import pytest
from pydantic import SecretStr

from services.mcp.auth import StaticTokenVerifier, checked_token, http_token, is_loopback
from shared.errors import ConfigError
from shared.settings import Settings

TOKEN = SecretStr("s3cret-" + "k" * 20)


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
