"""A local stand-in for the Gemini API that the real ``google-genai`` SDK can talk to.

It serves ``POST /v1beta/models/{model}:generateContent`` on 127.0.0.1 (an ephemeral
port by default; ``api_versions`` names other versions to serve, see rule 13) from a
*script* of replies, records every request, and checks the Computer Use contract like the
real service, answering an error when it is broken:

1. a Computer Use model (name containing ``computer-use``) needs a ``computerUse`` tool (400);
2. every inline image (user parts and function-response parts) is ``image/png`` and decodes
   as a PNG (400);
3. a model turn with N function calls is followed by a user turn with exactly N
   ``functionResponse`` parts, same names, same order; a function-response turn follows a
   model turn with calls (400);
4. the response to a call whose ``safety_decision.decision`` is ``require_confirmation``
   carries ``"safety_acknowledgement": "true"`` (400);
5. an ``x-goog-api-key`` header is present (403 PERMISSION_DENIED, as the real API answers
   unidentified callers; with ``expected_api_key`` set, a different key gets 400
   "API key not valid");
6. the ``computerUse`` tool fits the model family (:func:`model_generation`): its
   ``environment`` is a known enum value; ``ENVIRONMENT_DESKTOP`` / ``ENVIRONMENT_MOBILE`` only
   for Gemini 3.5 Flash or later (2.5 and 3 Flash know the browser only); every name in
   ``excludedPredefinedFunctions`` is one of that model's functions *in that environment*
   (Google's tables: 13 functions for 2.5 / 3; 20, 17 or 10 intent-bearing actions for 3.5 in
   the browser, desktop or mobile environment); and a Gemini 3.5 request carries the tool at
   all (the stand-in serves computer-use calls only). Rule ``computer_use_environment`` /
   ``excluded_functions`` / ``computer_use_tool`` (400);
7. for Gemini 3 models (``gemini-3*``), every function call the stand-in served with a
   ``thoughtSignature`` comes back in the history with the same signature (400 "Function
   call ... is missing a ``thought_signature``" / "Corrupted thought signature"; rule
   ``thought_signature``). Replies to Gemini 3 models get a signature on their first function
   call part when the script gives none (like the real models; ``sign_calls=False`` turns
   that off);
8. the body is at most ``max_request_bytes`` (default :data:`MAX_REQUEST_BYTES`, 20 MiB):
   "Request payload size exceeds the limit: 20971520 bytes." (rule ``request_size``);
9. the body parses like the API's protocol buffers (:mod:`vnc_use.testing.gemini_schema`):
   an unknown name at any level, a list where one value belongs, or a value of the wrong kind
   (a ``functionResponse.response`` that is not a JSON object among them) is refused with the
   parser's words, all of them in one message (rules ``unknown_field``, ``field_value``,
   ``function_response_value``);
10. every content of ``contents`` has the role ``user`` or ``model`` ("Please use a valid role:
    user, model.", rule ``role``) and at least one part ("* GenerateContentRequest.contents[i]
    .parts: contents.parts must not be empty.", rule ``empty_parts``);
11. a function response's ``parts`` hold inline images only (rule ``function_response_parts``);
12. a function response carries the ``id`` of the call it answers (both absent is fine; rule
    ``function_response_id``);
13. the path's API version is one the stand-in serves (``api_versions``, default ``v1beta``
    only, the version of every documented Computer Use example): another gets the API's 404
    NOT_FOUND for a model a version does not serve, "models/<model> is not found for API
    version v1, or is not supported for generateContent. ..." (rule ``api_version``).

Rules 8-12 (:data:`STRICT_RULES`) take the real API's wording as reported from the live service
in public issue threads, except rules 11 and 12, whose wording is the stand-in's own (Google
does not document one).

Rule 6's exact wording and the check of excluded names are the stand-in's own (the names and
environments are Google's documented ones; whether the real service rejects a foreign name is
not documented). Rule 7 follows the Gemini 3 thought-signature rule.

Both spellings the SDK emits (``inlineData``/``inline_data``, ``functionCall``/``function_call``,
...) are accepted. A rejected request does not consume a script item. Violations are kept in
:attr:`GeminiStandIn.violations`. Replies are camelCase, like the real API.

Python use::

    with GeminiStandIn([Reply.calls(FunctionCallSpec("click_at", x=500, y=300)),
                        Reply.text("done")]) as api:
        ...  # GOOGLE_GEMINI_BASE_URL points at api.base_url meanwhile
        assert not api.violations and not api.exhausted

Every violation of every stand-in in the process also goes to the callables registered with
:func:`add_violation_listener` (the test suite fails a test on a refusal it did not ask for).

The script may also be a callable ``(request_json, index) -> dict | Reply`` (``index`` counts
the requests that reached the script, from 0); a dict is served verbatim as the body.
When a list script runs out, the stand-in answers the text ``"(stand-in script exhausted)"``
and sets :attr:`GeminiStandIn.exhausted`.

Command line (for people)::

    python -m vnc_use.testing.gemini_standin --script script.json [--port N] [--api-version V]

prints the base URL and serves until interrupted; every refused request is reported on
stderr. ``script.json`` is a JSON list; each item is
one reply, one of::

    {"calls": [{"name": "click_at", "args": {"x": 500, "y": 300},
                "thoughtSignature": "<base64, optional>"}],
     "text": "optional text before the calls"}
    {"calls": [{"name": "click", "args": {"x": 500, "y": 300,     # Gemini 3.5 Flash style
                                         "intent": "Open the File menu"}}]}
    {"text": "final answer"}                      # no calls: the agent stops
    {"malformed": true}                           # finishReason MALFORMED_FUNCTION_CALL
    {"error": 503, "message": "optional", "status": "optional, e.g. UNAVAILABLE"}
    {"no_candidates": true}                       # {"candidates": []}
    {"raw": {...any response body...}, "http_status": 200}
"""

