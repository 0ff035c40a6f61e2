"""How any exception maps onto the wire: a stable error code and a message that says what was wrong."""
import json

from pydantic import ValidationError

from engram_client.contract import ErrorBody
from engram_client.errors import EngramError, ErrorCode

_MAX_MESSAGE = 1000


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "payload"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    more = f" (+{exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "; ".join(parts) + more


def code_of(exc: BaseException) -> ErrorCode:
    """The wire code of an exception: its own for EngramError, invalid_request for bad input, else internal."""
    if isinstance(exc, EngramError):
        return exc.code
    if isinstance(exc, ValidationError | json.JSONDecodeError | UnicodeDecodeError):
        return "invalid_request"
    return "internal"


def error_body(exc: BaseException) -> ErrorBody:
    """The `error{code, message}` of a reply for this exception."""
    code = code_of(exc)
    if isinstance(exc, ValidationError):
        message = f"invalid {exc.title}: {_validation_message(exc)}"
    elif isinstance(exc, json.JSONDecodeError):
        message = f"payload is not valid JSON: {exc.msg} at position {exc.pos}"
    elif code == "internal" and not getattr(exc, "explained", False):  # an explained one says what, not whose
        message = f"internal error ({type(exc).__name__}); the service logged the details"
    else:
        message = str(exc)
    return ErrorBody(code=code, message=message[:_MAX_MESSAGE])
