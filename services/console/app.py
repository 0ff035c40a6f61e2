"""The console's web application: Starlette routes rendering Jinja2 pages (autoescaped) over engram_client.

Every page but sign-in needs a session (a random id in an HttpOnly, SameSite=Strict cookie); a tenant's session opens
its own tenant alone, and any other tenant's pages answer 404 as for a tenant that does not exist. Every POST checks
the session's CSRF token (sign-in checks a pre-session one) and, when the browser sends one, the Origin. Responses
carry a strict content security policy (no inline script or style, nothing from elsewhere) and no-store caching.
Nothing a user wrote is logged: uvicorn's access log is off, and the console logs its routes' names, not their paths.
"""
import asyncio
import contextlib
import hmac
import io
import logging
import secrets
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from nats.aio.client import Client
from pydantic import AwareDatetime, TypeAdapter, ValidationError
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram_client import MemoryClient
from engram_client.contract import EntriesRequest, RecallRequest
from engram_client.contract.base import EntryId, Id, TenantId
from engram_client.errors import EngramError, NotFound
from services.console import reads, views
from services.console.sessions import Session, Sessions
from services.console.signin import Attempts, SignIn

log = logging.getLogger("engram.console")

HERE = Path(__file__).parent
COOKIE = "engram_console"
PRE_COOKIE = "engram_console_signin"  # the sign-in form's CSRF token, before there is a session
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
           (b"x-frame-options", b"DENY"), (b"referrer-policy", b"same-origin"),
           (b"cross-origin-opener-policy", b"same-origin"), (b"cache-control", b"no-store")]
MAX_BODY_BYTES = 64 * 1024  # the largest form (a recall query is 4,000 characters; a forget names 100 ids)
MAX_STREAMS = 4  # live panels one session keeps open at once (each a NATS subscription)
IDLE_CHECK_S = 30.0  # how often a quiet event stream checks that its session is still alive
CLIP_CHARS = 600  # of an entry's text in lists; its page shows all of it
SPOOL_BYTES = 4 * 1024 * 1024  # an export kept in memory up to this size, then in a temporary file

_tenant, _id, _entry = TypeAdapter(TenantId), TypeAdapter(Id), TypeAdapter(EntryId)
_instant = TypeAdapter(AwareDatetime)
Handler = Callable[[Request, Session], Awaitable[Response]]


@dataclass
class Console:
    """What the routes share: the sign-in checks, the sessions, NATS, and how the pages are served."""

    signin: SignIn
    sessions: Sessions
    nats_url: str
    prefix: str
    secure_cookies: bool
    default_tenant: str = "default"
    allowed_hosts: list[str] = field(default_factory=list)  # Host header names served (empty: any)
    attempts: Attempts = field(default_factory=Attempts)


class BodyLimit:
    """Refuses a request body over MAX_BODY_BYTES (413) before anything reads it: the console's forms are small, and
    no request may make it hold or spool more, signed in or not."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > MAX_BODY_BYTES:
            await PlainTextResponse("request body too large", 413)(scope, receive, send)
            return
        seen = 0

        async def bounded() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > MAX_BODY_BYTES:  # more than it declared
                return {"type": "http.disconnect"}
            return message

        await self.app(scope, bounded, send)


class SecurityHeaders:
    """Adds the content security policy and the other safety headers to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []), *(h for h in HEADERS if h[0] not in names)]
            await send(message)

        await self.app(scope, receive, with_headers)


def _clip(text: str, chars: int = CLIP_CHARS) -> str:
    return text if len(text) <= chars else text[:chars].rstrip() + "…"


def _templates() -> Jinja2Templates:
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["clip"] = _clip
    env.filters["when"] = lambda d: d.strftime("%Y-%m-%d %H:%M") if d else ""
    return Jinja2Templates(env=env)


TEMPLATES = _templates()


def _valid(adapter: TypeAdapter[str], value: str | None) -> str:
    """A path or query value the contract accepts; anything else is a page that does not exist."""
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        raise HTTPException(404) from exc


