"""The MCP server: vnc-use's tools on the official MCP Python SDK (the one module importing it).

:func:`build_server` registers the tools on an ``MCPServer``; :func:`serve_stdio` and
:func:`serve_http` run it. Over HTTP (streamable) the server listens on 127.0.0.1 only and
every request must carry ``Authorization: Bearer <token>`` (:class:`BearerAuth`, 401
otherwise).

Tool failures the caller can act on (a point off the screen, an unknown key, a desktop that
cannot be reached, a missing API key) are MCP tool errors with one line of text; the server
goes on. ``run_task`` reports one progress notification per step, and asks a person about a
pending approval by elicitation when the client declares it can (a server request on
handshake-era connections, an ``input_required`` round on 2026-07-28 ones); otherwise, or
when the person cancels, it returns ``awaiting_approval`` and the run waits, durable, for
``approve_run``/``deny_run`` or ``vnc-use approve``.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hmac
import inspect
import json
import socket
import threading
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.elicitation import render_elicitation_schema
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.stdio import stdio_server
from mcp.types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    ImageContent,
    InputRequiredResult,
    TextContent,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vnc_use.agent.state import RunResult
from vnc_use.errors import VncError, VncUseError
from vnc_use.mcp_server.runs import (
    DEFAULT_STEP_LIMIT,
    approval_question,
    outcome,
    run_agent,
    tool_settings,
)
from vnc_use.mcp_server.session import DesktopSession, Shot, ToolInputError
from vnc_use.mcp_server.stdin import claimed_stdin
from vnc_use.runs.spec import RunSpec
from vnc_use.setting import Setting, default_text
from vnc_use.status import RunStatus
from vnc_use.version import __version__

__all__ = ["BearerAuth", "StrictTool", "build_server", "serve_http", "serve_stdio"]

APPROVAL_KEY = "approval"
"""The key of the approval question in an ``input_required`` round."""

INSTRUCTIONS = (
    "vnc-use drives a VNC desktop. Call screenshot first: coordinates of click, scroll and "
    "drag are pixels of the last screenshot (origin top left). Every action returns a fresh "
    "settled screenshot. To hand a whole task to vnc-use's own agent instead, call run_task; "
    "a run may wait for a person's approval (approve_run / deny_run)."
)

_STOP_POLL = 0.05
"""How often (seconds) the stdio server looks whether it was asked to stop."""

X = Annotated[int, Field(description="pixels from the left edge of the last screenshot")]
Y = Annotated[int, Field(description="pixels from the top edge of the last screenshot")]


class Approval(BaseModel):
    """The elicitation form: allow the pending action or not."""

    approve: bool = Field(description="true to allow the action, false to deny it (the run stops)")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _tool_errors(server: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Turn the errors a caller can act on into one-line MCP tool errors."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        async def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except ToolError:
                raise
            except ToolInputError as exc:
                raise ToolError(_one_line(exc)) from None
            except VncError as exc:
                raise ToolError(
                    f"the desktop at {server} cannot be reached: {_one_line(exc)}"
                ) from None
            except (VncUseError, ValueError) as exc:
                raise ToolError(_one_line(exc)) from None

        return guarded

    return wrap


def _shot_result(shot: Shot) -> CallToolResult:
    image = ImageContent(
        type="image", data=base64.b64encode(shot.png).decode("ascii"), mime_type="image/png"
    )
    text = TextContent(type="text", text=shot.describe())
    return CallToolResult(content=[image, text])


def _outcome_result(result: RunResult) -> CallToolResult:
    data = outcome(result)
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(data, indent=1, ensure_ascii=False))],
        structured_content=data,
    )


def _can_elicit(ctx: Context[Any, Any]) -> bool:
    caps = ctx.client_capabilities
    return caps is not None and caps.elicitation is not None


def _decision(answer: Any) -> str | None:
    """``approve``/``deny`` from an elicitation answer; ``None`` when the person cancelled."""
    if not isinstance(answer, ElicitResult):
        return None
    if answer.action == "accept":
        return "approve" if (answer.content or {}).get("approve") is True else "deny"
    return "deny" if answer.action == "decline" else None


class _Tools:
    """The tools' bodies, bound to one desktop session."""

    def __init__(self, session: DesktopSession) -> None:
        self.session = session
        spec = session.spec
        self._step_limit = spec.step_limit if spec is not None else DEFAULT_STEP_LIMIT

    async def _in_thread(self, fn: Callable[[], Any]) -> Any:
        return await anyio.to_thread.run_sync(fn)

    # -- the hands ---------------------------------------------------------------------
    async def screenshot(self) -> CallToolResult:
        return _shot_result(await self._in_thread(self.session.screenshot))

    async def click(
        self,
        x: X,
        y: Y,
        button: Annotated[
            Literal["left", "right", "middle"], Field(description="the mouse button")
        ] = "left",
        count: Annotated[int, Field(ge=1, le=3, description="1 click, 2 double, 3 triple")] = 1,
    ) -> CallToolResult:
        act = functools.partial(self.session.click, x, y, button, count)
        return _shot_result(await self._in_thread(act))

    async def type_text(
        self,
        text: Annotated[str, Field(description="the text to type, exactly")],
        press_enter: Annotated[bool, Field(description="press Enter after the text")] = False,
    ) -> CallToolResult:
        act = functools.partial(self.session.type_text, text, press_enter)
        return _shot_result(await self._in_thread(act))

    async def press_keys(
        self,
        keys: Annotated[
            str,
            Field(
                description="key names joined by '+', pressed in order and released in "
                "reverse, e.g. 'control+s', 'alt+tab', 'enter', 'escape', 'shift+f10'"
            ),
        ],
    ) -> CallToolResult:
        return _shot_result(await self._in_thread(functools.partial(self.session.press_keys, keys)))

    async def scroll(
        self,
        x: X,
        y: Y,
        direction: Annotated[
            Literal["up", "down", "left", "right"], Field(description="which way the view moves")
        ],
        amount: Annotated[int, Field(ge=1, description="about how many pixels to scroll")] = 400,
    ) -> CallToolResult:
        act = functools.partial(self.session.scroll, x, y, direction, amount)
        return _shot_result(await self._in_thread(act))

    async def drag(
        self,
        x: X,
        y: Y,
        to_x: Annotated[int, Field(description="where to release: pixels from the left")],
        to_y: Annotated[int, Field(description="where to release: pixels from the top")],
    ) -> CallToolResult:
        act = functools.partial(self.session.drag, x, y, to_x, to_y)
        return _shot_result(await self._in_thread(act))

    # -- the agent ---------------------------------------------------------------------
    async def _run(self, ctx: Context[Any, Any], total: int, **kwargs: Any) -> RunResult:
        """Run (or answer) a run in a worker thread, one progress notification per step."""

        def on_step(step: int, line: str) -> None:
            anyio.from_thread.run(ctx.report_progress, float(step), float(total), line)

        work = functools.partial(run_agent, self.session, on_step=on_step, **kwargs)
        result: RunResult = await self._in_thread(work)
        return result

    async def run_task(
        self, task: str, ctx: Context[Any, Any], **settings: Any
    ) -> CallToolResult | InputRequiredResult:
        """The ``run_task`` tool (its schema: :func:`_run_task_tool`, from the spec's fields)."""
        total = settings.get("step_limit") or self._step_limit
        state, answers = ctx.request_state, ctx.input_responses
        if state and answers is not None:  # the client answers our approval question
            decision = _decision(answers.get(APPROVAL_KEY))
            # cancelled: the run stays waiting, and is not asked about again in this call
            result = await self._run(ctx, total, thread_id=state, decision=decision or "status")
            return await self._settle(ctx, total, result, ask=decision is not None)
        result = await self._run(ctx, total, task=task, **settings)
        return await self._settle(ctx, total, result)

    async def _settle(
        self, ctx: Context[Any, Any], total: int, result: RunResult, *, ask: bool = True
    ) -> CallToolResult | InputRequiredResult:
        """Ask the person about each approval the run waits on, as long as the client can
        (and the person did not cancel the question)."""
        while ask and result.status == RunStatus.AWAITING_APPROVAL and _can_elicit(ctx):
            question = approval_question(result)
            if not ctx.session.can_send_request:  # 2026-07-28: ask in an input_required round
                request = ElicitRequest(
                    params=ElicitRequestFormParams(
                        message=question, requested_schema=render_elicitation_schema(Approval)
                    )
                )
                return InputRequiredResult(
                    input_requests={APPROVAL_KEY: request}, request_state=result.thread_id
                )
            answer = await ctx.elicit(question, Approval)
            if answer.action == "cancel":
                break
            approve = answer.action == "accept" and answer.data.approve
            decision = "approve" if approve else "deny"
            result = await self._run(ctx, total, thread_id=result.thread_id, decision=decision)
        return _outcome_result(result)

    async def approve_run(
        self,
        thread_id: Annotated[str, Field(description="the run's thread id (from run_task)")],
        ctx: Context[Any, Any],
    ) -> CallToolResult | InputRequiredResult:
        total = self._step_limit
        result = await self._run(ctx, total, thread_id=thread_id, decision="approve")
        return await self._settle(ctx, total, result)

    async def deny_run(
        self,
        thread_id: Annotated[str, Field(description="the run's thread id (from run_task)")],
        ctx: Context[Any, Any],
    ) -> CallToolResult:
        result = await self._run(ctx, self._step_limit, thread_id=thread_id, decision="deny")
        return _outcome_result(result)