from __future__ import annotations

import argparse
import base64
import binascii
import io
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from PIL import Image

from vnc_use.testing.gemini_schema import schema_problems
from vnc_use.testing.scripted import ScriptedServer

__all__ = [
    "DEFAULT_API_VERSIONS",
    "ENVIRONMENT_FUNCTIONS",
    "EXHAUSTED_TEXT",
    "MAX_REQUEST_BYTES",
    "STRICT_RULES",
    "FunctionCallSpec",
    "GeminiStandIn",
    "RecordedRequest",
    "Reply",
    "ScriptItem",
    "Violation",
    "add_violation_listener",
    "make_png",
    "model_generation",
    "remove_violation_listener",
    "require_confirmation",
]

logger = logging.getLogger(__name__)

EXHAUSTED_TEXT = "(stand-in script exhausted)"
"""The text answered once a list script has no items left."""

BASE_URL_ENV = "GOOGLE_GEMINI_BASE_URL"

MAX_REQUEST_BYTES = 20 * 1024 * 1024
"""The largest request body served (20 MiB): Google's long-documented 20 MB total request size
for inline data, answered like the API front end with "Request payload size exceeds the
limit: 20971520 bytes." (Google raised the inline limit to 100 MB in January 2026; the
stand-in keeps the stricter figure, set ``max_request_bytes`` to change it.)"""

STRICT_RULES = (
    "request_size",
    "unknown_field",
    "field_value",
    "function_response_value",
    "role",
    "empty_parts",
    "function_response_parts",
    "function_response_id",
)
"""The rules that refuse request shapes the real API refuses (rules 8-12 of the module doc)."""

_PARSE_RULES = ("unknown_field", "field_value", "function_response_value")
_ROLE_MESSAGE = "Please use a valid role: user, model."

_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_DEFAULT_MESSAGES = {
    429: "Resource has been exhausted (e.g. check quota).",
    500: "An internal error has occurred. Please retry or report in "
    "https://developers.generativeai.google/guide/troubleshooting",
    503: "The model is overloaded. Please try again later.",
}
_CU_TOOL_MESSAGE = (
    "This model requires the use of the Computer Use tool. See "
    "https://ai.google.dev/gemini-api/docs/computer-use#send-request for instructions on "
    "adding the tool."
)
_NO_KEY_MESSAGE = (
    "Method doesn't allow unregistered callers (callers without established identity). "
    "Please use API Key or other form of API consumer identity to call this API."
)
_PATH_RE = re.compile(
    r"^/(?P<version>v[0-9]+(?:(?:alpha|beta)[0-9]*)?)/"
    r"(?:projects/[^/]+/locations/[^/]+/publishers/google/)?"
    r"models/(?P<model>[^/:]+):generateContent$"
)
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

DEFAULT_API_VERSIONS = ("v1beta",)
"""The API versions a stand-in serves unless told otherwise (rule 13)."""

# Google's documented function names (kept here as literals, independent of vnc_use.actions,
# so that the stand-in checks the client against the documentation, not against itself).
_CU_13 = (
    "open_web_browser",
    "wait_5_seconds",
    "go_back",
    "go_forward",
    "search",
    "navigate",
    "click_at",
    "hover_at",
    "type_text_at",
    "key_combination",
    "scroll_document",
    "scroll_at",
    "drag_and_drop",
)
_G35_DESKTOP = (
    "click",
    "double_click",
    "triple_click",
    "middle_click",
    "right_click",
    "mouse_down",
    "mouse_up",
    "move",
    "type",
    "drag_and_drop",
    "wait",
    "press_key",
    "key_down",
    "key_up",
    "hotkey",
    "take_screenshot",
    "scroll",
)
_G35_MOBILE = (
    "open_app",
    "click",
    "list_apps",
    "wait",
    "go_back",
    "type",
    "drag_and_drop",
    "long_press",
    "press_key",
    "take_screenshot",
)
_ENV_BROWSER, _ENV_DESKTOP, _ENV_MOBILE = (
    "ENVIRONMENT_BROWSER",
    "ENVIRONMENT_DESKTOP",
    "ENVIRONMENT_MOBILE",
)
_ENVIRONMENTS = ("ENVIRONMENT_UNSPECIFIED", _ENV_BROWSER, _ENV_DESKTOP, _ENV_MOBILE)

ENVIRONMENT_FUNCTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "2.5": {_ENV_BROWSER: _CU_13},
    "3": {_ENV_BROWSER: _CU_13},
    "3.5": {
        _ENV_BROWSER: (*_G35_DESKTOP, "go_back", "navigate", "go_forward"),
        _ENV_DESKTOP: _G35_DESKTOP,
        _ENV_MOBILE: _G35_MOBILE,
    },
}
"""Predefined function names per model generation and environment, from Google's tables."""


