"""A strict local stand-in for Anthropic's Messages API with the computer tools.

It speaks ``POST /v1/messages`` on 127.0.0.1 like ``api.anthropic.com`` for the GA toolset
(``computer_toolset_20260801``) and the beta tools (``computer_20251124``,
``computer_20250124``): it answers from a *script* of replies, records every request, and
answers 400 (Anthropic's error envelope ``{"type": "error", "error": {"type":
"invalid_request_error", "message"}, "request_id"}``) to what the API rejects (the reference's
section 7), each recorded as a :class:`Violation` under its rule:

* ``auth`` -- no ``x-api-key`` / bearer key, or not :attr:`AnthropicStandIn.expected_api_key`
  (401 ``authentication_error``); ``version`` -- no ``anthropic-version`` header;
* ``body`` -- not JSON, or no ``model`` / ``max_tokens`` / ``messages``;
* ``tools`` -- a toolset entry with a field the API rejects (``name``, ``display_*``,
  ``enable_zoom``, ...), a legacy tool without ``name: "computer"`` or both ``display_*_px``, a
  legacy tool without its ``anthropic-beta`` flag, ``computer_20251124`` sent to a Claude 5.5
  model, two computer tools;
* ``roles`` -- messages not alternating user/assistant from a user message;
* ``tool_result`` -- a ``tool_use`` not answered by a ``tool_result`` in the very next user
  message (the API's own words), a result for an unknown id, a result after text, a toolset
  result without ``toolset_name: "computer"`` or with content other than text and images;
* ``image`` -- an image that is not base64 PNG/JPEG Pillow decodes; in a toolset request an
  image over the model's limits (long edge 2576 px, 4784 visual tokens of 28x28; the API does
  not downscale for the toolset: ``image_dimensions_too_large``); more than 20 images with one
  over 2000 px.

Replies are written once for every tool version: a :class:`Action` (member and input) goes out
as the toolset's ``tool_use`` (``name`` = member, ``toolset_name: "computer"``) or the legacy
tool's (``name: "computer"``, ``input.action``), whichever the request declared. The real
``anthropic`` SDK talks to it with ``Anthropic(base_url=standin.base_url, api_key=...)``.

Command line::

    python -m vnc_use.testing.anthropic_standin --script script.json [--port N]

prints the base URL and serves until interrupted. ``script.json`` is a list of items:
``{"actions": [{"name": "left_click", "input": {"coordinate": [10, 20]}}], "text": "..."}``,
``{"text": "done"}``, ``{"refusal": "cyber", "explanation": "..."}`` or
``{"error": 529, "type": "overloaded_error", "message": "...", "retry_after": 1}``.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import io
import itertools
import json
import logging
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from PIL import Image

from vnc_use.providers.anthropic.versions import (
    BETA_HEADERS,
    HIGH_LIMITS,
    LEGACY_VERSIONS,
    TOOLSET,
)
from vnc_use.testing.scripted import ScriptedServer

__all__ = ["Action", "AnthropicStandIn", "RecordedRequest", "Reply", "Violation", "main"]

logger = logging.getLogger(__name__)

_TOOLSET_FIELDS = {"type", "configs", "cache_control", "allowed_callers"}
_LEGACY_FIELDS = {
    "type",
    "name",
    "display_width_px",
    "display_height_px",
    "display_number",
    "enable_zoom",
    "cache_control",
}
EXHAUSTED_TEXT = "The stand-in's script ran out."


@dataclass(frozen=True)
class Action:
    """One computer action the model takes: a member name and its input."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)

    def block(self, block_id: str, toolset: bool) -> dict[str, Any]:
        """The ``tool_use`` block for the request's tool (toolset or legacy)."""
        if toolset:
            return {
                "type": "tool_use",
                "id": block_id,
                "name": self.name,
                "input": dict(self.input),
                "toolset_name": "computer",
            }
        return {
            "type": "tool_use",
            "id": block_id,
            "name": "computer",
            "input": {"action": self.name, **self.input},
        }


