"""Who may reach `engram mcp` over HTTP: one bearer token, checked by the MCP SDK's own auth hooks.

A static token is all `engram mcp` needs (one process, one user's memory); the SDK's `TokenVerifier` and
`AuthSettings` put it in front of `/mcp`, so every request without `Authorization: Bearer <token>` is answered 401
before it reaches a tool. The token lives in a `SecretStr` from the moment it is read: no repr, log line or error
message shows it.
"""
import hmac
from pathlib import Path

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from pydantic import SecretStr

from services.tokens import MAKE_ONE, configured_token, is_loopback
from shared.errors import ConfigError

# The SDK keeps the verified token on the request (scope["user"]); engram's stays out of it.
CLIENT_ID = "engram-mcp"


class StaticTokenVerifier:
    """Accepts exactly one bearer token, compared in constant time."""

    def __init__(self, token: SecretStr) -> None:
        self._token = token

    async def verify_token(self, token: str) -> AccessToken | None:
        """The access the token grants (everything this server serves), or None when it is not the token."""
        if hmac.compare_digest(token.encode(), self._token.get_secret_value().encode()):
            return AccessToken(token="(engram mcp bearer token)", client_id=CLIENT_ID, scopes=[])
        return None

    def __repr__(self) -> str:
        return f"StaticTokenVerifier(token={self._token!r})"


def auth_settings() -> AuthSettings:
    """The SDK's auth settings for a static token: no scopes, no OAuth routes, no metadata.

    `AuthSettings` requires an OAuth issuer; a static token has none, and the SDK only uses `issuer_url` for the
    authorization-server routes (not served: no provider) and the protected-resource metadata (not served:
    `resource_server_url` is None), so it names a host that cannot resolve.
    """
    return AuthSettings(issuer_url="https://engram-mcp.invalid", resource_server_url=None)


def http_token(configured: SecretStr | None, token_file: Path | None, host: str, user_id: str) -> SecretStr | None:
    """The bearer token `engram mcp --transport http` requires, from ENGRAM_MCP_TOKEN or --token-file; refuses to
    serve an address other machines reach without one.

    Args:
        configured: ENGRAM_MCP_TOKEN.
        user_id: the user the tools act for, named in the refusal.
    """
    token = configured_token(configured, token_file, "ENGRAM_MCP_TOKEN", "the MCP token")
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to serve MCP over HTTP on --host {host!r} without a token: whoever reaches it would read and "
            f"erase the memory of user {user_id!r}. Require a bearer token with --token-file PATH (a file holding "
            f"it) or ENGRAM_MCP_TOKEN ({MAKE_ONE}); clients then send 'Authorization: Bearer <token>'. Or listen "
            f"on 127.0.0.1 (the default)")
    return token
