"""The console's ASGI app (Starlette): its pages, its JSON API and its files.

================================  ===========================================================
``GET /``                         the start form and the runs list (``?status=&offset=``)
``GET /runs/{id}/``               a run's page; ``fragment`` (JSON: its header and steps now),
                                  ``screenshots/<sha>.png``, ``video.mp4``, ``websockify``
                                  (the live desktop: view only, interactive for the
                                  browser that holds the run)
``GET /api/runs``                 the runs, newest first (``status``, ``offset``, ``limit``)
``POST /api/runs``                start a run (JSON, see :mod:`vnc_use.console.start`): 201
``GET /api/runs/{id}``            one run
``GET /api/runs/{id}/events``     its events as server-sent events
``POST /api/runs/{id}/VERB``      ``approve``, ``deny`` (``{"reason": ...}``), ``stop``,
                                  ``resume``, ``handback`` (``{"note": ...}``): 202;
                                  ``takeover`` (``{"force": bool}``): 200 once the run
                                  waits for this browser; 409 when the run's state
                                  refuses it (or another person holds it)
``GET /api/desktops``             the desktops a run can be started on
================================  ===========================================================

Who holds a run taken over here is a browser (:mod:`vnc_use.console.holding`: its
``vnc_use_holder`` cookie, made by the first page or verb that needs it).

Errors are JSON, ``{"error": "one line"}``, with 400 (naming the field), 401 (no token: see
:mod:`vnc_use.console.auth`), 404 or 409. Every answer passes through the redactor of the
console's own secrets (model keys, desktop passwords) before it leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket

from vnc_use.console import pages
from vnc_use.console.auth import TokenGuard
from vnc_use.console.events import tail
from vnc_use.console.holding import HOLDER_COOKIE, Holding, holder_name, new_holder_id
from vnc_use.console.index import RunIndex
from vnc_use.console.legs import Conflict, Legs
from vnc_use.console.liveview import LiveTarget, PersonSession, relay
from vnc_use.console.start import BadInput, Defaults, spec_from_body
from vnc_use.errors import ConfigError
from vnc_use.record.folder import Redactor, check_thread_id
from vnc_use.record.report.html import render_parts
from vnc_use.record.report.model import load_run
from vnc_use.record.runs import RunSummary
from vnc_use.status import RunStatus
from vnc_use.store.holds import Hold

if TYPE_CHECKING:
    from vnc_use.console.fleet import FleetRuns
    from vnc_use.console.served import ServedRuns

__all__ = ["Console", "build_app"]

STATIC = Path(__file__).with_name("static")
_VERBS = ("approve", "deny", "stop", "resume", "takeover", "handback")
_RESUMABLE = frozenset(
    {
        RunStatus.INTERRUPTED.value,
        RunStatus.ERROR.value,
        RunStatus.STUCK.value,
        RunStatus.COST_LIMIT.value,
        "unfinished",
    }
)
_GOING = frozenset(
    {
        "running",
        "starting",
        "unfinished",
        RunStatus.AWAITING_APPROVAL.value,
        RunStatus.AWAITING_HUMAN.value,
    }
)
"""Statuses of a run that has not ended (the page shows no video yet)."""
_CLOSE_S = 20.0
"""How long a hand-back waits for the person's video segment to be finished."""
_NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