@dataclass(frozen=True)
class Reply:
    """One scripted answer (build it with the class methods)."""

    actions: tuple[Action, ...] = ()
    text: str = ""
    refusal: str | None = None
    explanation: str | None = None
    status: int = 200
    error_type: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    usage: tuple[tuple[str, int], ...] = ()
    """Token counts to report instead of the stand-in's own (``input_tokens``,
    ``cache_read_input_tokens``, ...), as ``with_usage`` sets them."""

    def with_usage(self, **usage: int) -> Reply:
        """This reply, reporting ``usage`` (the API's field names) in its ``usage``."""
        return replace(self, usage=tuple(usage.items()))

    @classmethod
    def act(cls, *actions: Action, text: str = "") -> Reply:
        """``tool_use`` blocks, one per action, in order (``stop_reason: "tool_use"``)."""
        return cls(actions=actions, text=text)

    @classmethod
    def done(cls, text: str) -> Reply:
        """A text answer with no tool call (``end_turn``)."""
        return cls(text=text)

    @classmethod
    def refuse(cls, category: str | None, explanation: str | None = None) -> Reply:
        """``stop_reason: "refusal"`` with ``stop_details``."""
        return cls(refusal=category or "", explanation=explanation)

    @classmethod
    def error(
        cls, status: int, error_type: str, message: str, retry_after: float | None = None
    ) -> Reply:
        """An HTTP error in Anthropic's envelope (``retry-after`` header when given)."""
        headers = (("retry-after", f"{retry_after:g}"),) if retry_after is not None else ()
        return cls(text=message, status=status, error_type=error_type, headers=headers)

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> Reply:
        """A script item of the command line's JSON format."""
        if "error" in item:
            return cls.error(
                int(item["error"]),
                str(item.get("type", "api_error")),
                str(item.get("message", "error")),
                item.get("retry_after"),
            )
        if "refusal" in item:
            return cls.refuse(item["refusal"], item.get("explanation"))
        actions = [Action(a["name"], dict(a.get("input", {}))) for a in item.get("actions", [])]
        return cls(actions=tuple(actions), text=str(item.get("text", "")))


@dataclass(frozen=True)
class Violation:
    """A request the stand-in refused: which one, the rule, the API's words."""

    request_index: int
    rule: str
    message: str
    status: int = 400


@dataclass
class RecordedRequest:
    """One request as received (the key is never kept)."""

    index: int
    path: str
    headers: dict[str, str]
    body: Any
    raw_size: int
    status: int = 0

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.body.get("tools") or []) if isinstance(self.body, dict) else []

    @property
    def betas(self) -> list[str]:
        raw = self.headers.get("anthropic-beta", "")
        return [b.strip() for b in raw.split(",") if b.strip()]

    def images(self) -> list[bytes]:
        """Every image of the request (decoded), in order."""
        found: list[bytes] = []
        messages = self.body.get("messages", []) if isinstance(self.body, dict) else []
        for message in messages:
            for block in _blocks(message.get("content")):
                found.extend(_image_bytes(block))
        return found

    def tool_results(self) -> list[dict[str, Any]]:
        """Every ``tool_result`` block of the last user message."""
        messages = self.body.get("messages", []) if isinstance(self.body, dict) else []
        return [b for b in _blocks(messages[-1].get("content")) if b.get("type") == "tool_result"]


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _image_bytes(block: Mapping[str, Any]) -> list[bytes]:
    if block.get("type") == "image":
        source = block.get("source") or {}
        try:
            return [base64.b64decode(str(source.get("data", "")), validate=True)]
        except (binascii.Error, ValueError):
            return [b""]
    if block.get("type") == "tool_result":
        return [d for inner in _blocks(block.get("content")) for d in _image_bytes(inner)]
    return []


class _Problem(Exception):
    def __init__(self, rule: str, message: str, status: int = 400, kind: str = "") -> None:
        super().__init__(message)
        self.rule, self.message, self.status = rule, message, status
        self.kind = kind or "invalid_request_error"


def _check_tools(body: Mapping[str, Any], betas: Sequence[str]) -> str | None:
    """The computer tool's version (None: none declared); raises _Problem."""
    computer = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    computer = [t for t in computer if t.get("type") == TOOLSET or t.get("name") == "computer"]
    if len(computer) > 1:
        raise _Problem("tools", "tools: only one computer tool may be declared.")
    if not computer:
        return None
    tool = computer[0]
    version = str(tool.get("type"))
    if version == TOOLSET:
        extra = sorted(set(tool) - _TOOLSET_FIELDS)
        if extra:
            raise _Problem("tools", f"tools.0: Extra inputs are not permitted: {', '.join(extra)}")
        return version
    if version not in LEGACY_VERSIONS:
        raise _Problem("tools", f"tools.0.type: unknown tool type {version!r}")
    extra = sorted(set(tool) - _LEGACY_FIELDS)
    if extra or not all(isinstance(tool.get(k), int) for k in _DISPLAY):
        raise _Problem(
            "tools", f"tools.0: {version} needs name, display_width_px and display_height_px"
        )
    if BETA_HEADERS[version] not in betas:
        raise _Problem(
            "tools", f"tools.0: {version} needs the anthropic-beta header {BETA_HEADERS[version]}"
        )
    model = str(body.get("model"))
    if version == "computer_20251124" and model.endswith("-5-5"):
        raise _Problem(
            "tools",
            f"'{model}' does not support tool types: computer_20251124. Supported: {TOOLSET}",
        )
    return version