def _setting_parameter(f: dataclasses.Field[Any], s: Setting, hint: Any) -> inspect.Parameter:
    """A ``run_task`` argument from a spec field: its type (or null: the session's), its
    one description, its bounds."""
    shown = default_text(f, s)
    default = f"vnc-use mcp {s.flag}" + (f", else {shown}" if shown else "")
    bounds: dict[str, Any] = dict(s.bounds)
    described = Field(description=f"{s.help} (default: {default})", **bounds)
    return inspect.Parameter(
        f.name,
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[hint | None, described],
    )


def _run_task_tool(tools: _Tools, spec_class: type[RunSpec]) -> Callable[..., Any]:
    """``run_task`` with the arguments its schema shows: the task, then each setting a call
    may choose (:func:`~vnc_use.mcp_server.runs.tool_settings`), built from the spec's
    fields, so a setting marked ``tool`` there is an argument here without a change."""

    async def run_task(
        task: str, ctx: Context[Any, Any], **settings: Any
    ) -> CallToolResult | InputRequiredResult:
        return await tools.run_task(task, ctx, **settings)

    hints = typing.get_type_hints(spec_class)
    task_hint = Annotated[str, Field(description="what to do on the desktop, in plain words")]
    parameters = [
        inspect.Parameter("task", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=task_hint),
        inspect.Parameter(
            "ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context[Any, Any]
        ),
        *(_setting_parameter(f, s, hints[f.name]) for f, s in tool_settings(spec_class)),
    ]
    returns = CallToolResult | InputRequiredResult
    run_task.__signature__ = inspect.Signature(parameters, return_annotation=returns)  # type: ignore[attr-defined]
    run_task.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": returns}
    return run_task


