"""A strict local stand-in for OpenAI's Responses API with the GA ``computer`` tool.

It speaks ``POST /v1/responses`` on 127.0.0.1 (an ephemeral port by default) and answers from a
*script* of turns: a ``computer_call`` with its ``actions[]`` (and optional
``pending_safety_checks``), a final message, a ``refusal``, a failed response (e.g. code
``misalignment_policy_violation``), an HTTP error (with ``retry-after``), or a raw body. Every
turn comes with a reasoning item (its ``encrypted_content`` when the request includes
``reasoning.encrypted_content``), in the envelope of the API reference (§7), which the real
``openai`` SDK validates. It records every request and refuses, with 400 and OpenAI's error
object, what the API refuses (:mod:`~vnc_use.testing.openai_responses_checks`): a
``computer_call_output`` before its call, a call left unanswered, a replayed call changed or
without its reasoning item, a reasoning item without its encrypted content under
``store: false``, pending safety checks not acknowledged, a bad or oversized image, a preview
tool, an unknown model (404). A refused request does not consume a script item; refusals are
also reported to the listeners of :func:`~vnc_use.testing.openai_standin.add_violation_listener`
(so the tests' fixture fails a test in which a strict server would have refused).

Python use::

    with OpenAIResponsesStandIn([Turn.call({"type": "screenshot"}),
                                 Turn.call({"type": "click", "button": "left", "x": 10, "y": 20},
                                           checks=[{"code": "malicious_instructions",
                                                    "message": "..."}]),
                                 Turn.message("Done.")]) as server:
        client = OpenAI(base_url=server.base_url, api_key="sk-test")

Command line: ``python -m vnc_use.testing.openai_standin --api responses --script FILE``
(or this module directly); the script is a JSON list of items::

    {"actions": [{"type": "click", "button": "left", "x": 10, "y": 20}],
     "checks": [{"code": "malicious_instructions", "message": "..."}], "text": "optional"}
    {"message": "final answer"}
    {"refusal": "I can't help with that."}
    {"failed": "misalignment_policy_violation", "message": "optional"}
    {"error": 429, "message": "optional", "code": "optional", "retry_after": 1}
    {"raw": {...}, "http_status": 200}
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from vnc_use.testing.openai_checks import Problem, Violation, _violation_listeners, decode_data_url
from vnc_use.testing.openai_responses_checks import Memory, request_problems
from vnc_use.testing.scripted import ScriptedServer

__all__ = [
    "DEFAULT_MODELS",
    "OpenAIResponsesStandIn",
    "ResponsesRequest",
    "Turn",
    "main",
]

DEFAULT_MODELS = ("gpt-5.5", "gpt-5.4")


@dataclass(frozen=True)
class Turn:
    """One scripted answer (build with the class methods)."""

    actions: tuple[dict[str, Any], ...] | None = None
    checks: tuple[dict[str, Any], ...] = ()
    text: str | None = None
    refusal: str | None = None
    failed: tuple[str, str] | None = None
    status: int = 200
    body: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    usage: Mapping[str, Any] | None = None
    """The ``usage`` to report instead of the stand-in's own (the API's shape:
    ``input_tokens``, ``input_tokens_details.cached_tokens``, ``output_tokens``, ...)."""

    def with_usage(self, usage: Mapping[str, Any]) -> Turn:
        """This turn, reporting ``usage`` as the API does."""
        return replace(self, usage=dict(usage))

    @classmethod
    def call(
        cls,
        *actions: Mapping[str, Any],
        checks: Sequence[Mapping[str, Any]] = (),
        text: str | None = None,
    ) -> Turn:
        """A ``computer_call`` with ``actions`` (GA shape), and optional pending checks."""
        return cls(
            actions=tuple(dict(a) for a in actions),
            checks=tuple(dict(c) for c in checks),
            text=text,
        )

    @classmethod
    def message(cls, text: str) -> Turn:
        """A final assistant message (``phase: "final_answer"``)."""
        return cls(text=text)

    @classmethod
    def refuse(cls, text: str) -> Turn:
        """An assistant message whose content is a ``refusal`` part."""
        return cls(refusal=text)

    @classmethod
    def fail(cls, code: str, message: str = "The request was blocked.") -> Turn:
        """A response of status ``failed`` with ``error.code``."""
        return cls(failed=(code, message))

    @classmethod
    def error(
        cls,
        status: int,
        message: str | None = None,
        *,
        code: str | None = None,
        type: str | None = None,
        retry_after: float | None = None,
    ) -> Turn:
        """An HTTP error in OpenAI's shape (``retry_after`` seconds sent as ``retry-after``)."""
        problem = Problem(
            status,
            "scripted",
            message or f"Stand-in error {status}.",
            None,
            code,
            type or ("invalid_request_error" if status < 500 else "server_error"),
        )
        headers = {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
        return cls(status=status, body=problem.error_body(), headers=headers)

    @classmethod
    def raw(cls, body: Mapping[str, Any], status: int = 200) -> Turn:
        """Serve ``body`` verbatim."""
        return cls(status=status, body=dict(body))

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> Turn:
        """One item of the JSON script format (see the module docstring)."""
        if "raw" in item:
            return cls.raw(item["raw"], int(item.get("http_status", 200)))
        if "error" in item:
            return cls.error(
                int(item["error"]),
                item.get("message"),
                code=item.get("code"),
                retry_after=item.get("retry_after"),
            )
        if "failed" in item:
            return cls.fail(str(item["failed"]), str(item.get("message", "Blocked.")))
        if "refusal" in item:
            return cls.refuse(str(item["refusal"]))
        if "actions" in item:
            return cls.call(*item["actions"], checks=item.get("checks", ()), text=item.get("text"))
        if "message" in item:
            return cls.message(str(item["message"]))
        raise ValueError(f"Unrecognised script item: {dict(item)!r}")


@dataclass
class ResponsesRequest:
    """One request as received, and what was answered (the key kept in memory only)."""

    index: int
    path: str
    body: Any
    raw_size: int
    has_key: bool
    api_key: str | None = field(default=None, repr=False)
    status: int = 0
    violations: list[Violation] = field(default_factory=list)

    def items(self) -> list[dict[str, Any]]:
        """The request's ``input`` items (a list; [] for anything else)."""
        items = self.body.get("input") if isinstance(self.body, Mapping) else None
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    def outputs(self) -> list[dict[str, Any]]:
        """The ``computer_call_output`` items sent."""
        return [i for i in self.items() if i.get("type") == "computer_call_output"]

    def images(self) -> list[bytes]:
        """Decoded bytes of every image (input_image parts and screenshots), in order."""
        urls: list[Any] = []
        for item in self.items():
            if item.get("type") == "computer_call_output":
                urls.append((item.get("output") or {}).get("image_url"))
            for part in item.get("content") or [] if isinstance(item.get("content"), list) else []:
                if isinstance(part, Mapping) and part.get("type") == "input_image":
                    urls.append(part.get("image_url"))
        return [d for d in (decode_data_url(u) for u in urls) if d is not None]


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        status, body, headers = self.server.standin._handle(self.path, dict(self.headers), raw)
        data = json.dumps(body).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    standin: OpenAIResponsesStandIn


ScriptFn = Callable[[Any, int], Turn]


class OpenAIResponsesStandIn(ScriptedServer[Turn]):
    """The Responses API stand-in (see the module docstring)."""

    handler = _Handler
    server_class = _Server
    name = "openai-responses-standin"

    def __init__(
        self,
        script: Sequence[Turn] | ScriptFn | None = None,
        *,
        models: str | Sequence[str] = DEFAULT_MODELS,
        expected_api_key: str | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
    ) -> None:
        self.models = [models] if isinstance(models, str) else list(models)
        self.expected_api_key = expected_api_key
        self.requests: list[ResponsesRequest] = []
        self.violations: list[Violation] = []
        self.memory = Memory()
        self._ids = itertools.count(1)
        super().__init__(script, port=port, host=host)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: the SDK's ``base_url``."""
        return f"{self.root_url}/v1"

    def _handle(
        self, raw_path: str, headers: Mapping[str, str], raw: bytes
    ) -> tuple[int, dict[str, Any], Mapping[str, str]]:
        lower = {k.lower(): v for k, v in headers.items()}
        auth = lower.get("authorization", "")
        key = auth.partition(" ")[2].strip() if auth.lower().startswith("bearer ") else None
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._lock:
            rec = ResponsesRequest(
                len(self.requests), urlsplit(raw_path).path, body, len(raw), bool(auth), key
            )
            self.requests.append(rec)
            status, answer, extra = self._answer(rec)
            rec.status = status
            return status, answer, extra

    def _answer(self, rec: ResponsesRequest) -> tuple[int, dict[str, Any], Mapping[str, str]]:
        if rec.path.rstrip("/") != "/v1/responses":
            problem = Problem(
                404, "path", f"Unknown request URL: POST {rec.path}.", None, "unknown_url"
            )
            return self._refuse(rec, [problem])
        if self.expected_api_key is not None and rec.api_key != self.expected_api_key:
            problem = Problem(
                401, "api_key", "Incorrect API key provided.", None, "invalid_api_key"
            )
            return self._refuse(rec, [problem])
        problems, context = request_problems(rec.body, self.models, self.memory)
        if problems:
            return self._refuse(rec, problems)
        found = self._next_item(rec.body, rec.index)
        turn = Turn.message("(stand-in script exhausted)") if found is None else found[1]
        if turn.body is not None:
            return turn.status, dict(turn.body), turn.headers
        return 200, self._response(rec, turn, context), {}

    def _refuse(
        self, rec: ResponsesRequest, problems: Sequence[Problem]
    ) -> tuple[int, dict[str, Any], Mapping[str, str]]:
        for problem in problems:
            violation = Violation(rec.index, problem.rule, problem.message, problem.status)
            rec.violations.append(violation)
            self.violations.append(violation)
            for listener in list(_violation_listeners):
                listener(violation)
        return problems[0].status, problems[0].error_body(), {}

    # ---------------------------------------------------------------- answers

    def _response(self, rec: ResponsesRequest, turn: Turn, context: list[Any]) -> dict[str, Any]:
        n = next(self._ids)
        body: Mapping[str, Any] = rec.body
        reasoning: dict[str, Any] = {"type": "reasoning", "id": f"rs_{n:04d}", "summary": []}
        if "reasoning.encrypted_content" in (body.get("include") or []):
            reasoning["encrypted_content"] = f"enc-{n:04d}-standin"
        self.memory.encrypted[reasoning["id"]] = f"enc-{n:04d}-standin"
        output: list[dict[str, Any]] = [reasoning]
        if turn.text is not None and turn.actions is not None:
            output.append(_message(n, turn.text, "commentary"))
        if turn.actions is not None:
            output.append(self._call(n, turn, reasoning["id"]))
        elif turn.refusal is not None:
            output.append(_message(n, None, "final_answer", refusal=turn.refusal))
        elif turn.failed is None:
            output.append(_message(n, turn.text or "", "final_answer"))
        response_id = f"resp_{n:04d}"
        if body.get("store", True) is not False:
            self.memory.stored[response_id] = [*context, *output]
        return _envelope(response_id, body, output, turn, rec.raw_size)

    def _call(self, n: int, turn: Turn, reasoning_id: str) -> dict[str, Any]:
        call_id = f"call_{n:04d}"
        checks = [
            {"id": f"cu_sc_{n:04d}_{k}", "code": c.get("code"), "message": c.get("message")}
            for k, c in enumerate(turn.checks)
        ]
        item = {
            "type": "computer_call",
            "id": f"cu_{n:04d}",
            "call_id": call_id,
            "status": "completed",
            "actions": [dict(a) for a in turn.actions or ()],
            "pending_safety_checks": checks,
        }
        self.memory.calls[call_id] = item
        self.memory.reasoning_of[call_id] = reasoning_id
        return item

    def pending_checks(self, call_id: str) -> list[dict[str, Any]]:
        """The pending safety checks the stand-in emitted on ``call_id``."""
        return list(self.memory.calls[call_id]["pending_safety_checks"])


def _message(n: int, text: str | None, phase: str, refusal: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = (
        {"type": "refusal", "refusal": refusal}
        if refusal is not None
        else {"type": "output_text", "text": text or "", "annotations": []}
    )
    return {
        "type": "message",
        "id": f"msg_{n:04d}_{phase}",
        "role": "assistant",
        "status": "completed",
        "phase": phase,
        "content": [part],
    }


def _envelope(
    response_id: str, body: Mapping[str, Any], output: list[dict[str, Any]], turn: Turn, size: int
) -> dict[str, Any]:
    now = int(time.time())
    input_tokens = 1 + size // 4
    error = None
    if turn.failed is not None:
        error = {"code": turn.failed[0], "message": turn.failed[1]}
    return {
        "id": response_id,
        "object": "response",
        "created_at": now,
        "completed_at": now,
        "status": "failed" if error else "completed",
        "error": error,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": None,
        "model": body.get("model"),
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": "medium", "summary": None},
        "store": body.get("store", True) is not False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": body.get("tools") or [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": dict(turn.usage)
        if turn.usage is not None
        else {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": 64,
            "output_tokens_details": {"reasoning_tokens": 32},
            "total_tokens": input_tokens + 64,
        },
        "user": None,
        "metadata": {},
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: serve a JSON script until interrupted."""
    parser = argparse.ArgumentParser(
        description="Serve a scripted OpenAI Responses API (computer tool) on 127.0.0.1."
    )
    parser.add_argument("--script", required=True, help="JSON file: a list of turns")
    parser.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    parser.add_argument("--model", action="append", dest="models", help="a model id to serve")
    args = parser.parse_args(argv)
    with open(args.script, encoding="utf-8") as fh:
        items = json.load(fh)
    if not isinstance(items, list):
        parser.error("the script must be a JSON list")
    standin = OpenAIResponsesStandIn(
        [Turn.from_json(i) for i in items], models=args.models or DEFAULT_MODELS, port=args.port
    )
    _violation_listeners.append(
        lambda v: print(
            f"openai responses stand-in refused request {v.request_index} [{v.rule}]: {v.message}",
            file=sys.stderr,
            flush=True,
        )
    )
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
    raise SystemExit(main())