def model_generation(model: str | None) -> str | None:
    """``"2.5"``, ``"3"`` or ``"3.5"`` for a computer-use model id; None for other models.

    ``gemini-2.5-computer-use*`` is 2.5; ``gemini-3.5*`` is 3.5; other ``gemini-3-*`` ids
    (``gemini-3-flash-preview``, ``gemini-3-pro-preview``) are 3.
    """
    name = (model or "").lower()
    if name.startswith("gemini-2.5-computer-use"):
        return "2.5"
    if name.startswith("gemini-3.5"):
        return "3.5"
    if name.startswith("gemini-3-"):
        return "3"
    return None


# ----------------------------------------------------------------------------- helpers


def require_confirmation(
    explanation: str = "This action needs your confirmation.",
) -> dict[str, str]:
    """A ``safety_decision`` value asking for a human's confirmation."""
    return {"decision": "require_confirmation", "explanation": explanation}


def make_png(
    width: int = 8, height: int = 8, color: tuple[int, int, int] = (40, 120, 200)
) -> bytes:
    """A small solid-colour PNG (for tests and scripts)."""
    buf = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buf, format="PNG")
    return buf.getvalue()


def _b64decode(data: Any) -> bytes | None:
    """Decode standard or URL-safe base64 (the SDK sends URL-safe); None when invalid."""
    if not isinstance(data, str):
        return None
    text = data.strip().replace("-", "+").replace("_", "/")
    text += "=" * (-len(text) % 4)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def _as_list(value: Any) -> list[Any]:
    """A repeated field's items: the API reads a single value as a one-item list."""
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _pick(obj: Any, *keys: str) -> Any:
    """The value under the first key present in ``obj`` (camelCase and snake_case spellings)."""
    if not isinstance(obj, Mapping):
        return None
    for key in keys:
        if key in obj:
            return obj[key]
    return None


def _is_png(data: bytes | None) -> bool:
    if not data or not data.startswith(_PNG_MAGIC):
        return False
    try:
        with Image.open(io.BytesIO(data)) as img:
            img.verify()
            return bool(img.format == "PNG")
    except Exception:
        return False


def _norm_blob(blob: Any) -> dict[str, Any] | None:
    if not isinstance(blob, Mapping):
        return None
    data = _pick(blob, "data")
    return {
        "mimeType": _pick(blob, "mimeType", "mime_type"),
        "data": data,
        "bytes": _b64decode(data),
    }


def _norm_part(part: Any) -> dict[str, Any]:
    """A request part with the SDK's mixed spellings turned into camelCase (args untouched)."""
    out: dict[str, Any] = {}
    if not isinstance(part, Mapping):
        return out
    for name in ("text", "thought"):
        if name in part:
            out[name] = part[name]
    sig = _pick(part, "thoughtSignature", "thought_signature")
    if sig is not None:
        out["thoughtSignature"] = sig
    blob = _norm_blob(_pick(part, "inlineData", "inline_data"))
    if blob is not None:
        out["inlineData"] = blob
    fc = _pick(part, "functionCall", "function_call")
    if isinstance(fc, Mapping):
        out["functionCall"] = {
            "name": fc.get("name"),
            "args": fc.get("args") or {},
            "id": fc.get("id"),
        }
    fr = _pick(part, "functionResponse", "function_response")
    if isinstance(fr, Mapping):
        fr_parts = []
        for p in _as_list(fr.get("parts")):
            b = _norm_blob(_pick(p, "inlineData", "inline_data"))
            fr_parts.append({"inlineData": b} if b is not None else {})
        out["functionResponse"] = {
            "name": fr.get("name"),
            "response": fr.get("response") or {},
            "id": fr.get("id"),
            "parts": fr_parts,
        }
    return out


def normalize_contents(body: Any) -> list[dict[str, Any]]:
    """``body["contents"]`` as ``[{"role", "parts": [normalised part, ...]}, ...]``."""
    return [
        {
            "role": _pick(c, "role") or "user",
            "parts": [_norm_part(p) for p in _as_list(_pick(c, "parts"))],
        }
        for c in _as_list(_pick(body, "contents"))
        if isinstance(c, Mapping)
    ]


# ----------------------------------------------------------------------------- script items


@dataclass(frozen=True, init=False)
class FunctionCallSpec:
    """One function call the scripted model makes: ``FunctionCallSpec("click_at", x=1, y=2)``.

    Put ``safety_decision=require_confirmation("...")`` among the args to ask for approval.
    ``thought_signature`` (bytes, or an already base64-encoded str) is attached to the part.
    """

    name: str
    args: dict[str, Any]
    thought_signature: bytes | str | None
    call_id: str | None

    def __init__(
        self,
        name: str,
        /,
        *,
        thought_signature: bytes | str | None = None,
        call_id: str | None = None,
        **args: Any,
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "args", dict(args))
        object.__setattr__(self, "thought_signature", thought_signature)
        object.__setattr__(self, "call_id", call_id)

    def to_part(self) -> dict[str, Any]:
        """The camelCase response part carrying this call."""
        call: dict[str, Any] = {"name": self.name, "args": self.args}
        if self.call_id is not None:
            call["id"] = self.call_id
        part: dict[str, Any] = {"functionCall": call}
        sig = self.thought_signature
        if isinstance(sig, bytes):
            part["thoughtSignature"] = base64.b64encode(sig).decode("ascii")
        elif isinstance(sig, str):
            part["thoughtSignature"] = sig
        return part