DESCRIPTIONS: Mapping[str, str] = {
    "screenshot": "Take a screenshot of the desktop once the screen has settled. Returns the "
    "PNG and its width and height; coordinates of the other tools are pixels of it.",
    "click": "Click at pixel (x, y) of the last screenshot: button left (default), right or "
    "middle; count 2 for a double click, 3 for a triple click. Returns a fresh settled "
    "screenshot.",
    "type_text": "Type text where the keyboard focus is (click a field first). press_enter "
    "presses Enter after it. Returns a fresh settled screenshot.",
    "press_keys": "Press a key or key combination, names joined by '+': 'control+s', "
    "'alt+f4', 'enter', 'escape', 'tab', 'backspace', 'up', 'pagedown', 'f5', 'super'. "
    "Returns a fresh settled screenshot.",
    "scroll": "Scroll the view under pixel (x, y) up, down, left or right by about amount "
    "pixels (default 400). Returns a fresh settled screenshot.",
    "drag": "Drag with the left button from pixel (x, y) to pixel (to_x, to_y). Returns a "
    "fresh settled screenshot.",
    "run_task": "Hand a whole task to vnc-use's own computer-use agent, which works on the "
    "desktop until it is done. Returns status (done, error, awaiting_approval, denied, "
    "step_limit, timeout, blocked, stuck, cost_limit, failed), final_text, thread_id, cost_usd "
    "(null: unknown) and the path of the run's HTML report. When a step needs a person's "
    "approval the person is asked directly if this client supports it; otherwise status is "
    "awaiting_approval with the pending action: ask the person, then call approve_run or "
    "deny_run with the thread_id.",
    "approve_run": "Allow the action a run (by thread_id) waits on; the run goes on. Returns "
    "the run's next outcome, as run_task does. Only when the person said yes.",
    "deny_run": "Refuse the action a run (by thread_id) waits on; the action is not done and "
    "the run stops as denied. Returns the outcome.",
}


def _argument_problems(tool: str, exc: ValidationError, parameters: dict[str, Any]) -> str:
    """One line naming each argument that is missing or of the wrong kind, and what it should
    be (its schema's description), instead of pydantic's multi-line text with a web link. The
    values given are not repeated (a tool's text may be a secret)."""
    properties = parameters.get("properties", {})
    said = []
    for error in exc.errors(include_url=False):
        name = str(error["loc"][0]) if error.get("loc") else "?"
        if error["type"] == "missing":
            problem = "is missing"
        else:
            msg = str(error["msg"]).split(", ")[0]  # "Input should be a valid integer, ..."
            problem = msg.replace("Input should", "should", 1)
        what = properties.get(name, {}).get("description")
        said.append(f"argument {name!r} {problem}" + (f" ({what})" if what else ""))
    return f"{tool}: {'; '.join(said)}; nothing was done"


