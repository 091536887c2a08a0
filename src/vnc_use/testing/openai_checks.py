"""The request rules of the OpenAI-compatible stand-in: what a strict server refuses.

:func:`request_problems` reads one ``POST /v1/chat/completions`` body and returns every rule it
breaks as a :class:`Problem` (HTTP status, rule name, message, ``param``, ``code``). The stand-in
(:mod:`vnc_use.testing.openai_standin`) answers the first one in OpenAI's documented error
shape ``{"error": {"message", "type", "param", "code"}}``.

The wording follows what OpenAI's API answers (as quoted in public bug reports) where a rule
exists there; the image count limit takes vLLM's words (``--limit-mm-per-prompt``), since
OpenAI has no such small limit; rules marked "stand-in's own" have no public wording.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image

__all__ = [
    "ROLES",
    "Problem",
    "Violation",
    "add_violation_listener",
    "decode_data_url",
    "image_parts",
    "remove_violation_listener",
    "request_problems",
]

ROLES = ("system", "developer", "user", "assistant", "tool")
"""The message roles served (OpenAI's chat roles without the deprecated ``function``)."""

_IMAGE_FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/jpg": "JPEG"}
_USER_PART_TYPES = ("text", "image_url")
_NAME_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # OpenAI's rule for function names
_UNSUPPORTED_IMAGE = (
    "You uploaded an unsupported image. Please make sure your image has of one the following "
    "formats: ['png', 'jpeg']."
)


@dataclass(frozen=True)
class Problem:
    """One broken rule: the answer's status and OpenAI-style error fields."""

    status: int
    rule: str
    message: str
    param: str | None = None
    code: str | None = None
    type: str = "invalid_request_error"

    def error_body(self) -> dict[str, Any]:
        """``{"error": {"message", "type", "param", "code"}}`` (OpenAI's error object)."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


@dataclass(frozen=True)
class Violation:
    """A broken rule in one request (the request got an error answer), as either OpenAI
    stand-in (chat completions, Responses) records it."""

    request_index: int
    rule: str
    message: str
    status: int = 400


_violation_listeners: list[Callable[[Violation], None]] = []


def add_violation_listener(listener: Callable[[Violation], None]) -> None:
    """Call ``listener`` with every violation any OpenAI stand-in of this process records."""
    _violation_listeners.append(listener)


def remove_violation_listener(listener: Callable[[Violation], None]) -> None:
    """Stop calling ``listener`` (see :func:`add_violation_listener`)."""
    _violation_listeners.remove(listener)


def decode_data_url(url: Any) -> bytes | None:
    """The bytes of a ``data:image/png|jpeg;base64,...`` URL whose image Pillow decodes.

    None for anything else: another scheme or media type, bad base64, or bytes that are not
    a complete image of the declared format.
    """
    if not isinstance(url, str) or not url.startswith("data:"):
        return None
    header, sep, payload = url[5:].partition(",")
    media, _, encoding = header.partition(";")
    fmt = _IMAGE_FORMATS.get(media.lower())
    if not sep or fmt is None or encoding.lower() != "base64":
        return None
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    try:
        with Image.open(io.BytesIO(data)) as img:
            if img.format != fmt:
                return None
            img.load()  # decodes every pixel: a truncated file fails here
    except Exception:
        return None
    return data


def image_parts(messages: Any) -> Iterator[tuple[int, int, Mapping[str, Any]]]:
    """``(message index, part index, part)`` for every ``image_url`` part of any message."""
    if not isinstance(messages, list):
        return
    for mi, message in enumerate(messages):
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            continue
        for pi, part in enumerate(content):
            if isinstance(part, Mapping) and part.get("type") == "image_url":
                yield mi, pi, part


def request_problems(body: Any, models: Sequence[str], max_images: int | None) -> list[Problem]:
    """Every rule ``body`` breaks, the most basic first (an empty list: serve it)."""
    if not isinstance(body, Mapping):
        return [
            _bad(
                "json",
                "We could not parse the JSON body of your request. The API expects a JSON object "
                "(the stand-in's words after OpenAI's).",
            )
        ]
    problems = _field_problems(body)
    if problems:
        return problems
    model = body["model"]
    if model not in models:
        problems.append(
            Problem(
                404,
                "model_not_found",
                f"The model `{model}` does not exist or you do not have access to it.",
                code="model_not_found",
            )
        )
    problems.extend(_tools_problems(body.get("tools"), body.get("tool_choice")))
    messages = body["messages"]
    for index, message in enumerate(messages):
        problems.extend(_message_problems(index, message))
    problems.extend(_tool_pairing_problems(messages))
    problems.extend(_image_problems(messages, max_images))
    return problems


# ----------------------------------------------------------------------------- fields


def _bad(rule: str, message: str, param: str | None = None, code: str | None = None) -> Problem:
    return Problem(400, rule, message, param, code)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    names = {str: "a string", list: "an array", dict: "an object", int: "an integer"}
    return names.get(type(value), "a number" if isinstance(value, float) else "a value")


def _wrong_type(param: str, expected: str, value: Any) -> Problem:
    return _bad(
        "field_type",
        f"Invalid type for '{param}': expected {expected}, but got {_type_name(value)} instead.",
        param,
        "invalid_type",
    )


def _field_problems(body: Mapping[str, Any]) -> list[Problem]:
    """Missing or mistyped ``model`` / ``messages``, and ``stream`` (not served)."""
    if "model" not in body:
        return [_bad("missing_field", "you must provide a model parameter")]
    if not isinstance(body["model"], str):
        return [_wrong_type("model", "a string", body["model"])]
    if "messages" not in body:
        return [
            _bad(
                "missing_field",
                "Missing required parameter: 'messages'.",
                "messages",
                "missing_required_parameter",
            )
        ]
    messages = body["messages"]
    if not isinstance(messages, list):
        return [_wrong_type("messages", "an array", messages)]
    if not messages:
        return [
            _bad(
                "missing_field",
                "Invalid 'messages': empty array. Expected an array with minimum length 1, "
                "but got an empty array instead.",
                "messages",
                "empty_array",
            )
        ]
    if body.get("stream"):
        return [
            _bad(
                "stream",
                "The stand-in does not stream; send stream=false (the stand-in's own words).",
                "stream",
            )
        ]
    return []


# ----------------------------------------------------------------------------- tools


def _tools_problems(tools: Any, tool_choice: Any) -> list[Problem]:
    """Declared tools: ``{"type": "function", "function": {"name", "parameters"?}}`` each."""
    if tools is None:
        if tool_choice is not None:
            return [
                _bad(
                    "tools",
                    "Invalid value for 'tool_choice': 'tool_choice' is only allowed when "
                    "'tools' are specified.",
                    "tool_choice",
                )
            ]
        return []
    if not isinstance(tools, list):
        return [_wrong_type("tools", "an array", tools)]
    problems: list[Problem] = []
    for index, tool in enumerate(tools):
        problems.extend(_tool_problems(f"tools[{index}]", tool))
    return problems


def _tool_problems(at: str, tool: Any) -> list[Problem]:
    if not isinstance(tool, Mapping):
        return [_wrong_type(at, "an object", tool)]
    if tool.get("type") != "function":
        return [
            _bad(
                "tools",
                f"Invalid value: {tool.get('type')!r}. Supported values are: 'function'.",
                f"{at}.type",
                "invalid_value",
            )
        ]
    function = tool.get("function")
    if not isinstance(function, Mapping):
        return [_wrong_type(f"{at}.function", "an object", function)]
    name = function.get("name")
    if not isinstance(name, str):
        return [
            _bad(
                "missing_field",
                f"Missing required parameter: '{at}.function.name'.",
                f"{at}.function.name",
                "missing_required_parameter",
            )
        ]
    if not _NAME_RE.fullmatch(name):
        return [
            _bad(
                "tools",
                f"Invalid '{at}.function.name': string does not match pattern. Expected a "
                "string that matches the pattern '^[a-zA-Z0-9_-]{1,64}$'.",
                f"{at}.function.name",
                "invalid_value",
            )
        ]
    parameters = function.get("parameters", {})
    if not isinstance(parameters, Mapping):
        return [_wrong_type(f"{at}.function.parameters", "an object", parameters)]
    return []


# ----------------------------------------------------------------------------- messages


def _message_problems(index: int, message: Any) -> list[Problem]:
    """Role, content shape and the images' places in one message."""
    where = f"messages[{index}]"
    if not isinstance(message, Mapping):
        return [_wrong_type(where, "an object", message)]
    role = message.get("role")
    if role not in ROLES:
        supported = ", ".join(f"'{r}'" for r in ROLES[:-1]) + f", and '{ROLES[-1]}'"
        return [
            _bad(
                "role",
                f"Invalid value: {role!r}. Supported values are: {supported}.",
                f"{where}.role",
                "invalid_value",
            )
        ]
    problems = _content_problems(where, role, message.get("content"))
    if role == "assistant":
        problems.extend(_assistant_call_problems(where, message.get("tool_calls")))
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        problems.append(
            _bad(
                "missing_field",
                f"Missing required parameter: '{where}.tool_call_id'.",
                f"{where}.tool_call_id",
                "missing_required_parameter",
            )
        )
    return problems


def _content_problems(where: str, role: str, content: Any) -> list[Problem]:
    if content is None and role == "assistant":
        return []
    if isinstance(content, str):
        return []
    if not isinstance(content, list):
        return [_wrong_type(f"{where}.content", "a string or an array", content)]
    problems: list[Problem] = []
    for pi, part in enumerate(content):
        problems.extend(_part_problems(f"{where}.content[{pi}]", where, role, part))
    return problems


def _part_problems(at: str, where: str, role: str, part: Any) -> list[Problem]:
    if not isinstance(part, Mapping):
        return [_wrong_type(at, "an object", part)]
    kind = part.get("type")
    if kind == "image_url" and role != "user":
        return [
            _bad(
                "image_role",
                f"Invalid '{where}'. Image URLs are only allowed for messages with role 'user', "
                f"but this message with role '{role}' contains an image URL.",
                where,
                "invalid_value",
            )
        ]
    allowed = _USER_PART_TYPES if role == "user" else ("text",)
    if kind not in allowed:
        supported = ", ".join(f"'{t}'" for t in allowed)
        return [
            _bad(
                "content_part",
                f"Invalid value: {kind!r}. Supported values are: {supported}.",
                f"{at}.type",
                "invalid_value",
            )
        ]
    if kind == "text" and not isinstance(part.get("text"), str):
        return [_wrong_type(f"{at}.text", "a string", part.get("text"))]
    if kind == "image_url" and not isinstance(part.get("image_url"), Mapping):
        # Ollama's documentation passes the URL as a bare string; OpenAI's schema wants {url}.
        return [_wrong_type(f"{at}.image_url", "an object", part.get("image_url"))]
    return []


def _assistant_call_problems(where: str, calls: Any) -> list[Problem]:
    """Each tool call of a replayed assistant message: an id, type function, string args."""
    if calls is None:
        return []
    if not isinstance(calls, list):
        return [_wrong_type(f"{where}.tool_calls", "an array", calls)]
    problems: list[Problem] = []
    for ci, call in enumerate(calls):
        at = f"{where}.tool_calls[{ci}]"
        if not isinstance(call, Mapping):
            problems.append(_wrong_type(at, "an object", call))
            continue
        if not isinstance(call.get("id"), str):
            problems.append(
                _bad(
                    "missing_field",
                    f"Missing required parameter: '{at}.id'.",
                    f"{at}.id",
                    "missing_required_parameter",
                )
            )
        function = call.get("function")
        if call.get("type") != "function" or not isinstance(function, Mapping):
            problems.append(_wrong_type(f"{at}.function", "an object", function))
            continue
        if not isinstance(function.get("arguments"), str):
            problems.append(
                _wrong_type(f"{at}.function.arguments", "a string", function.get("arguments"))
            )
    return problems


# ----------------------------------------------------------------------------- tool pairing


def _call_ids(message: Mapping[str, Any]) -> list[str]:
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [c["id"] for c in calls if isinstance(c, Mapping) and isinstance(c.get("id"), str)]


def _tool_pairing_problems(messages: list[Any]) -> list[Problem]:
    """Every tool call is answered by a ``tool`` message before the next other message.

    A ``tool`` message must answer a call of the assistant message it follows (only ``tool``
    messages in between), and every call of that assistant message must be answered before
    any other message or the end of the request.
    """
    problems: list[Problem] = []
    pending: list[str] | None = None  # ids still unanswered; None: no assistant calls open
    opened_at = 0
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if role == "tool":
            problems.extend(_answer_problem(index, message, pending))
            if pending is not None and message.get("tool_call_id") in pending:
                pending.remove(message["tool_call_id"])
            continue
        if pending:
            problems.append(_unanswered(opened_at, pending))
        pending = None
        if role == "assistant" and _call_ids(message):
            pending, opened_at = list(_call_ids(message)), index
    if pending:
        problems.append(_unanswered(opened_at, pending))
    return problems


def _answer_problem(
    index: int, message: Mapping[str, Any], pending: list[str] | None
) -> list[Problem]:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str):
        return []  # reported by the message rules
    if pending is None:
        return [
            _bad(
                "tool_without_call",
                "Invalid parameter: messages with role 'tool' must be a response to a "
                "preceeding message with 'tool_calls'.",
                f"messages.[{index}].role",
            )
        ]
    if call_id not in pending:
        return [
            _bad(
                "unknown_tool_call_id",
                f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in 'tool_calls' "
                "of previous message.",
                f"messages.[{index}].tool_call_id",
            )
        ]
    return []


