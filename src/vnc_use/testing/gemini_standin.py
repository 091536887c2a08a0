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

The stand-in is three modules, as the OpenAI one: :mod:`~vnc_use.testing.gemini_checks` (the
rules above), :mod:`~vnc_use.testing.gemini_replies` (the script items and the bodies they
become) and this one (the HTTP server and its command line), which offers all their names.

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
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from vnc_use.testing.gemini_checks import (
    ENVIRONMENT_FUNCTIONS,
    STRICT_RULES,
    Violation,
    _b64decode,
    _call_key,
    _pick,
    _signed_like,
    _violation_listeners,
    add_violation_listener,
    check_contract,
    model_generation,
    normalize_contents,
    remove_violation_listener,
)
from vnc_use.testing.gemini_replies import (
    FunctionCallSpec,
    Reply,
    ScriptFn,
    ScriptItem,
    _candidate_parts,
    _signed,
    make_png,
    require_confirmation,
)
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

_PARSE_RULES = ("unknown_field", "field_value", "function_response_value")
_PATH_RE = re.compile(
    r"^/(?P<version>v[0-9]+(?:(?:alpha|beta)[0-9]*)?)/"
    r"(?:projects/[^/]+/locations/[^/]+/publishers/google/)?"
    r"models/(?P<model>[^/:]+):generateContent$"
)

DEFAULT_API_VERSIONS = ("v1beta",)
"""The API versions a stand-in serves unless told otherwise (rule 13)."""


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