@dataclass(frozen=True)
class Reply:
    """One scripted answer: an HTTP status and a JSON body (build with the class methods).

    With ``envelope`` set, ``usageMetadata``, ``modelVersion`` and ``responseId`` are added
    when serving (unless the body has them).
    """

    status: int
    body: dict[str, Any]
    envelope: bool = True
    latency: float = 0.0
    """Seconds the stand-in waits before answering (a model thinking), e.g.
    ``dataclasses.replace(Reply.calls(...), latency=1.0)``."""

    @classmethod
    def calls(
        cls,
        *calls: FunctionCallSpec,
        text: str | None = None,
        thought: str | None = None,
        finish_reason: str = "STOP",
    ) -> Reply:
        """A model turn: optional thought and text parts, then the calls (in order)."""
        parts: list[dict[str, Any]] = []
        if thought:
            parts.append({"text": thought, "thought": True})
        if text:
            parts.append({"text": text})
        parts.extend(c.to_part() for c in calls)
        return cls._candidate(parts, finish_reason)

    @classmethod
    def text(cls, text: str, finish_reason: str = "STOP") -> Reply:
        """A final answer with no calls."""
        return cls._candidate([{"text": text}], finish_reason)

    @classmethod
    def malformed(cls) -> Reply:
        """A ``MALFORMED_FUNCTION_CALL`` finish with empty parts."""
        return cls(
            200,
            {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": []},
                        "finishReason": "MALFORMED_FUNCTION_CALL",
                        "index": 0,
                    }
                ]
            },
        )

    @classmethod
    def no_candidates(cls, block_reason: str | None = None) -> Reply:
        """A response without candidates (optionally with ``promptFeedback.blockReason``)."""
        body: dict[str, Any] = {"candidates": []}
        if block_reason:
            body["promptFeedback"] = {"blockReason": block_reason}
        return cls(200, body)

    @classmethod
    def no_content(cls, finish_reason: str = "SAFETY") -> Reply:
        """A candidate without content (e.g. stopped for safety)."""
        return cls(200, {"candidates": [{"finishReason": finish_reason, "index": 0}]})

    @classmethod
    def error(
        cls, status: int, message: str | None = None, status_name: str | None = None
    ) -> Reply:
        """An error answer with the API's body ``{"error": {"code", "message", "status"}}``."""
        name = status_name or _STATUS_NAMES.get(status, "UNKNOWN")
        msg = message or _DEFAULT_MESSAGES.get(status, f"Stand-in error {status}.")
        return cls(status, {"error": {"code": status, "message": msg, "status": name}}, False)

    @classmethod
    def raw(cls, body: dict[str, Any], status: int = 200) -> Reply:
        """Serve ``body`` verbatim."""
        return cls(status, body, False)

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> Reply:
        """Build a reply from one item of the JSON script format (see the module docstring)."""
        if "raw" in item:
            return cls.raw(dict(item["raw"]), int(item.get("http_status", 200)))
        if "error" in item:
            return cls.error(int(item["error"]), item.get("message"), item.get("status"))
        if item.get("malformed"):
            return cls.malformed()
        if item.get("no_candidates"):
            return cls.no_candidates(item.get("block_reason"))
        if "calls" in item:
            specs = [
                FunctionCallSpec(
                    c["name"],
                    thought_signature=c.get("thoughtSignature"),
                    call_id=c.get("id"),
                    **(c.get("args") or {}),
                )
                for c in item["calls"]
            ]
            return cls.calls(*specs, text=item.get("text"), thought=item.get("thought"))
        if "text" in item:
            return cls.text(str(item["text"]))
        raise ValueError(f"Unrecognised script item: {dict(item)!r}")

    @classmethod
    def _candidate(cls, parts: list[dict[str, Any]], finish_reason: str) -> Reply:
        content = {"role": "model", "parts": parts}
        return cls(
            200, {"candidates": [{"content": content, "finishReason": finish_reason, "index": 0}]}
        )


ScriptItem = Reply | Mapping[str, Any]
"""A list-script item: a :class:`Reply`, or a dict in the JSON script format."""
ScriptFn = Callable[[dict[str, Any], int], Reply | Mapping[str, Any]]


# ----------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Violation:
    """A broken contract rule in one request (the request got an error answer)."""

    request_index: int
    rule: str
    message: str


_violation_listeners: list[Callable[[Violation], None]] = []


def add_violation_listener(listener: Callable[[Violation], None]) -> None:
    """Call ``listener`` with every violation any stand-in of this process records."""
    _violation_listeners.append(listener)


def remove_violation_listener(listener: Callable[[Violation], None]) -> None:
    """Stop calling ``listener`` (see :func:`add_violation_listener`)."""
    _violation_listeners.remove(listener)