def _unanswered(index: int, pending: list[str]) -> Problem:
    return _bad(
        "unanswered_tool_call",
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(pending),
        f"messages.[{index}].role",
    )


# ----------------------------------------------------------------------------- images


def _image_problems(messages: list[Any], max_images: int | None) -> list[Problem]:
    """Each image a decodable PNG/JPEG data URL; at most ``max_images`` in the request."""
    problems: list[Problem] = []
    count = 0
    for mi, pi, part in image_parts(messages):
        count += 1
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, Mapping) else None
        if isinstance(url, str) and not url.startswith("data:"):
            problems.append(
                _bad(
                    "image_data",
                    f"Invalid image URL in 'messages[{mi}].content[{pi}].image_url.url': the "
                    "stand-in, like a server without network access, takes data URLs only "
                    "(the stand-in's own words).",
                    f"messages[{mi}].content[{pi}].image_url.url",
                    "invalid_image_url",
                )
            )
        elif isinstance(image, Mapping) and decode_data_url(url) is None:
            problems.append(
                _bad(
                    "image_data",
                    _UNSUPPORTED_IMAGE,
                    f"messages[{mi}].content[{pi}].image_url.url",
                    "invalid_image_format",
                )
            )
    if max_images is not None and count > max_images:
        problems.append(
            _bad(
                "max_images",
                f"At most {max_images} image(s) may be provided in one request. You can set "
                "`--limit-mm-per-prompt` to increase this limit if the model supports it.",
                "messages",
            )
        )
    return problems