def build(console: Console) -> ASGIApp:
    """The console's ASGI application: the routes inside the body limit, the allowed hosts (on loopback, loopback
    names only: a page elsewhere cannot reach it through a name it rebinds to 127.0.0.1) and, outermost, the
    security headers, so even an internal error carries them."""

    def page(request: Request, name: str, session: Session | None, status: int = 200, **context: Any) -> Response:
        return TEMPLATES.TemplateResponse(request, name, {"session": session, "tenant": None, **context},
                                          status_code=status)

    def signed_in(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def route(request: Request) -> Response:
            session = console.sessions.get(request.cookies.get(COOKIE))
            if session is None:
                return RedirectResponse("/signin", 303)
            started = time.perf_counter()
            try:
                response = await handler(request, session)
            except NotFound as exc:
                response = page(request, "error.html", session, 404, title="Not found", code=exc.code,
                                message=str(exc))
            except EngramError as exc:
                response = page(request, "error.html", session, 502 if exc.code in ("unavailable", "timeout") else 400,
                                title="engram refused", code=exc.code, message=str(exc))
            log.debug("%s %s answered %d in %.0f ms", request.method, handler.__name__, response.status_code,
                      1000 * (time.perf_counter() - started))
            return response
        return route

    def tenant_of(request: Request, session: Session) -> str:
        tenant = _valid(_tenant, request.path_params["tenant"])
        if not session.access.reaches(tenant):
            raise HTTPException(404)
        return tenant

    def client(request: Request, session: Session) -> tuple[str, MemoryClient]:
        tenant = tenant_of(request, session)
        return tenant, session.client(tenant, console.prefix)

    async def checked_form(request: Request, expected: str) -> FormData:
        origin = request.headers.get("origin")
        if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
            raise HTTPException(403, "cross-origin request refused")
        form = await request.form(max_files=0, max_fields=128, max_part_size=MAX_BODY_BYTES)
        given = form.get("csrf")
        if not isinstance(given, str) or not expected or not hmac.compare_digest(given.encode(), expected.encode()):
            raise HTTPException(403, "the form's CSRF token is missing or stale; reload the page")
        return form

    async def signin_form(request: Request) -> Response:
        token = request.cookies.get(PRE_COOKIE) or secrets.token_urlsafe(32)
        response = page(request, "signin.html", None, csrf=token, failed=False,
                        tenants_sign_in=console.signin.tenants_sign_in)
        response.set_cookie(PRE_COOKIE, token, httponly=True, samesite="strict", secure=console.secure_cookies)
        return response

    async def signin(request: Request) -> Response:
        address = request.client.host if request.client else "?"
        form = await checked_form(request, request.cookies.get(PRE_COOKIE, ""))
        if console.attempts.blocked(address):
            return PlainTextResponse("too many failed sign-ins; wait a minute", 429)
        given = form.get("token")
        access = console.signin.check(given) if isinstance(given, str) else None
        if access is None:
            console.attempts.failed(address)
            log.info("a failed sign-in")
            return page(request, "signin.html", None, 401, csrf=request.cookies.get(PRE_COOKIE, ""), failed=True,
                        tenants_sign_in=console.signin.tenants_sign_in)
        try:
            session = await console.sessions.start(access, console.nats_url)
        except EngramError as exc:
            return page(request, "error.html", None, 502, title="NATS refused the sign-in", code=exc.code,
                        message=str(exc))
        if (previous := request.cookies.get(COOKIE)) is not None:
            await console.sessions.end(previous)
        log.info("signed in: %s", "operator" if access.operator else f"tenant {access.tenant}")
        response = RedirectResponse("/", 303)
        response.set_cookie(COOKIE, session.id, httponly=True, samesite="strict", secure=console.secure_cookies)
        response.delete_cookie(PRE_COOKIE)
        return response

    @signed_in
    async def signout(request: Request, session: Session) -> Response:
        await checked_form(request, session.csrf)
        await console.sessions.end(session.id)
        response = RedirectResponse("/signin", 303)
        response.delete_cookie(COOKIE)
        return response

    @signed_in
    async def home(request: Request, session: Session) -> Response:
        if session.access.tenant is not None:
            return RedirectResponse(f"/t/{session.access.tenant}", 303)
        wanted = request.query_params.get("tenant")
        if wanted:
            return RedirectResponse(f"/t/{_valid(_tenant, wanted)}", 303)
        return page(request, "tenants.html", session, tenants=console.signin.tenants() or [console.default_tenant])

    @signed_in
    async def tenant_page(request: Request, session: Session) -> Response:
        tenant, memory = client(request, session)
        after = request.query_params.get("after")
        users, more = await reads.owners(memory, "users", after=_valid(_id, after) if after else None)
        conversations, _ = await reads.owners(memory, "conversations", limit=50)
        return page(request, "tenant.html", session, tenant=tenant, users=users, more=more,
                    conversations=conversations)

    def before_of(request: Request) -> tuple[datetime | None, str | None]:
        raw, raw_id = request.query_params.get("before"), request.query_params.get("before_id")
        if not raw:
            return None, None
        try:
            return _instant.validate_python(raw), _entry.validate_python(raw_id) if raw_id else None
        except ValidationError as exc:
            raise HTTPException(404) from exc

    async def timeline_page(request: Request, session: Session, user: str | None,
                            conversation: str | None) -> Response:
        tenant, memory = client(request, session)
        before, before_id = before_of(request)
        read = await reads.memory(memory, user_id=user, conversation_id=conversation, before=before,
                                  before_id=before_id)
        owners = sorted({e.user_id for e in read.page if e.user_id})
        return page(request, "timeline.html", session, tenant=tenant, conversation=conversation,
                    user=user or (owners[0] if len(owners) == 1 else None),
                    timeline=views.timeline(read.page, read.derived, read.counts, older=read.older,
                                            first_page=before is None, conversations=read.conversations,
                                            truncated=read.derived_truncated))

    @signed_in
    async def user_page(request: Request, session: Session) -> Response:
        return await timeline_page(request, session, _valid(_id, request.query_params.get("id")), None)

    @signed_in
    async def conversation_page(request: Request, session: Session) -> Response:
        return await timeline_page(request, session, None, _valid(_id, request.query_params.get("id")))

    @signed_in
    async def entry_page(request: Request, session: Session) -> Response:
        tenant, memory = client(request, session)
        story = await reads.entry_story(memory, _valid(_entry, request.query_params.get("id")))
        if story is None:
            raise NotFound("no such entry in this tenant")
        known = {e.id: e for e in (story.entry, *story.history, *story.replaced)}
        return page(request, "entry.html", session, tenant=tenant, item=views.item(story.entry, known),
                    fields=views.fields(story.entry), history=[views.item(e, known) for e in story.history],
                    replaced=[views.item(e, known) for e in story.replaced])

    @signed_in
    async def recall_page(request: Request, session: Session) -> Response:
        tenant, memory = client(request, session)
        values = {"query": "", "user_id": request.query_params.get("user", ""),
                  "conversation_id": request.query_params.get("conversation", ""), "k": "10", "token_budget": "",
                  "mode": "fast", "include_superseded": False}
        result, problem = None, None
        if request.method == "POST":
            form = await checked_form(request, session.csrf)
            values.update({k: str(form.get(k, "")).strip() for k in
                           ("query", "user_id", "conversation_id", "k", "token_budget", "mode")})
            values["include_superseded"] = form.get("include_superseded") == "on"
            try:
                recall = RecallRequest.model_validate({
                    "query": values["query"], "user_id": values["user_id"] or None,
                    "conversation_id": values["conversation_id"] or None, "k": values["k"] or None,
                    "token_budget": values["token_budget"] or None, "mode": values["mode"],
                    "include_superseded": values["include_superseded"], "explain": True})
            except ValidationError as exc:
                problem = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            else:
                result = await memory.recall(recall)
        rows = [(e, views.reasons(e.explanation)) for e in result.entries] if result else []
        return page(request, "recall.html", session, tenant=tenant, values=values, result=result, rows=rows,
                    problem=problem)

    async def forget_target(request: Request, memory: MemoryClient, source: Any) -> views.Preview:
        if source.get("user") or source.get("conversation"):
            what = "user" if source.get("user") else "conversation"
            target = _valid(_id, source.get(what))
            read = await reads.forget_target(memory, **{f"{what}_id": target})
            return views.preview(what, target, read.counts, read.conversations, read.newest)
        ids = [_valid(_entry, i) for i in (source.getlist("entry") if hasattr(source, "getlist") else [])][:100]
        if not ids:
            raise HTTPException(404)
        found = (await memory.entries(EntriesRequest(op="get", ids=ids))).entries
        if not found:
            raise NotFound("none of these entries is in this tenant")
        return views.preview("entries", str(len(found)), dict(Counter(e.kind for e in found)),
                             sorted({e.conversation_id for e in found}), found, ids=[e.id for e in found])

    @signed_in
    async def forget_page(request: Request, session: Session) -> Response:
        tenant, memory = client(request, session)
        if request.method == "GET":
            target = await forget_target(request, memory, request.query_params)
            return page(request, "forget.html", session, tenant=tenant, preview=target, mismatch=False)
        form = await checked_form(request, session.csrf)
        target = await forget_target(request, memory, form)
        if target.what != "entries" and str(form.get("confirm", "")).strip() != target.target:
            return page(request, "forget.html", session, 400, tenant=tenant, preview=target, mismatch=True)
        receipt = await memory.forget(
            user_id=target.target if target.what == "user" else None,
            conversation_id=target.target if target.what == "conversation" else None,
            entry_ids=target.ids if target.what == "entries" else None)
        log.info("forget (%s) in tenant %s: %d deleted, verified %s", target.what, tenant, receipt.deleted.total,
                 receipt.verified)
        return page(request, "receipt.html", session, tenant=tenant, preview=target, receipt=receipt)

    @signed_in
    async def export_user(request: Request, session: Session) -> Response:
        tenant, memory = client(request, session)
        user = _valid(_id, request.query_params.get("user"))
        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES, mode="w+b")  # noqa: SIM115 (closed when sent)
        out = io.TextIOWrapper(spool, encoding="utf-8", newline="", write_through=True)
        try:
            await memory.export_to(out, user_id=user)
            out.flush()
            out.detach()
            spool.seek(0)
        except BaseException:
            spool.close()
            raise

        def chunks() -> Iterator[bytes]:
            with spool:
                while chunk := spool.read(256 * 1024):
                    yield chunk

        name = f"engram-{tenant}-{user}".replace("/", "_").replace(":", "_")
        return StreamingResponse(chunks(), media_type="application/x-ndjson",
                                 headers={"content-disposition": f'attachment; filename="{name}.jsonl"'})

    @signed_in
    async def events(request: Request, session: Session) -> Response:
        _, memory = client(request, session)
        if session.streams >= MAX_STREAMS:
            return PlainTextResponse("too many live panels open for this session; close one", 429)
        stream = await memory.events()
        session.streams += 1

        async def relay() -> AsyncIterator[dict[str, str]]:
            # Ends with the session (signed out in another tab, idle, too old), not only with the page.
            events = aiter(stream)
            pending: set[asyncio.Future[Any]] = set()
            try:
                while console.sessions.alive(session):
                    nxt = asyncio.ensure_future(anext(events))
                    ended = asyncio.ensure_future(session.ended.wait())
                    pending = {nxt, ended}
                    done, _ = await asyncio.wait(pending, timeout=IDLE_CHECK_S, return_when=asyncio.FIRST_COMPLETED)
                    ended.cancel()
                    if nxt not in done:
                        nxt.cancel()
                        continue
                    try:
                        event = nxt.result()
                    except StopAsyncIteration:
                        return
                    except ValidationError:  # an event this console cannot read: skipped, its content unlogged
                        log.warning("skipped an event that does not parse")
                        continue
                    yield {"event": event.kind, "data": event.model_dump_json()}
            finally:
                for future in pending:
                    future.cancel()
                session.streams -= 1
                await stream.close()

        return EventSourceResponse(relay(), ping=15)

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def no_icon(request: Request) -> Response:
        return Response(status_code=204)

    async def not_found(request: Request, exc: Exception) -> Response:
        session = console.sessions.get(request.cookies.get(COOKIE))
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
        return page(request, "error.html", session, status, title="Not found" if status == 404 else "Refused",
                    code=str(status), message=detail if status != 404 else "nothing here (or not yours to see)")

    routes = [
        Route("/signin", signin_form, methods=["GET"]), Route("/signin", signin, methods=["POST"]),
        Route("/signout", signout, methods=["POST"]), Route("/", home), Route("/healthz", health),
        Route("/favicon.ico", no_icon),
        Route("/t/{tenant}", tenant_page), Route("/t/{tenant}/user", user_page),
        Route("/t/{tenant}/conversation", conversation_page), Route("/t/{tenant}/entry", entry_page),
        Route("/t/{tenant}/recall", recall_page, methods=["GET", "POST"]),
        Route("/t/{tenant}/forget", forget_page, methods=["GET", "POST"]),
        Route("/t/{tenant}/export", export_user), Route("/t/{tenant}/events", events),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sweeper = asyncio.create_task(console.sessions.sweep_forever())
        try:
            yield
        finally:
            sweeper.cancel()
            await console.sessions.close()

    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers={HTTPException: not_found, 500: not_found})
    app.add_middleware(BodyLimit)
    if console.allowed_hosts:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=console.allowed_hosts)
    return SecurityHeaders(app)


LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]


def console_for(signin: SignIn, operator_nc: Client, nats_url: str, prefix: str, secure_cookies: bool,
                default_tenant: str = "default", allowed_hosts: list[str] | None = None) -> Console:
    """The console's shared state."""
    return Console(signin=signin, sessions=Sessions(operator_nc, signin), nats_url=nats_url, prefix=prefix,
                   secure_cookies=secure_cookies, default_tenant=default_tenant, allowed_hosts=allowed_hosts or [])