@dataclass
class Console:
    """What the app serves: the runs folder, its defaults, the legs it started, its secrets."""

    defaults: Defaults
    token: str
    secrets: list[str]
    novnc_dir: Path | None = None
    live_target: Callable[[RunSummary], LiveTarget | None] | None = None
    fleet: str | None = None
    """The fleet's database URL (``--fleet``): its table is the runs list."""
    server: str | None = None
    """A LangGraph Server's URL (``--server``): its threads are the runs list."""

    def __post_init__(self) -> None:
        self.runs_dir = Path(self.defaults.runs_dir)
        self.index: RunIndex | FleetRuns | ServedRuns
        if self.fleet:  # the fleet's modules (DBOS, psycopg) load only for a fleet
            from vnc_use.console.fleet import FleetRuns

            self.index = FleetRuns(self.fleet, self.runs_dir)
        elif self.server:
            from vnc_use.console.served import ServedRuns

            self.index = ServedRuns(self.server, self.runs_dir)
        else:
            self.index = RunIndex(self.runs_dir)
        self.index.warm()
        self.legs = Legs(self.runs_dir, fleet=self.fleet, server=self.server)
        self.holding = Holding(self.runs_dir, self.fleet)
        self.sessions: dict[str, set[PersonSession]] = {}
        """The holders' interactive live views open now, by run."""
        self.redact = Redactor([*self.secrets, self.token])

    # -- what a run is now -------------------------------------------------------------------
    def status(self, summary: RunSummary | None, thread_id: str) -> str:
        if summary is None:
            leg = self.legs.leg(thread_id)
            return "error" if leg is not None and not leg.alive else "starting"
        return self.legs.status(thread_id, summary.status)

    def verbs(
        self, status: str, thread_id: str, hold: Hold | None = None, person: str | None = None
    ) -> list[str]:
        """The verbs the page offers for a run in ``status`` (``hold``: a person's hold of
        it; ``person``: who asks, :func:`~vnc_use.console.holding.holder_name`)."""
        if status == RunStatus.AWAITING_APPROVAL and not self.legs.running(thread_id):
            return ["approve", "deny"]
        if self.server and (self.legs.running(thread_id) or status == RunStatus.RUNNING):
            return ["stop"]  # no taking over from the page over a server (docs: Limits)
        if self.legs.running(thread_id) or status == RunStatus.RUNNING:
            return ["stop", "takeover"]
        if status == RunStatus.AWAITING_HUMAN:
            if hold is None:  # the model asked for a person: answer it, or take it first
                return ["takeover", "handback"]
            return ["handback"] if hold.holder == person else ["takeover"]
        if status in _RESUMABLE:
            return ["resume"]
        return []

    def hold(self, status: str, thread_id: str) -> Hold | None:
        """A person's hold of a run that waits for a person (others have none)."""
        if status != RunStatus.AWAITING_HUMAN or self.legs.running(thread_id):
            return None
        return self.holding.hold(thread_id)

    async def revoke(self, thread_id: str, keep: str | None = None) -> None:
        """End the holders' interactive views of the run (but ``keep``'s); returns once they
        have finished (their video segments too), up to :data:`_CLOSE_S`."""
        ending = [s for s in self.sessions.get(thread_id, ()) if s.person != keep]
        for session in ending:
            session.revoke()
        if ending:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(s.closed.wait() for s in ending)), _CLOSE_S)

    def summary(self, thread_id: str) -> RunSummary | None:
        try:
            check_thread_id(thread_id)
        except ValueError:
            return None
        return self.index.get(thread_id)

    def folder(self, thread_id: str) -> Path | None:
        """The run's folder here, once it has recorded something (over a fleet: fetched from
        the fleet's database when no worker on this host writes it)."""
        if isinstance(self.index, RunIndex):
            folder = self.runs_dir / thread_id
            return folder if (folder / "events.jsonl").exists() else None
        if self.server:
            return self.served().folder(thread_id)
        return self.index.fetch(thread_id)  # type: ignore[union-attr]

    def served(self) -> ServedRuns:
        """The server's runs (with ``--server``)."""
        from vnc_use.console.served import ServedRuns

        assert isinstance(self.index, ServedRuns)
        return self.index

    def files(self, thread_id: str) -> Path:
        """Where the run's screenshots and video are read from."""
        if self.server:
            return self.served().path(thread_id)
        return self.runs_dir / thread_id

    def known(self, thread_id: str) -> bool:
        return self.legs.leg(thread_id) is not None or self.summary(thread_id) is not None

    def run_json(self, thread_id: str, person: str | None = None) -> dict[str, Any]:
        s = self.summary(thread_id)
        status = self.status(s, thread_id)
        hold = self.hold(status, thread_id)
        out: dict[str, Any] = {
            "thread_id": thread_id,
            "status": status,
            "url": f"/runs/{thread_id}/",
            "verbs": self.verbs(status, thread_id, hold, person),
            "error": self.legs.leg_error(thread_id),
            "held_by": hold.holder if hold is not None else None,
        }
        if s is not None:
            out.update(_summary_json(s))
            out["status"] = status
            out["error"] = s.error or self.legs.leg_error(thread_id)
        return dict(self.redact(out))


def _summary_json(s: RunSummary) -> dict[str, Any]:
    return {
        "thread_id": s.thread_id,
        "task": s.task,
        "status": s.status,
        "provider": s.provider,
        "model": s.model,
        "desktop": s.desktop,
        "steps": s.steps,
        "cost_usd": s.cost_usd,
        "started": s.started,
        "last_event": s.last_event,
        "duration_s": s.duration_s,
        "final_text": s.final_text,
        "error": s.error,
    }


