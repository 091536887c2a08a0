"""What the Gemini stand-in answers: the script items (:class:`Reply`, :class:`FunctionCallSpec`)
turned into response bodies like the real API's (camelCase), and the thought signatures
it puts on Gemini 3 replies (rule 7 of :mod:`vnc_use.testing.gemini_standin`).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from PIL import Image

__all__ = [
    "FunctionCallSpec",
    "Reply",
    "ScriptFn",
    "ScriptItem",
    "make_png",
    "require_confirmation",
]

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
