"""What the Responses API stand-in refuses, in OpenAI's words where they are known.

Each rule is a :class:`~vnc_use.testing.openai_checks.Problem` (status, rule name, message,
param, code). :func:`request_problems` checks one ``POST /v1/responses`` body against the
stand-in's memory of what it emitted (:class:`Memory`): the computer calls, their pending
safety checks, the reasoning items and their encrypted content. Sources: the API reference
(``vnc-use`` ``shared/reference/anthropic-openai-computer-use.md`` §3, §7) and error texts seen
in public issue threads; rules the API is not documented to have are marked there as the
stand-in's own.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from vnc_use.testing.openai_checks import Problem, decode_data_url

__all__ = ["MAX_ORIGINAL_PIXELS", "Memory", "request_problems"]

MAX_ORIGINAL_PIXELS = 10_240_000
"""The largest screenshot ``detail: "original"`` keeps (10.24 MP); the stand-in refuses more
(the real API's reaction is not documented: it is the stand-in's rule)."""

_DETAILS = ("low", "high", "auto", "original")
_INCLUDES = (
    "reasoning.encrypted_content",
    "computer_call_output.output.image_url",
    "message.output_text.logprobs",
    "message.input_image.image_url",
)
_ROLES = ("user", "assistant", "system", "developer")


@dataclass
class Memory:
    """What the stand-in emitted, by id (to check what a client replays)."""

    calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    """call_id -> the ``computer_call`` item as emitted."""
    reasoning_of: dict[str, str] = field(default_factory=dict)
    """call_id -> id of the reasoning item emitted before it."""
    encrypted: dict[str, str] = field(default_factory=dict)
    """reasoning id -> its encrypted content."""
    stored: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """response id -> its whole context (input and output), for ``previous_response_id``."""


def _bad(rule: str, message: str, param: str | None = None, code: str | None = None) -> Problem:
    return Problem(400, rule, message, param, code)


def _image_problem(url: Any, detail: Any, where: str) -> Problem | None:
    if detail is not None and detail not in _DETAILS:
        return _bad(
            "image_detail",
            f"Invalid value: '{detail}'. Supported values are: {', '.join(_DETAILS)}.",
            f"{where}.detail",
        )
    data = decode_data_url(url)
    if data is None:
        return _bad(
            "image_data",
            "Invalid image: the image_url must be a data:image/png or image/jpeg base64 URL "
            "of a decodable image (the stand-in's words).",
            f"{where}.image_url",
            "invalid_image",
        )
    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
    if width * height > MAX_ORIGINAL_PIXELS:
        return _bad(
            "image_too_large",
            f"The image is {width}x{height} ({width * height} pixels); screenshots are kept "
            f"up to {MAX_ORIGINAL_PIXELS} pixels: downscale it (the stand-in's rule).",
            f"{where}.image_url",
            "image_too_large",
        )
    return None


def _top_problems(body: Mapping[str, Any], models: Sequence[str]) -> list[Problem]:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return [_bad("missing_field", "Missing required parameter: 'model'.", "model")]
    if model not in models:
        return [
            Problem(
                404,
                "model_not_found",
                f"The model `{model}` does not exist or you do not have access to it.",
                None,
                "model_not_found",
            )
        ]
    if body.get("stream"):
        return [_bad("stream", "The stand-in does not stream; leave out 'stream'.", "stream")]
    if body.get("previous_response_id") and body.get("conversation"):
        return [
            _bad(
                "state",
                "Mutually exclusive parameters: previous_response_id and conversation.",
                "previous_response_id",
            )
        ]
    for value in body.get("include") or []:
        if value not in _INCLUDES:
            return [_bad("include", f"Invalid value: '{value}'.", "include")]
    return _tool_problems(body.get("tools"), model)


def _tool_problems(tools: Any, model: str) -> list[Problem]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        return [_bad("tools", "Invalid type for 'tools': expected an array.", "tools")]
    for i, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, Mapping) else None
        if kind == "computer_use_preview":
            return [_bad("tools", f"Tool 'computer_use_preview' is not supported with {model}.")]
        if kind != "computer":
            return [
                _bad("tools", f"Invalid value: '{kind}' (the stand-in serves the computer tool).")
            ]
        extra = sorted(set(tool) - {"type"})
        if extra:
            return [_bad("tools", f"Unknown parameter: 'tools[{i}].{extra[0]}'.", f"tools[{i}]")]
    return []


@dataclass
class _Scan:
    """The state of one pass over a request's input items."""

    memory: Memory
    store: bool
    open_calls: dict[str, int] = field(default_factory=dict)
    """call_id -> index of a replayed computer_call not answered yet."""
    answered: set[str] = field(default_factory=set)
    seen_reasoning: set[str] = field(default_factory=set)