class _LegWatch:
    """Tells an event stream when the run's leg in this console started or ended (the page's
    controls change then, though the run folder may not)."""

    def __init__(self, console: Console, thread_id: str) -> None:
        self.console = console
        self.thread_id = thread_id
        self.leg = console.legs.leg(thread_id)
        self.running = console.legs.running(thread_id)

    def __call__(self) -> dict[str, Any] | None:
        legs = self.console.legs
        leg, running = legs.leg(self.thread_id), legs.running(self.thread_id)
        if leg is self.leg and running == self.running:
            return None
        self.leg, self.running = leg, running
        message: dict[str, Any] = {"event": "console", "leg": leg.verb if leg else None}
        message["running"] = running
        error = legs.leg_error(self.thread_id)
        if error:
            message["message"] = error
        return message


class _Both:
    """Two watchers of an event stream: the first message of either."""

    def __init__(self, *watches: Callable[[], dict[str, Any] | None]) -> None:
        self.watches = watches

    def __call__(self) -> dict[str, Any] | None:
        found = [m for m in (w() for w in self.watches) if m is not None]
        if not found:
            return None
        merged: dict[str, Any] = {}
        for message in found:
            merged.update(message)
        return merged


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=_NO_STORE)


def _int_param(request: Request, name: str, default: int, top: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadInput(name, f"must be a whole number, got {raw!r}") from None
    if value < 0 or value > top:
        raise BadInput(name, f"must be from 0 to {top}, got {value}")
    return value


Handler = Callable[[Any, Request], Awaitable[Response]]


def _json_errors(handler: Handler) -> Handler:
    async def wrapped(self: Any, request: Request) -> Response:
        try:
            return await handler(self, request)
        except BadInput as exc:
            return _error(400, str(exc))
        except (Conflict, ConfigError) as exc:
            return _error(409, str(exc))

    return wrapped


def _person(request: Request | WebSocket) -> str | None:
    """Who asks: the hold's name of the browser's holder cookie (None: it has none)."""
    holder_id = request.cookies.get(HOLDER_COOKIE)
    return holder_name(holder_id) if holder_id else None


def _with_holder(request: Request, response: Response, holder_id: str | None = None) -> Response:
    """``response``, giving the browser a holder cookie when it has none yet."""
    if request.cookies.get(HOLDER_COOKIE):
        return response
    response.set_cookie(
        HOLDER_COOKIE,
        holder_id or new_holder_id(),
        httponly=True,
        samesite="strict",
        path="/",
    )
    return response


class _Routes:
    """The console's pages and API, as methods over one :class:`Console`."""

    def __init__(self, console: Console) -> None:
        self.c = console

    def redacted_html(self, text: str) -> HTMLResponse:
        return HTMLResponse(self.c.redact.text(text), headers=_NO_STORE)

    def list_page(self, request: Request) -> tuple[Any, str | None]:
        status = request.query_params.get("status") or None
        offset = _int_param(request, "offset", 0, 10**9)
        limit = _int_param(request, "limit", 50, 500)
        return self.c.index.page(status=status, offset=offset, limit=limit), status

    def statuses(self, page: Any) -> dict[str, str]:
        return {s.thread_id: self.c.status(s, s.thread_id) for s in page.runs}

    @_json_errors
    async def index(self, request: Request) -> Response:
        page, status = self.list_page(request)
        table = pages.runs_table(page, self.statuses(page), status)
        return self.redacted_html(pages.runs_page(self.c.defaults, table))

    @_json_errors
    async def runs_fragment(self, request: Request) -> Response:
        page, status = self.list_page(request)
        return self.redacted_html(pages.runs_table(page, self.statuses(page), status))

    async def run_redirect(self, request: Request) -> Response:
        return RedirectResponse(f"/runs/{request.path_params['thread_id']}/", status_code=307)

    def run_parts(self, thread_id: str, person: str | None = None) -> dict[str, Any]:
        s = self.c.summary(thread_id)
        status = self.c.status(s, thread_id)
        hold = self.c.hold(status, thread_id)
        ended = s is not None and not self.c.legs.running(thread_id) and status not in _GOING
        folder = self.c.folder(thread_id) if s is not None else None
        if folder is not None:
            header, main = render_parts(load_run(folder, self.c.redact), video=ended)
        elif s is not None and self.c.server:  # a served run whose folder is not here
            header, main = pages.fleet_parts(s, pages.SERVED_NOTE)
        elif s is not None:  # a fleet's run no worker has started yet
            header, main = pages.fleet_parts(s)
        else:
            header = (
                f"<header><h1>vnc-use run <code>{thread_id}</code></h1><p>starting</p></header>"
            )
            main = '<div class="note">No steps yet.</div>'
        live = (
            (self.c.legs.running(thread_id) or status == RunStatus.AWAITING_HUMAN)
            and s is not None
            and self.c.live_target is not None
            and self.c.live_target(s) is not None
        )
        return {
            "status": status,
            "header": self.c.redact.text(header),
            "main": self.c.redact.text(main),
            "verbs": self.c.verbs(status, thread_id, hold, person),
            "live": bool(live),
            "ended": bool(ended),
            "yours": hold is not None and person is not None and hold.holder == person,
            "held_by": hold.holder if hold is not None else None,
        }

    async def run_page(self, request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        if not self.c.known(thread_id):
            return HTMLResponse("no such run", status_code=404, headers=_NO_STORE)
        parts = self.run_parts(thread_id, _person(request))
        page = self.redacted_html(
            pages.run_page(
                thread_id,
                parts["status"],
                parts["header"],
                parts["main"],
                parts["verbs"],
                live=parts["live"],
                ended=parts["ended"],
                poll=self.c.fleet is not None or self.c.server is not None,
                yours=parts["yours"],
            )
        )
        return _with_holder(request, page)

    async def run_fragment(self, request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        if not self.c.known(thread_id):
            return _error(404, f"no run {thread_id!r} here")
        parts = self.run_parts(thread_id, _person(request))
        return JSONResponse(parts, headers=_NO_STORE)

    async def screenshot(self, request: Request) -> Response:
        thread_id, sha = request.path_params["thread_id"], request.path_params["sha"]
        if self.c.summary(thread_id) is None or not _is_sha(sha):
            return _error(404, "no such screenshot")
        path = self.c.files(thread_id) / "screenshots" / f"{sha}.png"
        if not path.is_file():
            return _error(404, "no such screenshot")
        return FileResponse(path, media_type="image/png")

    async def video(self, request: Request) -> Response:
        thread_id, name = request.path_params["thread_id"], request.path_params["name"]
        if self.c.summary(thread_id) is None or not _is_video_name(name):
            return _error(404, "no such video")
        path = self.c.files(thread_id) / f"{name}.mp4"
        if not path.is_file():
            return _error(404, "no such video")
        return FileResponse(path, media_type="video/mp4")

    # -- the API -----------------------------------------------------------------------------
    @_json_errors
    async def api_runs(self, request: Request) -> Response:
        page, _ = self.list_page(request)
        body = {
            "runs": [
                {**_summary_json(s), "status": self.c.status(s, s.thread_id)} for s in page.runs
            ],
            "total": page.total,
            "offset": page.offset,
            "limit": page.limit,
            "counts": page.counts,
        }
        return JSONResponse(self.c.redact(body), headers=_NO_STORE)

    @_json_errors
    async def api_start(self, request: Request) -> Response:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            raise BadInput("body", "not JSON: send a JSON object with at least a task") from None
        spec, task = spec_from_body(body, self.c.defaults)
        # a server's thread ids are UUIDs (it refuses others)
        thread_id = str(uuid.uuid4()) if self.c.server else uuid.uuid4().hex[:12]
        desk = self.c.defaults.desktop(body.get("desktop") if isinstance(body, dict) else None)
        label = desk.name if desk.kind == "label" else None
        self.c.legs.start(spec.to_json(), task, thread_id, label)
        answer = {"thread_id": thread_id, "url": f"/runs/{thread_id}/", "status": "starting"}
        return JSONResponse(answer, status_code=201, headers=_NO_STORE)

    async def api_run(self, request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        if not self.c.known(thread_id):
            return _error(404, f"no run {thread_id!r} here")
        return JSONResponse(self.c.run_json(thread_id, _person(request)), headers=_NO_STORE)

    async def api_events(self, request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        if not self.c.known(thread_id):
            return _error(404, f"no run {thread_id!r} here")
        last = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
        after = int(last) if last.isdigit() else 0
        extra: Callable[[], dict[str, Any] | None] = _LegWatch(self.c, thread_id)
        if self.c.server:
            from vnc_use.console.served import StatusWatch

            extra = _Both(extra, StatusWatch(self.c.served(), thread_id))
        stream = tail(self.c.files(thread_id), self.c.redact, after=after, extra=extra)
        return StreamingResponse(
            stream,
            media_type="text/event-stream",
            headers={**_NO_STORE, "X-Accel-Buffering": "no"},
        )

    @_json_errors
    async def api_verb(self, request: Request) -> Response:
        thread_id, verb = request.path_params["thread_id"], request.path_params["verb"]
        if verb not in _VERBS:
            return _error(404, f"no verb {verb!r}: use one of {', '.join(_VERBS)}")
        s = self.c.summary(thread_id)
        if s is None and self.c.legs.leg(thread_id) is None:
            return _error(404, f"no run {thread_id!r} here")
        if verb in ("takeover", "handback"):
            return await self.person_verb(request, verb, thread_id, s)
        reason = None
        if verb == "deny":
            reason = (await _body(request, '{} or {"reason": "..."}')).get("reason")
            if reason is not None and not isinstance(reason, str):
                raise BadInput("reason", "must be text")
        recorded = s.status if s is not None else "starting"
        if verb in ("approve", "deny"):
            self.c.legs.answer(thread_id, verb, recorded, reason)
            message = f"{verb}d: the run goes on" if verb == "approve" else "denied"
        elif verb == "stop":
            self.c.legs.stop(thread_id, recorded)
            message = "stopping at the next step boundary"
        else:
            self.c.legs.resume(thread_id, recorded)
            message = "resuming"
        if self.c.server:
            self.c.served().forget(thread_id)
        return JSONResponse(
            {"thread_id": thread_id, "verb": verb, "message": message},
            status_code=202,
            headers=_NO_STORE,
        )

    async def person_verb(
        self, request: Request, verb: str, thread_id: str, s: RunSummary | None
    ) -> Response:
        """``takeover`` or ``handback`` (not over a server: the CLI's, named in one line)."""
        if self.c.server:
            raise Conflict(
                f"run {thread_id}: {verb} is not offered by a console over a server: use "
                f"'vnc-use {verb} --server {self.c.server} {thread_id}'"
            )
        if verb == "takeover":
            return await self.takeover(request, thread_id)
        return await self.handback(request, thread_id, s)

    async def takeover(self, request: Request, thread_id: str) -> Response:
        """This browser takes the run over: answered once the run waits for it."""
        body = await _body(request, '{} or {"force": true}')
        force = body.get("force", False)
        if not isinstance(force, bool):
            raise BadInput("force", f"must be true or false, got {force!r}")
        holder_id = request.cookies.get(HOLDER_COOKIE) or new_holder_id()
        person = holder_name(holder_id)
        await asyncio.to_thread(self.c.holding.take, thread_id, person, force)
        await self.c.revoke(thread_id, keep=person)  # forced: the old holder's view ends
        answer = {
            "thread_id": thread_id,
            "verb": "takeover",
            "holder": person,
            "message": "taken over: the desktop is yours (the live view takes your input)",
        }
        response = JSONResponse(answer, headers=_NO_STORE)
        return _with_holder(request, response, holder_id)

    async def handback(self, request: Request, thread_id: str, s: RunSummary | None) -> Response:
        """This browser hands the run back (only its holder may): the run's next leg starts."""
        body = await _body(request, '{} or {"note": "..."}')
        note = body.get("note")
        if note is not None and not isinstance(note, str):
            raise BadInput("note", "must be text")
        person = _person(request) or "console"
        await asyncio.to_thread(self.c.holding.check_holder, thread_id, person)
        await self.c.revoke(thread_id)  # view only again at once
        self.c.legs.handback(thread_id, s.status if s else "starting", note, person)
        return JSONResponse(
            {"thread_id": thread_id, "verb": "handback", "message": "handed back: the run goes on"},
            status_code=202,
            headers=_NO_STORE,
        )

    async def api_desktops(self, request: Request) -> Response:
        return JSONResponse(
            {"desktops": [d.to_json() for d in self.c.defaults.desktops]}, headers=_NO_STORE
        )

    async def websockify(self, websocket: WebSocket) -> None:
        thread_id = websocket.path_params["thread_id"]
        s = self.c.summary(thread_id)
        target = (
            self.c.live_target(s) if (s is not None and self.c.live_target is not None) else None
        )
        if target is None:
            await websocket.close(code=4404)
            return
        person = _person(websocket) if websocket.query_params.get("input") == "1" else None
        hold = await asyncio.to_thread(self.c.holding.hold, thread_id) if person else None
        if hold is None or hold.holder != person or person is None:
            await relay(websocket, target)
            return
        await self.holder_view(websocket, target, thread_id, person)

    async def holder_view(
        self, websocket: WebSocket, target: LiveTarget, thread_id: str, person: str
    ) -> None:
        """The holder's interactive live view: their input recorded as ``vnc-use view
        --interactive`` records it (clicks with positions, key presses as a count)."""
        from vnc_use.runs.takeover import PersonRecorder, person_video

        video = contextlib.ExitStack()
        sink = None
        if self.c.fleet:  # the run's events are the fleet's database's
            from vnc_use.console.holding import FleetEvents

            sink = await asyncio.to_thread(FleetEvents, self.c.fleet, thread_id)
            video.callback(sink.close)
        recorder = PersonRecorder(self.c.runs_dir, thread_id, list(self.c.secrets), folder=sink)
        session = PersonSession(person, recorder.click, recorder.key, recorder.lost)

        async def still_held() -> bool:
            hold = await asyncio.to_thread(self.c.holding.hold, thread_id)
            return hold is not None and hold.holder == person

        others = self.c.sessions.setdefault(thread_id, set())
        filming = not others  # one video segment at a time: the first open session's
        others.add(session)
        try:
            if target.full_password and filming:  # the person's part of the video, as view does
                server = f"{target.host}::{target.port}"
                if sink is not None:  # a fleet run: the segment goes into the fleet's database
                    from vnc_use.console.fleet import FleetRuns

                    index = self.c.index
                    assert isinstance(index, FleetRuns)
                    part = index.person_video(thread_id, server, target.full_password, sink)
                else:
                    part = person_video(self.c.runs_dir, thread_id, server, target.full_password)
                await asyncio.to_thread(video.enter_context, part)
            await relay(websocket, target, session, still_held)
        finally:
            recorder.close()
            try:
                await asyncio.to_thread(video.close)
            finally:
                session.closed.set()
                self.c.sessions.get(thread_id, set()).discard(session)

    def app(self) -> Any:
        """The routes behind the token guard."""
        routes: list[Any] = [
            Route("/", self.index),
            Route("/fragments/runs", self.runs_fragment),
            Route("/runs/{thread_id}", self.run_redirect),
            Route("/runs/{thread_id}/", self.run_page),
            Route("/runs/{thread_id}/fragment", self.run_fragment),
            Route("/runs/{thread_id}/screenshots/{sha}.png", self.screenshot),
            Route("/runs/{thread_id}/{name}.mp4", self.video),
            WebSocketRoute("/runs/{thread_id}/websockify", self.websockify),
            Route("/api/runs", self.api_runs, methods=["GET"]),
            Route("/api/runs", self.api_start, methods=["POST"]),
            Route("/api/runs/{thread_id}", self.api_run, methods=["GET"]),
            Route("/api/runs/{thread_id}/events", self.api_events, methods=["GET"]),
            Route("/api/runs/{thread_id}/{verb}", self.api_verb, methods=["POST"]),
            Route("/api/desktops", self.api_desktops, methods=["GET"]),
            Mount("/static", app=StaticFiles(directory=STATIC)),
        ]
        if self.c.novnc_dir is not None:
            for root in ("core", "vendor"):
                routes.append(
                    Mount(f"/novnc/{root}", app=StaticFiles(directory=self.c.novnc_dir / root))
                )
        app = Starlette(routes=routes)
        return TokenGuard(app, self.c.token)


def build_app(console: Console) -> Any:
    """The console's ASGI app, behind its token guard."""
    return _Routes(console).app()


async def _body(request: Request, shape: str) -> dict[str, Any]:
    """The request's JSON object (an empty body is ``{}``)."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError:
        raise BadInput("body", f"not JSON: send {shape}") from None
    if not isinstance(body, dict):
        raise BadInput("body", f"send {shape}")
    return body


def _is_sha(text: str) -> bool:
    return len(text) == 64 and all(ch in "0123456789abcdef" for ch in text)


def _is_video_name(name: str) -> bool:
    if name == "video":
        return True
    head, _, number = name.partition("-")
    return head == "video" and number.isdigit()
