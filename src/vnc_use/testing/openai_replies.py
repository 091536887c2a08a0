"""What the OpenAI-compatible stand-in answers: the script items (:class:`Reply`,
:class:`ToolCall`) and the chat-completion or error bodies they become (see
:mod:`vnc_use.testing.openai_standin`, which serves them and offers these names too).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vnc_use.testing.openai_checks import (
    Problem,
)

__all__ = ["FINISH_TOOL", "Reply", "ScriptFn", "ScriptItem", "ToolCall"]


FINISH_TOOL = "finish"
"""The name of the finish tool call :meth:`Reply.finish` makes (argument ``text``)."""
_CONTEXT_MESSAGE = (
    "This model's maximum context length is {limit} tokens. However, your messages resulted "
    "in {got} tokens. Please reduce the length of the messages."
)
_DEFAULT_ERRORS: dict[int, tuple[str, str, str | None]] = {
    400: ("Bad request (stand-in).", "invalid_request_error", None),
    401: ("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
    404: (
        "The model does not exist or you do not have access to it.",
        "invalid_request_error",
        "model_not_found",
    ),
    429: ("Rate limit reached (stand-in).", "requests", "rate_limit_exceeded"),
    500: (
        "The server had an error while processing your request. Sorry about that!",
        "server_error",
        None,
    ),
    503: ("The engine is currently overloaded, please try again later.", "server_error", None),
}


# ----------------------------------------------------------------------------- script items


@dataclass(frozen=True)
class ToolCall:
    """One native tool call the scripted model makes (``arguments``: a dict or raw JSON)."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def to_json(self, call_id: str) -> dict[str, Any]:
        """The OpenAI ``tool_calls`` item (``arguments`` as a JSON string)."""
        args = self.arguments
        text = args if isinstance(args, str) else json.dumps(dict(args))
        return {
            "id": self.id or call_id,
            "type": "function",
            "function": {"name": self.name, "arguments": text},
        }


@dataclass(frozen=True)
class Reply:
    """One scripted answer (build with the class methods).

    An assistant message (``content`` and ``calls``) is wrapped in the ``chat.completion``
    envelope when served; ``body`` is served as it is with ``status`` (errors, raw bodies).
    ``delay`` seconds pass before the answer.
    """

    status: int = 200
    content: str | None = None
    calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    body: Mapping[str, Any] | None = None
    delay: float = 0.0

    @classmethod
    def text(cls, content: str, *, finish_reason: str = "stop", delay: float = 0.0) -> Reply:
        """An assistant message with text only (UI-TARS, Qwen ``<tool_call>`` text, a finish)."""
        return cls(content=content, finish_reason=finish_reason, delay=delay)

    @classmethod
    def tool_calls(
        cls,
        *calls: ToolCall,
        content: str | None = None,
        finish_reason: str = "tool_calls",
        delay: float = 0.0,
    ) -> Reply:
        """An assistant message with native ``tool_calls`` (and optional text)."""
        return cls(content=content, calls=calls, finish_reason=finish_reason, delay=delay)

    @classmethod
    def finish(cls, text: str, *, call_id: str | None = None, delay: float = 0.0) -> Reply:
        """A :data:`FINISH_TOOL` call ``finish(text=...)`` (the ``tools`` dialect's finish)."""
        return cls.tool_calls(ToolCall(FINISH_TOOL, {"text": text}, call_id), delay=delay)

    @classmethod
    def error(
        cls,
        status: int,
        message: str | None = None,
        *,
        type: str | None = None,
        code: str | None = None,
        param: str | None = None,
        delay: float = 0.0,
    ) -> Reply:
        """An error answer in OpenAI's shape (defaults per status: 401, 404, 429, 500, 503)."""
        default_message, default_type, default_code = _DEFAULT_ERRORS.get(
            status, (f"Stand-in error {status}.", "server_error", None)
        )
        problem = Problem(
            status,
            "scripted",
            message or default_message,
            param,
            code if code is not None else default_code,
            type or default_type,
        )
        return cls(status=status, body=problem.error_body(), delay=delay)

    @classmethod
    def context_length_exceeded(cls, limit: int = 4096, got: int = 5000) -> Reply:
        """OpenAI's 400 for a prompt longer than the model's context."""
        return cls.error(
            400,
            _CONTEXT_MESSAGE.format(limit=limit, got=got),
            code="context_length_exceeded",
            param="messages",
        )

    @classmethod
    def raw(cls, body: Mapping[str, Any], status: int = 200, delay: float = 0.0) -> Reply:
        """Serve ``body`` verbatim."""
        return cls(status=status, body=dict(body), delay=delay)

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> Reply:
        """Build a reply from one item of the JSON script format (see the module docstring)."""
        reply = cls._from_json_kind(item)
        changes: dict[str, Any] = {}
        if "delay" in item:
            changes["delay"] = float(item["delay"])
        if "finish_reason" in item:
            changes["finish_reason"] = str(item["finish_reason"])
        return _replace(reply, changes)

    @classmethod
    def _from_json_kind(cls, item: Mapping[str, Any]) -> Reply:
        if "raw" in item:
            return cls.raw(dict(item["raw"]), int(item.get("http_status", 200)))
        error = item.get("error")
        if error == "context_length_exceeded":
            return cls.context_length_exceeded()
        if error is not None:
            return cls.error(
                int(error),
                item.get("message"),
                type=item.get("type"),
                code=item.get("code"),
                param=item.get("param"),
            )
        if "finish" in item:
            return cls.finish(str(item["finish"]))
        if "tool_calls" in item:
            calls = [
                ToolCall(c["name"], c.get("arguments") or {}, c.get("id"))
                for c in item["tool_calls"]
            ]
            return cls.tool_calls(*calls, content=item.get("content"))
        if "content" in item:  # null: an empty assistant message
            content = item["content"]
            return cls(content=None if content is None else str(content), finish_reason="stop")
        raise ValueError(f"Unrecognised script item: {dict(item)!r}")

    def message(self, call_ids: Sequence[str]) -> dict[str, Any]:
        """The assistant message, with ``call_ids[i]`` for calls that give no id."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content, "refusal": None}
        if self.calls:
            message["tool_calls"] = [
                c.to_json(i) for c, i in zip(self.calls, call_ids, strict=False)
            ]
        return message


def _replace(reply: Reply, changes: Mapping[str, Any]) -> Reply:
    if not changes:
        return reply
    values = {name: getattr(reply, name) for name in Reply.__dataclass_fields__}
    values.update(changes)
    return Reply(**values)


ScriptItem = Reply | Mapping[str, Any]
"""A list-script item: a :class:`Reply`, or a dict in the JSON script format."""
ScriptFn = Callable[[Any, int], ScriptItem]
