"""What the Gemini model is sent: the tools, the history as ``google.genai`` contents, and the
reply to each call.

- :func:`build_config` -- the request's config: the ComputerUse tool (environment, excluded
  predefined functions), a second tool with the caller's custom function declarations, and the
  thinking config;
- :func:`to_contents` -- vnc-use's history records (see :mod:`vnc_use.providers.base`) as
  ``Content`` turns, with screenshots only in the last ``keep_screenshots`` turns that carry
  one (older turns keep their text and response dict, not their image);
- :func:`response_payload` -- the ``response`` dict answering one call: ``{"url": ""}`` (plus
  ``error``) for a desktop action, the function's own dict for a custom function, and
  ``safety_acknowledgement`` when a person approved the call;
- :func:`request_json` -- the request as JSON, for the run folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from google.genai import types

from vnc_use.errors import PlannerError
from vnc_use.providers.base import HistoryRecord, LoadPng

__all__ = [
    "ACKNOWLEDGEMENT",
    "PNG",
    "build_config",
    "function_response",
    "model_turn_content",
    "request_json",
    "response_payload",
    "to_contents",
    "turn_record",
]

PNG = "image/png"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

ACKNOWLEDGEMENT = {"safety_acknowledgement": "true"}
"""What an approved call's function response carries (the API's own spelling: the string)."""


def build_config(
    *,
    wire_environment: str,
    excluded_actions: Sequence[str],
    custom_declarations: Sequence[types.FunctionDeclaration],
    include_thoughts: bool,
) -> types.GenerateContentConfig:
    """The config sent with every request: tools and thinking."""
    tools: types.ToolListUnion = [
        types.Tool(
            computer_use=types.ComputerUse(
                environment=types.Environment(wire_environment),
                excluded_predefined_functions=list(excluded_actions) or None,
            )
        )
    ]
    if custom_declarations:
        tools.append(types.Tool(function_declarations=list(custom_declarations)))
    return types.GenerateContentConfig(
        tools=tools,
        thinking_config=types.ThinkingConfig(include_thoughts=include_thoughts),
    )


def turn_record(content: types.Content) -> dict[str, Any]:
    """The model's turn as the history keeps it: the content exactly as the API sent it
    (``thought_signature`` bytes included, as base64), JSON-able."""
    return content.model_dump(mode="json", exclude_none=True)


def model_turn_content(record: Mapping[str, Any]) -> types.Content:
    """The model turn back from :func:`turn_record`'s output, unchanged."""
    return types.Content.model_validate(record)


def response_payload(result: Mapping[str, Any]) -> dict[str, Any]:
    """The ``response`` dict answering one call, from its neutral result record.

    Records written before the neutral results (with a ready ``response`` dict) are sent as
    they are.
    """
    if "response" in result:
        return dict(result["response"])
    output = result.get("output")
    payload: dict[str, Any]
    if output is not None:
        payload = dict(output)
    else:
        payload = {"url": ""}
        if result.get("error") is not None:
            payload["error"] = result["error"]
    if result.get("approved"):
        payload.update(ACKNOWLEDGEMENT)
    if result.get("note"):
        payload["note"] = result["note"]
    return payload


def _png(load_png: LoadPng, sha: str) -> bytes:
    data = load_png(sha)
    if not data.startswith(_PNG_MAGIC):
        raise PlannerError(f"Screenshot {sha} is not a PNG; the model accepts PNG only.")
    return data


def function_response(
    result: Mapping[str, Any], load_png: LoadPng | None
) -> types.FunctionResponse:
    """The reply to one call; its screenshot goes inline when ``load_png`` is given."""
    media = None
    if load_png is not None and result.get("screenshot"):
        blob = types.FunctionResponseBlob(mime_type=PNG, data=_png(load_png, result["screenshot"]))
        media = [types.FunctionResponsePart(inline_data=blob)]
    return types.FunctionResponse(
        id=result.get("id"), name=result["name"], response=response_payload(result), parts=media
    )


def _screenshot_turns(history: Sequence[HistoryRecord]) -> list[int]:
    """Indexes of the turns that carry at least one screenshot, oldest first."""
    found = []
    for i, turn in enumerate(history):
        if turn.get("screenshot") or any(r.get("screenshot") for r in turn.get("responses", ())):
            found.append(i)
    return found


def _user_content(turn: HistoryRecord, load_png: LoadPng | None) -> types.Content:
    if "responses" in turn:
        parts = [
            types.Part(function_response=function_response(rec, load_png))
            for rec in turn["responses"]
        ]
    else:
        parts = [types.Part(text=turn["text"])]
        if load_png is not None and turn.get("screenshot"):
            parts.append(
                types.Part.from_bytes(data=_png(load_png, turn["screenshot"]), mime_type=PNG)
            )
    return types.Content(role="user", parts=parts)


def to_contents(
    history: Sequence[HistoryRecord], load_png: LoadPng, keep_screenshots: int = 3
) -> list[types.Content]:
    """The request's ``contents``: images only in the last ``keep_screenshots`` turns.

    Records say who spoke under ``"turn"``; records written before say ``"role"``.
    """
    if keep_screenshots < 0:
        raise ValueError(f"keep_screenshots must be >= 0, got {keep_screenshots}")
    with_images = set(_screenshot_turns(history)[-keep_screenshots:] if keep_screenshots else [])
    contents: list[types.Content] = []
    for i, turn in enumerate(history):
        if turn.get("turn", turn.get("role")) == "model":
            contents.append(model_turn_content(turn["content"]))
        else:
            contents.append(_user_content(turn, load_png if i in with_images else None))
    return contents


def request_json(
    model: str, contents: Sequence[types.Content], config: types.GenerateContentConfig
) -> dict[str, Any]:
    """The request as the run folder keeps it (``model_NNN_request.json``)."""
    return {
        "model": model,
        "contents": [c.model_dump(mode="json", exclude_none=True) for c in contents],
        "config": config.model_dump(mode="json", exclude_none=True),
    }