@dataclass
class RecordedRequest:
    """One request as received, and what the stand-in answered."""

    index: int
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    model: str | None = None
    api_version: str | None = None
    status: int = 0
    script_index: int | None = None
    violations: list[Violation] = field(default_factory=list)

    @property
    def api_key(self) -> str | None:
        """The ``x-goog-api-key`` header, if any."""
        return self.headers.get("x-goog-api-key")

    def contents(self) -> list[dict[str, Any]]:
        """The history, normalised to camelCase (see :func:`normalize_contents`)."""
        return normalize_contents(self.body)

    def image_parts(self) -> list[bytes]:
        """Decoded bytes of every inline image: user parts and function-response parts."""
        images: list[bytes] = []
        for content in self.contents():
            for part in content["parts"]:
                blobs = [part.get("inlineData")]
                blobs += [
                    p.get("inlineData") for p in part.get("functionResponse", {}).get("parts", [])
                ]
                images.extend(b["bytes"] for b in blobs if b and b["bytes"] is not None)
        return images

    def function_responses(self) -> list[dict[str, Any]]:
        """Every function response in the history: ``{"name", "response", "id", "images"}``."""
        out = []
        for content in self.contents():
            for part in content["parts"]:
                fr = part.get("functionResponse")
                if fr is not None:
                    images = [p["inlineData"]["bytes"] for p in fr["parts"] if p.get("inlineData")]
                    out.append(
                        {
                            "name": fr["name"],
                            "response": fr["response"],
                            "id": fr["id"],
                            "images": images,
                        }
                    )
        return out

    def tools(self) -> list[dict[str, Any]]:
        """The request's ``tools`` list as sent."""
        tools = _pick(self.body, "tools")
        return list(tools) if isinstance(tools, list) else []

    def computer_use_tool(self) -> dict[str, Any] | None:
        """The ``computerUse`` tool, with ``excludedPredefinedFunctions`` normalised."""
        for tool in self.tools():
            cu = _pick(tool, "computerUse", "computer_use")
            if isinstance(cu, Mapping):
                return {
                    "environment": cu.get("environment"),
                    "excludedPredefinedFunctions": list(
                        _pick(cu, "excludedPredefinedFunctions", "excluded_predefined_functions")
                        or []
                    ),
                }
        return None

    def function_declarations(self) -> list[dict[str, Any]]:
        """All declared custom functions (from every tool)."""
        decls: list[dict[str, Any]] = []
        for tool in self.tools():
            decls.extend(_pick(tool, "functionDeclarations", "function_declarations") or [])
        return decls

    def generation_config(self) -> dict[str, Any]:
        """The ``generationConfig`` object as sent ({} when absent)."""
        cfg = _pick(self.body, "generationConfig", "generation_config")
        return dict(cfg) if isinstance(cfg, Mapping) else {}


def check_contract(
    body: Any, headers: Mapping[str, str], model: str | None, expected_api_key: str | None = None
) -> list[tuple[int, str, str]]:
    """The contract rules ``body`` breaks, as ``(http_status, rule, message)`` (empty: fine)."""
    problems: list[tuple[int, str, str]] = []
    key = headers.get("x-goog-api-key", "")
    if not key:
        problems.append((403, "api_key", _NO_KEY_MESSAGE))
    elif expected_api_key is not None and key != expected_api_key:
        problems.append((400, "api_key", "API key not valid. Please pass a valid API key."))
    if not isinstance(body, Mapping):
        problems.append((400, "body", "Request body must be a JSON object."))
        return problems
    problems.extend((400, rule, msg) for rule, msg in schema_problems(body))
    problems.extend((400, rule, msg) for rule, msg in _content_problems(body))
    contents = normalize_contents(body)
    if not contents:
        problems.append(
            (400, "contents", "* GenerateContentRequest.contents: contents is not specified")
        )
    tools = _as_list(_pick(body, "tools"))
    has_cu = any(isinstance(_pick(t, "computerUse", "computer_use"), Mapping) for t in tools)
    if model and "computer-use" in model and not has_cu:
        problems.append((400, "computer_use_tool", _CU_TOOL_MESSAGE))
    problems.extend((400, rule, msg) for rule, msg in _tool_problems(tools, model))
    problems.extend((400, rule, msg) for rule, msg in _image_problems(contents))
    problems.extend((400, rule, msg) for rule, msg in _pairing_problems(contents))
    return problems