def _message_problem(item: Mapping[str, Any], i: int) -> Problem | None:
    role = item.get("role")
    if role not in _ROLES:
        return _bad("role", f"Invalid value: '{role}'. Supported values are: {_ROLES}.")
    content = item.get("content")
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return _bad("missing_field", f"Missing required parameter: 'input[{i}].content'.")
    allowed = ("output_text", "refusal") if role == "assistant" else ("input_text", "input_image")
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        where = f"input[{i}].content[{j}]"
        if kind not in allowed:
            return _bad("content_part", f"Invalid value: '{kind}' in '{where}'.", where)
        if kind == "input_image":
            problem = _image_problem(part.get("image_url"), part.get("detail"), where)
            if problem is not None:
                return problem
    return None


def _reasoning_problem(item: Mapping[str, Any], i: int, scan: _Scan) -> Problem | None:
    rid = str(item.get("id"))
    secret = item.get("encrypted_content")
    if secret is None and not scan.store:
        return _bad(
            "reasoning_not_stored",
            f"Item with id '{rid}' not found. Items are not persisted when `store` is set to "
            "false. Try again with `store` set to true, or remove this item from your input.",
            "input",
        )
    if secret is not None and scan.memory.encrypted.get(rid) != secret:
        return _bad(
            "reasoning_encrypted",
            f"The encrypted content for item {rid} could not be verified.",
            "input",
        )
    scan.seen_reasoning.add(rid)
    return None


def _plain(actions: Any) -> Any:
    """Actions without their ``null`` values (a ``null`` and an absent field are equal)."""
    if not isinstance(actions, list):
        return actions
    return [
        {k: v for k, v in a.items() if v is not None} if isinstance(a, Mapping) else a
        for a in actions
    ]


def _call_problem(item: Mapping[str, Any], i: int, scan: _Scan) -> Problem | None:
    call_id = str(item.get("call_id"))
    emitted = scan.memory.calls.get(call_id)
    if emitted is None:
        return _bad(
            "unknown_call",
            f"Unknown computer call {call_id} in input[{i}] (the stand-in never emitted it).",
            "input",
        )
    actions = item.get("actions")
    if isinstance(actions, list) and any(
        isinstance(a, Mapping) and a.get("type") == "double_click" and "keys" not in a
        for a in actions
    ):
        return _bad(
            "missing_field",
            f"Missing required parameter: 'input[{i}].actions[].keys' (a double_click's keys "
            "may be null, not absent).",
            "input",
        )
    if ("actions" in item) == ("action" in item) or _plain(actions) != _plain(
        emitted.get("actions")
    ):
        return _bad(
            "call_changed",
            f"input[{i}]: the computer_call {call_id} must be replayed as it was received "
            "(its actions unchanged; the stand-in's rule).",
            "input",
        )
    needed = scan.memory.reasoning_of.get(call_id)
    if needed and needed not in scan.seen_reasoning:
        return _bad(
            "missing_reasoning",
            f"Item '{item.get('id')}' of type 'computer_call' was provided without its "
            f"required 'reasoning' item: '{needed}'.",
            "input",
        )
    scan.open_calls[call_id] = i
    return None


