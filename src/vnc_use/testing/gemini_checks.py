"""The Gemini stand-in's contract checks (rules 1-7 and 10-12 of
:mod:`vnc_use.testing.gemini_standin`; rule 9's schema is :mod:`vnc_use.testing.gemini_schema`):
what a request must hold to be answered, each broken rule a ``(rule, message)``, and the
:class:`Violation` records every stand-in of the process reports to its listeners.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image

from vnc_use.testing.gemini_schema import schema_problems

__all__ = [
    "ENVIRONMENT_FUNCTIONS",
    "STRICT_RULES",
    "Violation",
    "add_violation_listener",
    "check_contract",
    "model_generation",
    "normalize_contents",
    "remove_violation_listener",
]

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
_ROLE_MESSAGE = "Please use a valid role: user, model."
_CU_TOOL_MESSAGE = (
    "This model requires the use of the Computer Use tool. See "
    "https://ai.google.dev/gemini-api/docs/computer-use#send-request for instructions on "
    "adding the tool."
)
_NO_KEY_MESSAGE = (
    "Method doesn't allow unregistered callers (callers without established identity). "
    "Please use API Key or other form of API consumer identity to call this API."
)
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

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