_DISPLAY = ("display_width_px", "display_height_px")


def _check_image(data: bytes, where: str, toolset: bool, many: bool) -> None:
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            width, height = image.size
    except Exception:
        raise _Problem("image", f"{where}: Could not process image") from None
    if toolset and not HIGH_LIMITS.fits(width, height):
        raise _Problem(
            "image",
            f"{where}: image dimensions {width}x{height} exceed the limits for this model "
            f"(long edge {HIGH_LIMITS.long_edge} px, {HIGH_LIMITS.max_tokens} visual tokens)",
            kind="invalid_request_error",
        )
    if many and max(width, height) > 2000:
        raise _Problem(
            "image",
            f"{where}: At least one of the image dimensions exceed max allowed size for "
            "many-image requests: 2000 pixels",
        )


def _check_result(block: Mapping[str, Any], where: str, toolset_ids: set[str]) -> None:
    if block.get("tool_use_id") in toolset_ids:
        if block.get("toolset_name") != "computer":
            raise _Problem(
                "tool_result", f"{where}: a result for a computer toolset call needs toolset_name"
            )
        content = block.get("content")
        if not isinstance(content, (str, list)) or any(
            b.get("type") not in ("text", "image") for b in _blocks(content)
        ):
            raise _Problem("tool_result", f"{where}: toolset results may hold only text and image")


def _check_user(
    n: int, blocks: list[dict[str, Any]], pending: list[str], toolset_ids: set[str], flags: Any
) -> None:
    """One user message: every pending ``tool_use`` answered first, images within limits."""
    toolset, many = flags
    answered: list[str] = []
    seen_other = False
    for k, block in enumerate(blocks):
        where = f"messages.{n}.content.{k}"
        for data in _image_bytes(block):
            _check_image(data, where, toolset, many)
        if block.get("type") != "tool_result":
            seen_other = True
            continue
        if seen_other:
            raise _Problem("tool_result", f"{where}: tool_result blocks must come first")
        if block.get("tool_use_id") not in pending:
            raise _Problem(
                "tool_result",
                f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{block.get('tool_use_id')}. Each `tool_result` block must have a "
                "corresponding `tool_use` block in the previous message.",
            )
        _check_result(block, where, toolset_ids)
        answered.append(str(block.get("tool_use_id")))
    missing = [i for i in pending if i not in answered]
    if missing:
        raise _Problem(
            "tool_result",
            f"messages.{n}: `tool_use` ids were found without `tool_result` blocks "
            f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
            "corresponding `tool_result` block in the next message.",
        )


def _check_messages(body: Mapping[str, Any], toolset: bool) -> None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _Problem("body", "messages: Field required")
    images = sum(len(_image_bytes(b)) for m in messages for b in _blocks(m.get("content")))
    pending: list[str] = []
    toolset_ids: set[str] = set()
    for n, message in enumerate(messages):
        role = message.get("role")
        if role != ("user" if n % 2 == 0 else "assistant"):
            raise _Problem("roles", f"messages.{n}: roles must alternate, starting with user")
        blocks = _blocks(message.get("content"))
        if role == "assistant":
            pending = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
            toolset_ids |= {str(b.get("id")) for b in blocks if b.get("toolset_name") == "computer"}
            continue
        _check_user(n, blocks, pending, toolset_ids, (toolset, images > 20))
        pending = []
    if pending:
        raise _Problem("roles", "the last message must be a user message")


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("anthropic stand-in: " + format, *args)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        status, body, headers = self.server.standin._handle(self.path, dict(self.headers), raw)
        data = json.dumps(body).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("request-id", str(body.get("request_id", "req_standin")))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            logger.debug("anthropic stand-in: the client went away")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    standin: AnthropicStandIn


ScriptFn = Callable[[dict[str, Any], int], Reply]