def _ack_problem(item: Mapping[str, Any], call_id: str, scan: _Scan) -> Problem | None:
    pending = {c["id"] for c in scan.memory.calls[call_id].get("pending_safety_checks") or []}
    acked = item.get("acknowledged_safety_checks") or []
    ids = {c.get("id") for c in acked if isinstance(c, Mapping)}
    if ids - pending:
        return _bad(
            "unknown_safety_check",
            f"acknowledged_safety_checks of {call_id} names checks that were not pending: "
            f"{sorted(str(x) for x in ids - pending)}.",
            "input",
        )
    if pending - ids:
        return _bad(
            "unacknowledged_safety_check",
            f"The computer call {call_id} has pending safety checks "
            f"{sorted(pending - ids)}; acknowledge them in acknowledged_safety_checks to "
            "proceed.",
            "input",
        )
    return None


def _output_problem(item: Mapping[str, Any], i: int, scan: _Scan) -> Problem | None:
    call_id = str(item.get("call_id"))
    if call_id not in scan.open_calls:
        return _bad(
            "output_before_call",
            f"No tool call found for computer call output with call_id {call_id}.",
            "input",
        )
    output = item.get("output")
    if not isinstance(output, Mapping) or output.get("type") not in (
        "computer_screenshot",
        "input_image",
    ):
        return _bad(
            "output_type",
            f"input[{i}].output must be {{'type': 'computer_screenshot', 'image_url': ...}}.",
            f"input[{i}].output",
        )
    problem = _image_problem(output.get("image_url"), output.get("detail"), f"input[{i}].output")
    if problem is not None:
        return problem
    problem = _ack_problem(item, call_id, scan)
    if problem is not None:
        return problem
    del scan.open_calls[call_id]
    scan.answered.add(call_id)
    return None


def _item_problem(item: Any, i: int, scan: _Scan) -> Problem | None:
    if not isinstance(item, Mapping):
        return _bad("field_type", f"Invalid type for 'input[{i}]': expected an object.")
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        return _message_problem(item, i)
    if kind == "reasoning":
        return _reasoning_problem(item, i, scan)
    if kind == "computer_call":
        return _call_problem(item, i, scan)
    if kind == "computer_call_output":
        return _output_problem(item, i, scan)
    return _bad("item_type", f"Invalid value: '{kind}' for 'input[{i}].type'.", f"input[{i}]")


def context_of(body: Mapping[str, Any], memory: Memory) -> list[Any] | Problem:
    """The request's whole context: the stored one of ``previous_response_id``, then its
    ``input`` (a string is one user message)."""
    given = body.get("input")
    items = [{"role": "user", "content": given}] if isinstance(given, str) else given
    if not isinstance(items, list):
        return _bad("missing_field", "Missing required parameter: 'input'.", "input")
    previous = body.get("previous_response_id")
    if previous:
        if previous not in memory.stored:
            return _bad(
                "previous_response",
                f"Previous response with id '{previous}' not found.",
                "previous_response_id",
            )
        return [*memory.stored[previous], *items]
    return list(items)


def request_problems(
    body: Any, models: Sequence[str], memory: Memory
) -> tuple[list[Problem], list[Any]]:
    """Every rule ``body`` breaks (the most basic first), and its whole context."""
    if not isinstance(body, Mapping):
        return [_bad("json", "We could not parse the JSON body of your request.")], []
    problems = _top_problems(body, models)
    if problems:
        return problems, []
    context = context_of(body, memory)
    if isinstance(context, Problem):
        return [context], []
    scan = _Scan(memory, store=body.get("store", True) is not False)
    for i, item in enumerate(context):
        problem = _item_problem(item, i, scan)
        if problem is not None:
            return [problem], context
    if scan.open_calls:
        call_id = next(iter(scan.open_calls))
        return [
            _bad("unanswered_call", f"No tool output found for computer call {call_id}.", "input")
        ], context
    return [], context