def _content_problems(body: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    """Rules 10 and 11: roles, non-empty parts, image-only function response parts."""
    raw = [c for c in _as_list(_pick(body, "contents")) if isinstance(c, Mapping)]
    if any(c.get("role") not in ("user", "model") for c in raw):
        yield ("role", _ROLE_MESSAGE)
    empty = [i for i, c in enumerate(raw) if not _as_list(_pick(c, "parts"))]
    if empty:
        yield (
            "empty_parts",
            "".join(
                f"* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty.\n"
                for i in empty
            ),
        )
    for ci, content in enumerate(raw):
        for pi, part in enumerate(_as_list(_pick(content, "parts"))):
            fr = _pick(part, "functionResponse", "function_response")
            if not isinstance(fr, Mapping):
                continue
            for k, fr_part in enumerate(_as_list(fr.get("parts"))):
                blob = _pick(fr_part, "inlineData", "inline_data")
                mime = _pick(blob, "mimeType", "mime_type")
                if isinstance(blob, Mapping) and str(mime or "").startswith("image/"):
                    continue
                what = f"inline data of type {mime!r}" if isinstance(blob, Mapping) else "no image"
                yield (
                    "function_response_parts",
                    f"contents[{ci}].parts[{pi}].function_response.parts[{k}] holds {what}: "
                    f"the parts of a function response may hold inline images only.",
                )


def _tool_problems(tools: Any, model: str | None) -> Iterable[tuple[str, str]]:
    """Rule 6: the computerUse tool fits the model's generation and environment."""
    generation = model_generation(model)
    if generation is None:
        return
    found = [
        (i, cu)
        for i, t in enumerate(_as_list(tools))
        if isinstance(cu := _pick(t, "computerUse", "computer_use"), Mapping)
    ]
    if not found:
        if generation == "3.5":
            yield (
                "computer_use_tool",
                f"Computer use with {model} needs a computer_use tool in the request "
                f"(the stand-in serves computer-use calls only).",
            )
        return
    index, cu = found[0]
    env = cu.get("environment") or "ENVIRONMENT_UNSPECIFIED"
    if env not in _ENVIRONMENTS:
        yield (
            "computer_use_environment",
            f"Invalid value at 'tools[{index}].computer_use.environment' "
            f"(type.googleapis.com/google.ai.generativelanguage.v1beta.Environment), {env!r}",
        )
        return
    env = _ENV_BROWSER if env == "ENVIRONMENT_UNSPECIFIED" else env
    allowed = ENVIRONMENT_FUNCTIONS[generation].get(env)
    if allowed is None:
        yield (
            "computer_use_environment",
            f"{env} is not supported by {model}: desktop and mobile environments need "
            f"Gemini 3.5 Flash or later; use ENVIRONMENT_BROWSER.",
        )
        return
    excluded = _as_list(_pick(cu, "excludedPredefinedFunctions", "excluded_predefined_functions"))
    foreign = [n for n in excluded if n not in allowed]
    if foreign:
        yield (
            "excluded_functions",
            f"tools[{index}].computer_use.excluded_predefined_functions: "
            f"{', '.join(repr(n) for n in foreign)} not predefined for {model} in {env}; "
            f"its functions are {', '.join(allowed)}.",
        )


def _image_problems(contents: list[dict[str, Any]]) -> Iterable[tuple[str, str]]:
    for ci, content in enumerate(contents):
        for pi, part in enumerate(content["parts"]):
            blobs = [("inline image", part.get("inlineData"))]
            fr = part.get("functionResponse")
            if fr is not None:
                blobs += [
                    (f"function response {fr['name']!r} image", p.get("inlineData"))
                    for p in fr["parts"]
                ]
            for what, blob in blobs:
                if blob is None or (
                    what != "inline image" and not str(blob["mimeType"] or "").startswith("image/")
                ):
                    continue
                where = f"contents[{ci}].parts[{pi}] {what}"
                if blob["mimeType"] != "image/png":
                    yield (
                        "png",
                        f"{where}: requires image of mime_type image/png, "
                        f"got {blob['mimeType']!r}.",
                    )
                elif not _is_png(blob["bytes"]):
                    yield ("png", f"{where}: data is not a valid PNG image.")


def _pairing_problems(contents: list[dict[str, Any]]) -> Iterable[tuple[str, str]]:
    for ci, content in enumerate(contents):
        calls = [p["functionCall"] for p in content["parts"] if "functionCall" in p]
        responses = [p["functionResponse"] for p in content["parts"] if "functionResponse" in p]
        if responses:
            prev = contents[ci - 1] if ci > 0 else None
            if (
                prev is None
                or prev["role"] != "model"
                or not any("functionCall" in p for p in prev["parts"])
            ):
                yield (
                    "pairing",
                    f"contents[{ci}]: Please ensure that function response turn "
                    f"comes immediately after a function call turn.",
                )
        if content["role"] != "model" or not calls:
            continue
        names = [c["name"] for c in calls]
        nxt = contents[ci + 1] if ci + 1 < len(contents) else None
        got = (
            []
            if nxt is None or nxt["role"] != "user"
            else [p["functionResponse"] for p in nxt["parts"] if "functionResponse" in p]
        )
        got_names = [r["name"] for r in got]
        if got_names != names:
            yield (
                "pairing",
                f"contents[{ci + 1}]: Please ensure that the number of function "
                f"response parts is equal to the number of function call parts of "
                f"the function call turn; expected responses {names} in this "
                f"order, got {got_names}.",
            )
            continue
        for k, (call, resp) in enumerate(zip(calls, got, strict=True)):
            if (call["id"] or None) != (resp["id"] or None):
                yield (
                    "function_response_id",
                    f"contents[{ci + 1}]: function response {k} ({resp['name']!r}) has id "
                    f"{resp['id']!r}, but the function call it answers in contents[{ci}] has id "
                    f"{call['id']!r}; a function response must carry the id of its call.",
                )
            decision = (
                call["args"].get("safety_decision") if isinstance(call["args"], Mapping) else None
            )
            if isinstance(decision, Mapping) and decision.get("decision") == "require_confirmation":
                response = resp["response"] if isinstance(resp["response"], Mapping) else {}
                ack = response.get("safety_acknowledgement")
                # the API's contract has no exception: an approved call answered with an error
                # is acknowledged too (a denied one is never answered at all)
                if ack != "true":
                    yield (
                        "safety_acknowledgement",
                        f"contents[{ci + 1}]: the function call {call['name']!r} required "
                        f"user confirmation; its function response must carry "
                        f'safety_acknowledgement "true" (got {ack!r}).',
                    )


def _call_key(fc: Mapping[str, Any]) -> tuple[str, str]:
    """A function call's identity: its name and its args as canonical JSON."""
    return str(fc.get("name")), json.dumps(fc.get("args") or {}, sort_keys=True, default=str)


def _signed_like(got: Sequence[bytes | None], want: Sequence[bytes | None]) -> bool:
    """Every call served with a signature carries exactly that signature."""
    return all(w is None or g == w for g, w in zip(got, want, strict=True))


def _candidate_parts(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    candidates = body.get("candidates")
    if not isinstance(candidates, list) or not candidates:
        return []
    content = candidates[0].get("content") if isinstance(candidates[0], Mapping) else None
    parts = content.get("parts") if isinstance(content, Mapping) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _signed(body: dict[str, Any], signature: bytes) -> dict[str, Any]:
    """``body`` with ``signature`` on its first function call part, unless a part has one.

    Gemini 3 models sign the first function call of each turn. Returns a copy; the script's
    reply is never modified.
    """
    parts = _candidate_parts(body)
    if any("thoughtSignature" in p for p in parts):
        return body
    first = next((i for i, p in enumerate(parts) if "functionCall" in p), None)
    if first is None:
        return body
    new_parts = [dict(p) for p in parts]
    new_parts[first]["thoughtSignature"] = base64.b64encode(signature).decode("ascii")
    candidate = dict(body["candidates"][0])
    candidate["content"] = {**candidate["content"], "parts": new_parts}
    return {**body, "candidates": [candidate, *body["candidates"][1:]]}


# ----------------------------------------------------------------------------- server


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one request per connection: no idle threads linger

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("stand-in: " + format, *args)

    def _send(self, status: int, body: Mapping[str, Any]) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the caller died (crash tests)
            logger.debug("stand-in: the client went away before the answer was sent")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        status, body = self.server.standin._handle("POST", self.path, dict(self.headers), raw)
        self._send(status, body)

    def do_GET(self) -> None:
        status, body = self.server.standin._handle("GET", self.path, dict(self.headers), b"")
        self._send(status, body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    standin: GeminiStandIn


class GeminiStandIn(ScriptedServer[ScriptItem]):
    """The Gemini API stand-in (see the module docstring).

    ``start()``/``stop()`` run the server in a background thread; as a context manager it
    also points ``GOOGLE_GEMINI_BASE_URL`` at itself and restores the old value on exit.
    """

    handler = _Handler
    server_class = _Server
    name = "gemini-standin"

    def __init__(
        self,
        script: Sequence[ScriptItem] | ScriptFn | None = None,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        expected_api_key: str | None = None,
        sign_calls: bool | None = None,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        api_versions: Sequence[str] = DEFAULT_API_VERSIONS,
    ) -> None:
        self.api_versions: tuple[str, ...] = tuple(api_versions)
        """The API versions served; a request to another gets 404 (rule 13)."""
        self.max_request_bytes = max_request_bytes
        """Bodies larger than this are refused (rule 8)."""
        self.expected_api_key = expected_api_key
        self.sign_calls = sign_calls
        """Add a thought signature to unsigned calls: None means for Gemini 3 models only."""
        self.served_turns: dict[tuple[tuple[str, str], ...], list[tuple[bytes | None, ...]]] = {}
        """Signatures served per model turn: its calls ``(name, canonical args JSON)`` ->
        the signature of each call (None: unsigned), once per time such a turn was served."""
        self.requests: list[RecordedRequest] = []
        self.violations: list[Violation] = []
        self._saved_env: str | None = None
        super().__init__(script, port=port, host=host)

    def _is_script_fn(self, value: Any) -> bool:
        return not isinstance(value, Reply)

    # ---------------------------------------------------------------- lifecycle

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (only valid once started)."""
        return self.root_url

    def __enter__(self) -> GeminiStandIn:
        self.start()
        self._saved_env = os.environ.get(BASE_URL_ENV)
        os.environ[BASE_URL_ENV] = self.base_url
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._saved_env is None:
            os.environ.pop(BASE_URL_ENV, None)
        else:
            os.environ[BASE_URL_ENV] = self._saved_env
        self.stop()

    # ---------------------------------------------------------------- records

    @property
    def last_request(self) -> RecordedRequest:
        """The most recent request (raises IndexError when there was none)."""
        return self.requests[-1]

    def image_parts(self, request: RecordedRequest | None = None) -> list[bytes]:
        """Decoded images of ``request`` (default: the last one)."""
        return (request or self.last_request).image_parts()

    def function_responses(self, request: RecordedRequest | None = None) -> list[dict[str, Any]]:
        """Function responses of ``request`` (default: the last one)."""
        return (request or self.last_request).function_responses()

    # ---------------------------------------------------------------- handling

    def _handle(
        self, method: str, raw_path: str, headers: Mapping[str, str], raw: bytes
    ) -> tuple[int, dict[str, Any]]:
        split = urlsplit(raw_path)
        lower_headers = {k.lower(): v for k, v in headers.items()}
        too_large = len(raw) > self.max_request_bytes
        try:
            body: Any = json.loads(raw) if raw and not too_large else None
            bad_json = False
        except ValueError:
            body, bad_json = None, True
        with self._lock:
            rec = RecordedRequest(
                index=len(self.requests),
                method=method,
                path=split.path,
                query=parse_qs(split.query),
                headers=lower_headers,
                body=body,
            )
            self.requests.append(rec)
            if too_large and _PATH_RE.match(rec.path) and method == "POST":
                status, answer = self._refuse(
                    rec,
                    [
                        (
                            400,
                            "request_size",
                            f"Request payload size exceeds the limit: "
                            f"{self.max_request_bytes} bytes.",
                        )
                    ],
                )
                rec.status = status
                return status, answer
            status, answer = self._answer(rec, bad_json)
            rec.status = status
            return status, answer

    def _answer(self, rec: RecordedRequest, bad_json: bool) -> tuple[int, dict[str, Any]]:
        match = _PATH_RE.match(rec.path)
        if rec.method != "POST" or match is None:
            return self._error(
                404,
                f"Not found: {rec.method} {rec.path} (the stand-in serves "
                f"POST /{'|'.join(self.api_versions)}/models/<model>:generateContent).",
            )
        rec.model, rec.api_version = match["model"], match["version"]
        if rec.api_version not in self.api_versions:
            return self._refuse(
                rec,
                [
                    (
                        404,
                        "api_version",
                        f"models/{rec.model} is not found for API version {rec.api_version}, "
                        f"or is not supported for generateContent. Call ListModels to see the "
                        f"list of available models and their supported methods.",
                    )
                ],
            )
        if bad_json:
            return self._error(400, "Invalid JSON payload received.")
        problems = check_contract(rec.body, rec.headers, rec.model, self.expected_api_key)
        if model_generation(rec.model) in ("3", "3.5"):
            problems += [(400, r, m) for r, m in self._signature_problems(rec.contents())]
        if problems:
            return self._refuse(rec, problems)
        reply = self._next_reply(rec)
        if reply.latency > 0:
            time.sleep(reply.latency)
        body = dict(reply.body)
        sign = self.sign_calls
        if sign is None:
            sign = model_generation(rec.model) in ("3", "3.5")
        if reply.envelope and sign:
            body = _signed(body, f"standin-signature-{rec.index}".encode())
        self._remember_signatures(body)
        if reply.envelope:
            body.setdefault(
                "usageMetadata",
                {
                    "promptTokenCount": 1000 + 10 * rec.index,
                    "candidatesTokenCount": 20,
                    "totalTokenCount": 1020 + 10 * rec.index,
                },
            )
            body.setdefault("modelVersion", rec.model)
            body.setdefault("responseId", f"standin-{rec.index}")
        return reply.status, body

    def _refuse(
        self, rec: RecordedRequest, problems: Sequence[tuple[int, str, str]]
    ) -> tuple[int, dict[str, Any]]:
        """Record every problem as a violation; answer the first one's error.

        Parser problems (rule 9) are answered together, one per line, as the API does.
        """
        for _, rule, message in problems:
            violation = Violation(rec.index, rule, message)
            rec.violations.append(violation)
            self.violations.append(violation)
            logger.info("stand-in contract violation (%s): %s", rule, message)
            for listener in list(_violation_listeners):
                listener(violation)
        status, rule, message = problems[0]
        if rule in _PARSE_RULES:
            message = "\n".join(m for _, r, m in problems if r in _PARSE_RULES)
        return self._error(status, message)

    def _next_reply(self, rec: RecordedRequest) -> Reply:
        found = self._next_item(rec.body, rec.index)
        if found is None:
            return Reply.text(EXHAUSTED_TEXT)
        rec.script_index, item = found
        if isinstance(item, Reply):
            return item
        if self._fn is not None:
            return Reply.raw(dict(item))
        return Reply.from_json(item)

    def _remember_signatures(self, body: Mapping[str, Any]) -> None:
        calls = [p for p in _candidate_parts(body) if isinstance(p.get("functionCall"), Mapping)]
        sigs = tuple(_b64decode(p.get("thoughtSignature")) for p in calls)
        if any(sig is not None for sig in sigs):
            key = tuple(_call_key(p["functionCall"]) for p in calls)
            self.served_turns.setdefault(key, []).append(sigs)

    def _signature_problems(self, contents: list[dict[str, Any]]) -> Iterable[tuple[str, str]]:
        """Rule 7: a served model turn comes back with its signatures on the same calls.

        A model turn of the request is matched to a served one by its calls (names and
        arguments, in order); every call that was served signed must carry that signature.
        """
        for ci, content in enumerate(contents):
            if content["role"] != "model":
                continue
            calls = [p for p in content["parts"] if "functionCall" in p]
            served = self.served_turns.get(tuple(_call_key(p["functionCall"]) for p in calls))
            if not served:
                continue
            got = [_b64decode(p.get("thoughtSignature")) for p in calls]
            if any(_signed_like(got, want) for want in served):
                continue
            want = served[-1]
            for part, have, expected in zip(calls, got, want, strict=True):
                if expected is None or have == expected:
                    continue
                if have is None:
                    yield (
                        "thought_signature",
                        f"Function call `{part['functionCall']['name']}` in the `{ci}.` content "
                        f"block is missing a `thought_signature`.",
                    )
                else:
                    yield ("thought_signature", "Corrupted thought signature.")
                break

    @staticmethod
    def _error(status: int, message: str) -> tuple[int, dict[str, Any]]:
        reply = Reply.error(status, message)
        return reply.status, reply.body


def _print_violation(violation: Violation) -> None:
    print(
        f"stand-in refused request {violation.request_index} [{violation.rule}]: "
        f"{violation.message}",
        file=sys.stderr,
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: serve a JSON script until interrupted."""
    parser = argparse.ArgumentParser(description="Serve a scripted Gemini API on 127.0.0.1.")
    parser.add_argument("--script", required=True, help="JSON file: a list of reply items")
    parser.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    parser.add_argument(
        "--api-version",
        action="append",
        default=None,
        metavar="VERSION",
        help="an API version to serve (repeat for several; default: v1beta)",
    )
    args = parser.parse_args(argv)
    with open(args.script, encoding="utf-8") as fh:
        items = json.load(fh)
    if not isinstance(items, list):
        parser.error("the script must be a JSON list")
    standin = GeminiStandIn(
        [Reply.from_json(i) for i in items],
        port=args.port,
        api_versions=args.api_version or DEFAULT_API_VERSIONS,
    )
    add_violation_listener(_print_violation)
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