class StrictTool(Tool):
    """A tool whose input schema forbids unknown properties (``additionalProperties:
    false``); a call with an unknown or misspelt argument gets a one-line tool error naming
    it and the tool's arguments, and one with an argument missing or of the wrong kind a
    one-line error naming it and what it should be; nothing is done."""

    @classmethod
    def strict(cls, tool: Tool) -> StrictTool:
        arg_model = tool.fn_metadata.arg_model
        forbidding: Any = type(
            arg_model.__name__,
            (arg_model,),
            {
                "model_config": ConfigDict(arbitrary_types_allowed=True, extra="forbid"),
                "__module__": arg_model.__module__,
            },
        )
        tool.fn_metadata.arg_model = forbidding
        parameters = forbidding.model_json_schema(by_alias=True)
        values = {name: getattr(tool, name) for name in Tool.model_fields}
        return cls(**{**values, "parameters": parameters})

    async def run(
        self, arguments: dict[str, Any], context: Any, convert_result: bool = False
    ) -> Any:
        known = list(self.parameters.get("properties", {}))
        unknown = sorted(set(arguments) - set(known))
        if unknown:
            raise ToolError(
                f"{self.name} has no argument {unknown[0]!r}; its arguments are: "
                f"{', '.join(known) or 'none'} (nothing was done)"
            )
        try:
            return await super().run(arguments, context, convert_result=convert_result)
        except ToolError as exc:
            # the SDK's check of the arguments (a crash inside the tool is Unexpected...)
            if isinstance(exc.__cause__, ValidationError) and not isinstance(
                exc, UnexpectedToolError
            ):
                raise ToolError(
                    _argument_problems(self.name, exc.__cause__, self.parameters)
                ) from None
            raise


def build_server(session: DesktopSession) -> MCPServer:
    """The MCP server with vnc-use's tools acting on ``session``."""
    tools = _Tools(session)
    guard = _tool_errors(session.target.label)
    spec_class = type(session.spec) if session.spec is not None else RunSpec
    bodies = {"run_task": _run_task_tool(tools, spec_class)}
    registered: list[Tool] = [
        StrictTool.strict(
            Tool.from_function(
                guard(bodies.get(name) or getattr(tools, name)),
                name=name,
                description=description,
                structured_output=False,
            )
        )
        for name, description in DESCRIPTIONS.items()
    ]
    return MCPServer(
        name="vnc-use", version=__version__, instructions=INSTRUCTIONS, tools=registered
    )


async def serve_stdio(server: MCPServer, stop: threading.Event) -> None:
    """Serve on stdin/stdout until the client closes stdin or ``stop`` is set (the CLI sets it
    on SIGTERM or Ctrl-C): the serving then ends as if stdin had closed, the tool call under
    way finishing first, and the caller closes the session. stdin is read by the event loop
    (:mod:`vnc_use.mcp_server.stdin`), so a stop is never stuck behind a thread waiting for
    the client's next line."""
    lowlevel = server._lowlevel_server  # run_stdio_async() takes no stdin of ours
    with claimed_stdin() as stdin:
        async with anyio.create_task_group() as tasks:

            async def end_when_stopped() -> None:
                while not stop.is_set():
                    await anyio.sleep(_STOP_POLL)
                tasks.cancel_scope.cancel()

            tasks.start_soon(end_when_stopped)
            async with stdio_server(stdin=typing.cast(Any, stdin)) as (read, write):
                await lowlevel.run(read, write, lowlevel.create_initialization_options())
            tasks.cancel_scope.cancel()


class BearerAuth:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                body = b'{"error": "unauthorized: send Authorization: Bearer <token>"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b"Bearer"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def listen(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1 (``port`` 0: a free one); raises ``OSError``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    return sock


async def serve_http(server: MCPServer, sock: socket.socket, token: str) -> None:
    """Serve streamable HTTP at ``/mcp`` on ``sock`` until interrupted (Ctrl-C, SIGTERM)."""
    import uvicorn

    app = BearerAuth(server.streamable_http_app(host="127.0.0.1"), token)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def run(coro: Callable[[], Any]) -> None:
    """Run an async serve function to its end.

    A ``KeyboardInterrupt`` raised inside the event loop (a second Ctrl-C or SIGTERM: stop at
    once) can come out of one of the SDK's task groups wrapped in an
    exception group: it is raised here as the plain ``KeyboardInterrupt`` it is, so the server
    stops as asked, never with a traceback."""
    try:
        anyio.run(coro)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt) or not _holds_interrupt(exc):
            raise
        raise KeyboardInterrupt from None


def _holds_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is a ``KeyboardInterrupt`` or an exception group holding one."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    inner = getattr(exc, "exceptions", None)  # BaseExceptionGroup (3.11+, or the backport)
    return isinstance(inner, tuple) and any(
        isinstance(e, BaseException) and _holds_interrupt(e) for e in inner
    )