class AnthropicStandIn(ScriptedServer[Reply]):
    """The Messages API stand-in (see the module docstring)."""

    handler = _Handler
    server_class = _Server
    name = "anthropic-standin"

    def __init__(
        self,
        script: Sequence[Reply] | ScriptFn | None = None,
        *,
        expected_api_key: str | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
    ) -> None:
        self.expected_api_key = expected_api_key
        self.requests: list[RecordedRequest] = []
        self.violations: list[Violation] = []
        self._ids = itertools.count(1)
        super().__init__(script, port=port, host=host)

    @property
    def base_url(self) -> str:
        """The SDK's ``base_url`` (``http://127.0.0.1:<port>``)."""
        return self.root_url

    def _handle(
        self, raw_path: str, headers: Mapping[str, str], raw: bytes
    ) -> tuple[int, dict[str, Any], tuple[tuple[str, str], ...]]:
        lower = {k.lower(): v for k, v in headers.items()}
        key = lower.pop("x-api-key", None)
        auth = lower.pop("authorization", None)
        if key is None and auth and auth.lower().startswith("bearer "):
            key = auth[7:].strip()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._lock:
            path = urlsplit(raw_path).path
            rec = RecordedRequest(len(self.requests), path, lower, body, len(raw))
            self.requests.append(rec)
            try:
                status, answer, extra = self._answer(rec, key)
            except _Problem as problem:
                status, answer, extra = self._refuse(rec, problem), {}, ()
                answer = _error_body(problem.kind, problem.message, rec.index)
            rec.status = status
            return status, answer, extra

    def _refuse(self, rec: RecordedRequest, problem: _Problem) -> int:
        violation = Violation(rec.index, problem.rule, problem.message, problem.status)
        self.violations.append(violation)
        logger.info("anthropic stand-in refused (%s): %s", problem.rule, problem.message)
        return problem.status

    def _answer(
        self, rec: RecordedRequest, key: str | None
    ) -> tuple[int, dict[str, Any], tuple[tuple[str, str], ...]]:
        if rec.path.rstrip("/") != "/v1/messages":
            raise _Problem("path", f"Unknown path {rec.path}", status=404, kind="not_found_error")
        if not key or (self.expected_api_key is not None and key != self.expected_api_key):
            raise _Problem("auth", "invalid x-api-key", status=401, kind="authentication_error")
        if "anthropic-version" not in rec.headers:
            raise _Problem("version", "anthropic-version: header is required")
        body = rec.body
        if not isinstance(body, dict) or not body.get("model") or not body.get("max_tokens"):
            raise _Problem("body", "model, max_tokens and messages are required")
        version = _check_tools(body, rec.betas)
        _check_messages(body, version == TOOLSET)
        found = self._next_item(body, rec.index)
        reply = found[1] if found is not None else Reply.done(EXHAUSTED_TEXT)
        if reply.status != 200:
            return reply.status, _error_body(reply.error_type, reply.text, rec.index), reply.headers
        return 200, self._message(rec, reply, version == TOOLSET), ()

    def _message(self, rec: RecordedRequest, reply: Reply, toolset: bool) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for action in reply.actions:
            content.append(action.block(f"toolu_standin_{next(self._ids):04d}", toolset))
        stop = "tool_use" if reply.actions else "end_turn"
        details = None
        if reply.refusal is not None:
            stop = "refusal"
            details = {
                "type": "refusal",
                "category": reply.refusal or None,
                "explanation": reply.explanation,
            }
        return {
            "id": f"msg_standin_{rec.index:04d}",
            "type": "message",
            "role": "assistant",
            "model": rec.body.get("model"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "stop_details": details,
            "usage": {
                "input_tokens": 1 + rec.raw_size // 4,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": 20,
                **dict(reply.usage),
            },
        }


def _error_body(kind: str, message: str, index: int) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": f"req_standin_{index:04d}",
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: serve a JSON script until interrupted."""
    parser = argparse.ArgumentParser(
        description="Serve a scripted Anthropic Messages API (computer tools) on 127.0.0.1."
    )
    parser.add_argument("--script", required=True, help="JSON file: a list of reply items")
    parser.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    args = parser.parse_args(argv)
    with open(args.script, encoding="utf-8") as fh:
        items = json.load(fh)
    if not isinstance(items, list):
        parser.error("the script must be a JSON list")
    standin = AnthropicStandIn([Reply.from_json(i) for i in items], port=args.port)
    standin.start()
    print(standin.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        for v in standin.violations:
            print(f"refused request {v.request_index} [{v.rule}]: {v.message}", file=sys.stderr)
        standin.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
