"""A strict local stand-in for OpenAI-compatible chat-completions servers.

It speaks ``POST /v1/chat/completions``, ``GET /v1/models`` and ``GET /v1/models/{id}`` on
127.0.0.1 (an ephemeral port by default) like LM Studio, Ollama or vLLM serving a vision model:
it answers from a *script* of assistant messages in any dialect — plain text (UI-TARS's
``Thought: … Action: click(start_box='(100,200)')``, Qwen's ``<tool_call>{…}</tool_call>``
blocks), native ``tool_calls`` (ids generated unless the script gives them), a ``finish(text)``
call, an HTTP error or a delay — records every request, and refuses what a strict server
refuses. The real ``openai`` SDK talks to it with ``OpenAI(base_url=standin.base_url,
api_key="anything")`` (``base_url`` ends in ``/v1``).

Refusals come in OpenAI's error object ``{"error": {"message", "type":
"invalid_request_error", "param", "code"}}`` (https://platform.openai.com/docs/guides/error-codes;
the ``Error`` schema of openai/openai-openapi; the ``openai`` SDK reads ``body["error"]`` into
``APIStatusError.message/.type/.param/.code``). Servers differ: older vLLM answers a flat
``{"object": "error", "message", "type": "BadRequestError", "param", "code": 400}``, which the
SDK reads as well (script it with :meth:`Reply.raw` when a test needs that shape). Each refusal
is recorded as a :class:`Violation` under its rule name (the wording is in
:mod:`vnc_use.testing.openai_checks`):

* ``json`` — the body is not a JSON object (400);
* ``missing_field`` — no ``model``, no or empty ``messages``, a ``tool`` message without
  ``tool_call_id``, a replayed tool call without ``id``, a tool without a name (400);
* ``field_type`` — a value of the wrong kind, e.g. ``function.arguments`` that is not a JSON
  string, an ``image_url`` given as a bare string (400);
* ``stream`` — ``stream: true`` (the stand-in does not stream; 400);
* ``tools`` — a declared tool that is not ``{"type": "function", "function": {"name",
  "parameters"?}}`` with a name of 1-64 letters, digits, ``_`` or ``-``, or a ``tool_choice``
  without ``tools`` (400);
* ``role`` — a role other than system, developer, user, assistant, tool (400);
* ``model_not_found`` — a model id not in :attr:`OpenAIStandIn.models`, as a server answers
  when the model is not loaded (404, code ``model_not_found``);
* ``content_part`` — a part type other than ``text`` (any role) or ``image_url`` (user) (400);
* ``image_role`` — an image in a ``tool``, ``assistant`` or ``system`` message: a tool message's
  content must be text (the SDK's type allows only text there) (400);
* ``tool_without_call`` / ``unknown_tool_call_id`` — a ``tool`` message that follows no
  assistant ``tool_calls``, or answers an id that assistant message did not make (400);
* ``unanswered_tool_call`` — an assistant message's tool call not answered by a ``tool``
  message before the next user/assistant/system message or the end of the request (400);
* ``image_data`` — an image that is not a ``data:image/png|jpeg;base64,`` URL whose bytes
  Pillow decodes as that format (400, code ``invalid_image_format`` / ``invalid_image_url``);
* ``max_images`` — more images in the whole request than ``max_images`` (default
  :data:`DEFAULT_MAX_IMAGES` = 4, like a vLLM started with ``--limit-mm-per-prompt
  '{"image": 4}'``; vLLM's words) (400);
* ``api_key`` — with ``expected_api_key`` set, a missing or different bearer key (401, code
  ``invalid_api_key``); by default any key or none is accepted, as local servers do.

A refused request does not consume a script item. Every violation also goes to the callables
registered with :func:`add_violation_listener`.

Python use::

    with OpenAIStandIn([Reply.text("Thought: the menu.\\nAction: click(start_box='(100,200)')"),
                        Reply.tool_calls(ToolCall("click", {"x": 500, "y": 500})),
                        Reply.finish("done")], models=["ui-tars-1.5-7b"]) as server:
        client = OpenAI(base_url=server.base_url, api_key="none")
        ...
        assert not server.violations and not server.exhausted

The script may also be a callable ``(request_body, index) -> Reply | dict`` (a dict in the JSON
item format below). When a list script runs out, the stand-in answers the text
:data:`EXHAUSTED_TEXT` and sets :attr:`OpenAIStandIn.exhausted`.

Command line (for people)::

    python -m vnc_use.testing.openai_standin --script script.json --port N \\
        [--model ID ...] [--max-images K]

(``--api responses`` serves OpenAI's Responses API with the GA computer tool instead: see
:mod:`vnc_use.testing.openai_responses_standin`; ``--family holo --runs-dir runs`` with
optional ``--convention relative|qwen25-pixels|ui-tars-pixels`` and ``--offset DX,DY``
answers ``vnc-use calibrate`` like a model family instead of a script, rightly or wrongly on
purpose: see :mod:`vnc_use.testing.openai_families`, which also has ``family_reply`` for
scripts.) It prints the base URL (``http://127.0.0.1:N/v1``) and serves until interrupted;
every refused request is reported on stderr (never an API key). ``script.json`` is a JSON
list; each item is one reply, one of::

    {"content": "Thought: ...\\nAction: click(start_box='(100,200)')"}
    {"content": "<tool_call>\\n{\\"name\\": \\"computer_use\\", ...}\\n</tool_call>"}
    {"content": null}                          # an empty message: no text, no calls
    {"tool_calls": [{"name": "click", "arguments": {"x": 500, "y": 300}, "id": "optional"}],
     "content": "optional text next to the calls"}
    {"finish": "final answer"}                 # a finish(text) tool call
    {"error": 404, "message": "optional", "code": "optional", "type": "optional",
     "param": "optional"}
    {"error": "context_length_exceeded"}       # OpenAI's 400 for a too long prompt
    {"raw": {...any response body...}, "http_status": 200}

Any item may add ``"delay": seconds`` (answer late, e.g. past the client's timeout) and
``"finish_reason"`` (default ``"tool_calls"`` with calls, else ``"stop"``). ``arguments`` given
as a string is sent verbatim (for malformed JSON).
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import logging
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from vnc_use.testing.ctrl_c import stop_on_ctrl_c
from vnc_use.testing.openai_checks import (
    Problem,
    Violation,
    _violation_listeners,
    add_violation_listener,
    decode_data_url,
    image_parts,
    remove_violation_listener,
    request_problems,
)
from vnc_use.testing.openai_replies import FINISH_TOOL, Reply, ScriptFn, ScriptItem, ToolCall
from vnc_use.testing.scripted import ScriptedServer

__all__ = [
    "DEFAULT_MAX_IMAGES",
    "DEFAULT_MODEL",
    "EXHAUSTED_TEXT",
    "FINISH_TOOL",
    "OpenAIStandIn",
    "RecordedRequest",
    "Reply",
    "ScriptItem",
    "ToolCall",
    "Violation",
    "add_violation_listener",
    "data_url",
    "main",
    "remove_violation_listener",
]

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "standin-vlm"
"""The model id served when no ``models`` are given."""

DEFAULT_MAX_IMAGES = 4
"""Images accepted in one request by default (vLLM's ``--limit-mm-per-prompt``)."""

EXHAUSTED_TEXT = "(stand-in script exhausted)"
"""The assistant text answered once a list script has no items left."""

_CREATED = 1_700_000_000  # a fixed "created" time for the model list
_REDACTED = "<redacted>"


# ----------------------------------------------------------------------------- records


@dataclass
class RecordedRequest:
    """One request as received (the API key kept in memory only), and what was answered."""

    index: int
    method: str
    path: str
    headers: dict[str, str]
    """Lower-cased names; an ``authorization`` value reads ``<redacted>``."""
    body: Any
    raw_size: int = 0
    api_key: str | None = field(default=None, repr=False)
    """The bearer token of the ``Authorization`` header (never logged or printed)."""
    status: int = 0
    script_index: int | None = None
    violations: list[Violation] = field(default_factory=list)

    @property
    def has_authorization(self) -> bool:
        """Whether an ``Authorization`` header came."""
        return "authorization" in self.headers

    @property
    def model(self) -> str | None:
        """The requested model id (None when absent)."""
        model = self.body.get("model") if isinstance(self.body, Mapping) else None
        return model if isinstance(model, str) else None

    def messages(self) -> list[dict[str, Any]]:
        """The request's ``messages`` as sent."""
        messages = self.body.get("messages") if isinstance(self.body, Mapping) else None
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    def tools(self) -> list[dict[str, Any]]:
        """The request's ``tools`` as sent."""
        tools = self.body.get("tools") if isinstance(self.body, Mapping) else None
        return list(tools) if isinstance(tools, list) else []

    def images(self) -> list[bytes]:
        """Decoded bytes of every decodable image, in message order."""
        out = []
        for _, _, part in image_parts(self.messages()):
            image = part.get("image_url")
            data = decode_data_url(image.get("url") if isinstance(image, Mapping) else None)
            if data is not None:
                out.append(data)
        return out


# ----------------------------------------------------------------------------- HTTP


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one request per connection: no idle threads linger

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("openai stand-in: " + format, *args)

    def _send(self, status: int, body: Mapping[str, Any]) -> None:
        data = json.dumps(body).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client timed out or died
            logger.debug("openai stand-in: the client went away before the answer was sent")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        status, body, delay = self.server.standin._handle(
            "POST", self.path, dict(self.headers), raw
        )
        if delay > 0 and self.server.standin._stopping.wait(delay):
            return  # stopping: drop the connection
        self._send(status, body)

    def do_GET(self) -> None:
        status, body, _ = self.server.standin._handle("GET", self.path, dict(self.headers), b"")
        self._send(status, body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    standin: OpenAIStandIn


class OpenAIStandIn(ScriptedServer[ScriptItem]):
    """The OpenAI-compatible server stand-in (see the module docstring).

    ``start()``/``stop()`` run the server in a background thread; as a context manager it
    starts and stops it (no environment variable is changed: pass :attr:`base_url`).
    """

    handler = _Handler
    server_class = _Server
    name = "openai-standin"

    def __init__(
        self,
        script: Sequence[ScriptItem] | ScriptFn | None = None,
        *,
        models: str | Sequence[str] = DEFAULT_MODEL,
        max_images: int | None = DEFAULT_MAX_IMAGES,
        expected_api_key: str | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
    ) -> None:
        self.models: list[str] = [models] if isinstance(models, str) else list(models)
        """The model ids served (``/v1/models``); any other id is answered 404."""
        self.max_images = max_images
        """Images accepted in one request (None: no limit)."""
        self.expected_api_key = expected_api_key
        """With a value, requests must carry ``Authorization: Bearer <it>`` (else 401)."""
        self.requests: list[RecordedRequest] = []
        self.violations: list[Violation] = []
        self._ids = itertools.count()
        self._stopping = threading.Event()
        super().__init__(script, port=port, host=host)

    # ---------------------------------------------------------------- lifecycle

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: the SDK's ``base_url`` (only valid once started)."""
        return f"{self.root_url}/v1"

    def start(self) -> OpenAIStandIn:
        """Start serving in a daemon thread (idempotent)."""
        self._stopping.clear()
        return super().start()

    def stop(self) -> None:
        """Stop serving and close the socket (delayed answers are dropped)."""
        self._stopping.set()
        super().stop()

    @property
    def last_request(self) -> RecordedRequest:
        """The most recent request (raises IndexError when there was none)."""
        return self.requests[-1]

    # ---------------------------------------------------------------- handling

    def _handle(
        self, method: str, raw_path: str, headers: Mapping[str, str], raw: bytes
    ) -> tuple[int, dict[str, Any], float]:
        """The answer's status, body and delay (the delay is waited outside the lock)."""
        lower = {k.lower(): v for k, v in headers.items()}
        api_key = _bearer(lower.get("authorization"))
        if "authorization" in lower:
            lower["authorization"] = _REDACTED
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._lock:
            rec = RecordedRequest(
                index=len(self.requests),
                method=method,
                path=urlsplit(raw_path).path,
                headers=lower,
                body=body,
                raw_size=len(raw),
                api_key=api_key,
            )
            self.requests.append(rec)
            status, answer, delay = self._answer(rec)
            rec.status = status
            return status, answer, delay

    def _answer(self, rec: RecordedRequest) -> tuple[int, dict[str, Any], float]:
        key_problem = self._key_problem(rec)
        if key_problem is not None:
            return (*self._refuse(rec, [key_problem]), 0.0)
        path = rec.path.rstrip("/")
        if rec.method == "GET" and path == "/v1/models":
            return 200, {"object": "list", "data": [_model_entry(m) for m in self.models]}, 0.0
        if rec.method == "GET" and path.startswith("/v1/models/"):
            return (*self._model(unquote(path[len("/v1/models/") :])), 0.0)
        if rec.method == "POST" and path == "/v1/chat/completions":
            problems = request_problems(rec.body, self.models, self.max_images)
            if problems:
                return (*self._refuse(rec, problems), 0.0)
            return self._completion(rec)
        return (
            404,
            Problem(
                404,
                "path",
                f"Unknown request URL: {rec.method} {rec.path}. The stand-in serves "
                "POST /v1/chat/completions, GET /v1/models and GET /v1/models/{model}.",
                code="unknown_url",
            ).error_body(),
            0.0,
        )

    def _key_problem(self, rec: RecordedRequest) -> Problem | None:
        if self.expected_api_key is None or rec.api_key == self.expected_api_key:
            return None
        if rec.api_key is None:
            message = (
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
            )
        else:
            message = "Incorrect API key provided."  # never echo the key, not even masked
        return Problem(401, "api_key", message, code="invalid_api_key")

    def _model(self, model_id: str) -> tuple[int, dict[str, Any]]:
        if model_id in self.models:
            return 200, _model_entry(model_id)
        return 404, Problem(
            404,
            "model_not_found",
            f"The model `{model_id}` does not exist or you do not have access to it.",
            code="model_not_found",
        ).error_body()

    def _refuse(
        self, rec: RecordedRequest, problems: Sequence[Problem]
    ) -> tuple[int, dict[str, Any]]:
        """Record every problem as a violation; answer the first one."""
        for problem in problems:
            violation = Violation(rec.index, problem.rule, problem.message, problem.status)
            rec.violations.append(violation)
            self.violations.append(violation)
            logger.info("openai stand-in refused (%s): %s", problem.rule, problem.message)
            for listener in list(_violation_listeners):
                listener(violation)
        return problems[0].status, problems[0].error_body()

    def _completion(self, rec: RecordedRequest) -> tuple[int, dict[str, Any], float]:
        reply = self._next_reply(rec)
        if reply.body is not None:
            return reply.status, dict(reply.body), reply.delay
        call_ids = [f"call_standin_{next(self._ids)}" for _ in reply.calls]
        message = reply.message(call_ids)
        finish = reply.finish_reason or ("tool_calls" if reply.calls else "stop")
        completion_tokens = 1 + len(json.dumps(message)) // 4
        prompt_tokens = 1 + rec.raw_size // 4
        body = {
            "id": f"chatcmpl-standin-{rec.index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": rec.model,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
            "system_fingerprint": None,
        }
        return reply.status, body, reply.delay

    def _next_reply(self, rec: RecordedRequest) -> Reply:
        found = self._next_item(rec.body, rec.index)
        if found is None:
            return Reply.text(EXHAUSTED_TEXT)
        rec.script_index, item = found
        return item if isinstance(item, Reply) else Reply.from_json(item)


def data_url(data: bytes, media_type: str = "image/png") -> str:
    """``data:<media_type>;base64,...``: how a client sends an image (e.g. a screenshot)."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def _bearer(value: str | None) -> str | None:
    if value is None:
        return None
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else value


def _model_entry(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": _CREATED, "owned_by": "vnc-use-standin"}


# ----------------------------------------------------------------------------- command line


def _print_violation(violation: Violation) -> None:
    print(
        f"openai stand-in refused request {violation.request_index} [{violation.rule}]: "
        f"{violation.message}",
        file=sys.stderr,
        flush=True,
    )


def _script(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Any:
    if args.family:
        from vnc_use.testing.openai_families import TargetClicker

        try:
            dx, dy = (float(v) for v in args.offset.split(","))
        except ValueError:
            parser.error("--offset takes DX,DY, e.g. 40,-25")
        return TargetClicker(
            args.family, args.runs_dir, convention=args.convention, offset=(dx, dy)
        )
    with open(args.script, encoding="utf-8") as fh:
        items = json.load(fh)
    if not isinstance(items, list):
        parser.error("the script must be a JSON list")
    return [Reply.from_json(i) for i in items]


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: serve a JSON script until interrupted (``--api responses``: the
    Responses API stand-in, :mod:`vnc_use.testing.openai_responses_standin`)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--api", choices=("chat", "responses"), default="chat")
    chosen, rest = pre.parse_known_args(argv)
    if chosen.api == "responses":
        from vnc_use.testing.openai_responses_standin import main as responses_main

        return responses_main(rest)
    parser = argparse.ArgumentParser(
        description="Serve a scripted OpenAI-compatible chat-completions API on 127.0.0.1."
    )
    parser.add_argument(
        "--api",
        choices=("chat", "responses"),
        default="chat",
        help="chat: POST /v1/chat/completions (default); responses: POST /v1/responses with "
        "the GA computer tool (see vnc_use.testing.openai_responses_standin)",
    )
    parser.add_argument("--script", help="JSON file: a list of reply items")
    parser.add_argument(
        "--family",
        choices=("tools", "qwen3-vl", "qwen2.5-vl", "ui-tars", "holo", "ui-venus", "opencua"),
        help="instead of --script: click the calibration target each request names, in this "
        "family's format (for vnc-use calibrate; see vnc_use.testing.openai_families)",
    )
    parser.add_argument(
        "--runs-dir", default="runs", help="--family: where vnc-use calibrate makes its runs"
    )
    parser.add_argument(
        "--convention",
        choices=("relative", "qwen25-pixels", "ui-tars-pixels"),
        help="--family: answer in this coordinate convention instead of the family's own",
    )
    parser.add_argument(
        "--offset",
        default="0,0",
        metavar="DX,DY",
        help="--family: add this many screen pixels to every click",
    )
    parser.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    parser.add_argument(
        "--model",
        action="append",
        dest="models",
        help=f"a model id to serve (repeatable; default: {DEFAULT_MODEL})",
    )
    parser.add_argument(
        "--max-images",
        type=int,
        default=DEFAULT_MAX_IMAGES,
        help=f"images accepted in one request (default: {DEFAULT_MAX_IMAGES}; 0: none)",
    )
    args = parser.parse_args(argv)
    if (args.script is None) == (args.family is None):
        parser.error("give either --script or --family")
    standin = OpenAIStandIn(
        _script(parser, args),
        models=args.models or DEFAULT_MODEL,
        max_images=args.max_images,
        port=args.port,
    )
    add_violation_listener(_print_violation)
    stop_on_ctrl_c()
    standin.start()
    print(standin.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        standin.stop()
    return 0


if __name__ == "__main__":
    # the imported module's main, so that its Reply is the one vnc_use.testing.openai_families
    # builds (as __main__ this file's classes are other objects)
    from vnc_use.testing.openai_standin import main as _main

    raise SystemExit(_main())
