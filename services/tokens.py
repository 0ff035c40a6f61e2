"""Tokens that guard engram's own HTTP servers (`engram mcp --transport http`, `engram console`): fit to guard a
network port, read from a file or a setting, never shown; and which addresses only this machine reaches."""
import ipaddress
from pathlib import Path

from pydantic import SecretStr

from shared.errors import ConfigError

MIN_TOKEN_CHARS = 16
MAKE_ONE = "make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def is_loopback(host: str) -> bool:
    """Whether an address to listen on is reachable only from this machine (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def checked_token(token: SecretStr, source: str, what: str = "the MCP token") -> SecretStr:
    """The token, if it is fit to guard a network port: long enough, and one header word (printable ASCII, no
    spaces).

    Args:
        source: where the token came from (a variable or a file), named in the refusal.
        what: which token it is, named in the refusal.
    """
    value = token.get_secret_value().strip()
    if len(value) < MIN_TOKEN_CHARS:
        raise ConfigError(f"{what} from {source} has {len(value)} characters; use at least "
                          f"{MIN_TOKEN_CHARS} ({MAKE_ONE})")
    if not all("!" <= ch <= "~" for ch in value):
        raise ConfigError(f"{what} from {source} holds spaces or characters outside printable ASCII, "
                          f"which an Authorization header cannot carry ({MAKE_ONE})")
    return SecretStr(value)


def read_token_file(path: Path, what: str = "the MCP token") -> SecretStr:
    """The token a file holds (surrounding whitespace and a final newline removed)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--token-file {str(path)!r} cannot be read: {type(exc).__name__}: "
                          f"{getattr(exc, 'strerror', None) or 'not UTF-8 text'}") from exc
    return checked_token(SecretStr(text), f"--token-file {str(path)!r}", what)


def configured_token(configured: SecretStr | None, token_file: Path | None, variable: str,
                     what: str) -> SecretStr | None:
    """The token from the setting `variable` or from --token-file (one of them, checked), or None.

    Raises:
        ConfigError: both are given, the file cannot be read, or the token is unfit.
    """
    if configured is not None and token_file is not None:
        raise ConfigError(f"{what} is given twice ({variable} and --token-file); give one")
    if token_file is not None:
        return read_token_file(token_file, what)
    return checked_token(configured, variable, what) if configured is not None else None
