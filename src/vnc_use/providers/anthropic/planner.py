"""The ``anthropic`` provider: Claude's computer tools through the official ``anthropic`` SDK --
the only module that imports it.

The request is built in :mod:`.request`, Claude's actions read in :mod:`.translate`, the tool
version chosen in :mod:`.versions`. This module sends the request and maps what comes back:

- ``stop_reason: "refusal"`` -> a ``blocked`` stop naming ``stop_details.category`` (exit 6);
- ``tool_use`` blocks -> calls on the 0-999 grid, in order; no ``tool_use`` -> finished;
- ``max_tokens``, ``pause_turn``, ``model_context_window_exceeded`` without a tool call -> an
  ``error`` stop (the run ends ``error``, resumable).

Failures: the SDK's own retries (``max_retries``: connection errors, 408, 409, 429 honouring
``retry-after``, 5xx and 529) come first; then one :class:`~vnc_use.errors.ApiError` or
:class:`~vnc_use.errors.PlannerError` line naming the provider and the fix. The API key
(``ANTHROPIC_API_KEY``, read by :mod:`vnc_use.config`) never appears in a message or a log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from vnc_use import config
from vnc_use.actions import GEMINI_35_DESKTOP_TABLE, ActionError, ActionTable, ValidatedAction
from vnc_use.errors import ApiError, ConfigError, PlannerError
from vnc_use.providers.anthropic import request, translate
from vnc_use.providers.anthropic.versions import ToolChoice, choose
from vnc_use.providers.base import HistoryRecord, LoadPng, Proposal, ProposedCall

try:
    import anthropic
except ImportError as exc:  # the optional extra is not installed
    raise ConfigError(
        "The anthropic provider needs the anthropic package: pip install 'vnc-use[anthropic]'."
    ) from exc

__all__ = ["API_LABEL", "DEFAULT_MODEL", "PROVIDER", "AnthropicPlanner"]

logger = logging.getLogger(__name__)

PROVIDER = "anthropic"
API_LABEL = "Anthropic API"
DEFAULT_MODEL = "claude-sonnet-5-5"
DEFAULT_BASE_URL = "https://api.anthropic.com"


class AnthropicPlanner:
    """Planner for Claude's computer tools (toolset or legacy, see :mod:`.versions`).

    ``tool_version`` overrides the model's own; ``api_key`` falls back to
    ``ANTHROPIC_API_KEY`` and ``base_url`` to ``ANTHROPIC_BASE_URL``. Answers are translated
    into the Gemini 3.5 desktop action set. Constructing a planner never touches the network.
    """

    action_table: ActionTable = GEMINI_35_DESKTOP_TABLE

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        tool_version: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        keep_screenshots: int = 3,
        max_tokens: int = 4096,
        max_retries: int = 2,
        timeout_s: float = 120.0,
    ) -> None:
        self.model = model
        try:
            self.choice: ToolChoice = choose(model, tool_version)
        except ValueError as exc:
            raise ConfigError(f"--tool-version / tool_version=: {exc}") from None
        self.tool_version_override = tool_version
        self.warning = self.choice.warning
        if self.warning:
            logger.warning("%s", self.warning)
        self.keep_screenshots = keep_screenshots
        self.max_tokens = max_tokens
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self._api_key = api_key
        self._given_base_url = base_url.rstrip("/") if base_url else None
        """A base URL given as a setting (kept in run.json; ANTHROPIC_BASE_URL is not)."""
        self.base_url = (base_url or config.anthropic_base_url() or DEFAULT_BASE_URL).rstrip("/")
        self._client: anthropic.Anthropic | None = None
        self._images: request.ImageCache = {}
        if keep_screenshots < 0:
            raise ConfigError("keep_screenshots must be >= 0.")

    # ------------------------------------------------------------------ settings

    @property
    def tool_version(self) -> str:
        """The computer tool this planner sends."""
        return self.choice.version

    def _key(self) -> str | None:
        return (self._api_key or config.anthropic_api_key() or "").strip() or None

    def check_ready(self) -> None:
        """A missing key is a ConfigError naming the variable."""
        if not self._key():
            raise ConfigError(
                "No Anthropic API key: set ANTHROPIC_API_KEY (https://console.anthropic.com "
                "-> API keys)."
            )

    def run_settings(self) -> dict[str, Any]:
        """What ``run.json`` keeps to rebuild this planner (never the key)."""
        settings: dict[str, Any] = {
            "model": self.model,
            "provider": PROVIDER,
            "tool_version": self.tool_version,
            "keep_screenshots": self.keep_screenshots,
        }
        if self._given_base_url:
            settings["base_url"] = self._given_base_url
        return settings

    @property
    def client(self) -> anthropic.Anthropic:
        if self._client is None:
            self._client = anthropic.Anthropic(
                api_key=self._key(),
                base_url=self.base_url,
                max_retries=self.max_retries,
                timeout=self.timeout_s,
            )
        return self._client

    # ------------------------------------------------------------------ requests

    def body(self, built: request.Built) -> dict[str, Any]:
        """The request body (also what the run folder keeps)."""
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": request.SYSTEM_PROMPT,
            "tools": built.tools,
            "messages": built.messages,
        }

    def send(self, body: Mapping[str, Any]) -> Any:
        """One Messages API call (with the SDK's retries); errors mapped to ours."""
        try:
            if self.choice.beta:
                return self.client.beta.messages.create(**body, betas=[self.choice.beta])
            return self.client.messages.create(**body)
        except anthropic.APITimeoutError:
            raise PlannerError(
                f"{API_LABEL}: no answer within {self.timeout_s:g} s (model {self.model}, "
                f"after {self.max_retries} retries); try again with vnc-use resume."
            ) from None
        except anthropic.APIConnectionError as exc:
            detail = self._redact(str(exc.__cause__ or exc)).replace("\n", " ")
            raise PlannerError(
                f"{API_LABEL}: cannot reach {self.base_url} ({detail}); check the network or "
                "ANTHROPIC_BASE_URL, then vnc-use resume."
            ) from None
        except anthropic.APIStatusError as exc:
            raise self._status_error(exc) from None

    def _redact(self, text: str) -> str:
        key = self._key()
        return text.replace(key, "***") if key else text

    def _status_error(self, exc: anthropic.APIStatusError) -> ApiError:
        code = exc.status_code
        said = self._redact(_server_message(exc)).replace("\n", " ")
        fix = _fix(code, said, self.model, self.max_retries)
        logger.debug("%s error %s: %s", API_LABEL, code, said)
        return ApiError(code, _reason(code), fix, api=API_LABEL)

    def propose(
        self,
        history: Sequence[HistoryRecord],
        load_png: LoadPng,
        keep_screenshots: int | None = None,
    ) -> Proposal:
        """Ask Claude for its next actions, given vnc-use's history records."""
        self.check_ready()
        keep = self.keep_screenshots if keep_screenshots is None else keep_screenshots
        built = request.build(history, load_png, keep, self.choice, self._images)
        body = self.body(built)
        message = self.send(body)
        response = message.model_dump(mode="json", exclude_none=True)
        return self._proposal(response, built, body)

    def _proposal(
        self, response: dict[str, Any], built: request.Built, body: dict[str, Any]
    ) -> Proposal:
        content = list(response.get("content") or [])
        stop = response.get("stop_reason")
        text = " ".join(b.get("text", "") for b in content if b.get("type") == "text").strip()
        usage = _usage(response)
        common: dict[str, Any] = {
            "reason": stop,
            "usage": usage,
            "request_json": body,
            "response_json": response,
        }
        if stop == "refusal":
            return Proposal(
                calls=[],
                text=text,
                stop="blocked",
                turn=None,
                stop_message=_refusal(response),
                **common,
            )
        blocks = [b for b in content if b.get("type") == "tool_use"]
        if not blocks:
            if stop in ("end_turn", "stop_sequence", None):
                return Proposal(calls=[], text=text, stop="finished", turn=None, **common)
            return Proposal(
                calls=[],
                text=text,
                stop="error",
                turn=None,
                stop_message=f"{API_LABEL}: the model stopped with {stop} and no action; "
                "raise max_tokens or start a shorter task, then vnc-use resume.",
                **common,
            )
        size = built.image_size or (0, 0)
        pointer = None
        if built.pointer is not None:
            pointer = (built.pointer[0] * size[0], built.pointer[1] * size[1])
        done = translate.translate(blocks, translate.Frame(size[0], size[1], pointer), text)
        calls: list[ProposedCall] = [
            {
                "id": c["id"],
                "name": c["name"],
                "args": c["args"],
                "safety": "none",
                "safety_explanation": None,
                "intent": c["args"].get("intent"),
            }
            for c in done.calls
        ]
        end = None
        if done.pointer is not None and size[0] and size[1]:
            end = [done.pointer[0] / size[0], done.pointer[1] / size[1]]
        turn = {
            "content": content,
            "replies": [r.record() for r in done.replies],
            "image_size": list(size),
            "pointer": end,
        }
        return Proposal(calls=calls, text=text, stop="calls", turn=turn, **common)

    # ------------------------------------------------------------------ actions

    def validate(self, name: str, args: Mapping[str, Any]) -> ValidatedAction | ActionError:
        """Check a call against the Gemini 3.5 desktop action set; a block that could not be
        translated carries its problem, answered as is."""
        if translate.PROBLEM_KEY in args:
            return ActionError(name, "invalid_args", str(args[translate.PROBLEM_KEY]))
        return self.action_table.validate(name, args)

    def is_custom(self, name: str) -> bool:
        """No custom functions with this provider."""
        return False

    def run_custom_function(self, call: Mapping[str, Any]) -> dict[str, Any]:
        """No custom functions with this provider: an error for the model."""
        return {"error": f"{call.get('name')!r} is not a function of this agent."}


def _refusal(response: Mapping[str, Any]) -> str:
    details = response.get("stop_details") or {}
    category = details.get("category") or "unspecified"
    explanation = details.get("explanation")
    line = f"Claude refused the task (refusal, category {category})"
    return line + (f": {explanation}" if explanation else "")


def _fix(code: int, said: str, model: str, retries: int) -> str:
    if code == 401:
        return f"the key was refused ({said}); set a valid ANTHROPIC_API_KEY."
    if code == 403:
        return f"the key may not use {model} ({said}); check the key's workspace and limits."
    if code == 404:
        return f"model {model!r} was not found ({said}); pass another --model."
    if code == 413:
        return (
            f"the request is too large ({said}); send fewer screenshots (--keep-screenshots), "
            "then vnc-use resume."
        )
    if code == 429:
        return (
            f"rate limited ({said}) after {retries} retries that honoured retry-after; wait, "
            "then vnc-use resume."
        )
    if code == 529:
        return f"the API is overloaded ({said}); try again later with vnc-use resume."
    if code >= 500:
        return f"the API failed ({said}); try again later with vnc-use resume."
    return f"the request was refused ({said})."


def _server_message(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])
    return str(exc.message)


def _reason(code: int) -> str | None:
    if code == 529:
        return "Overloaded"
    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return None


def _usage(response: Mapping[str, Any]) -> dict[str, int] | None:
    usage = response.get("usage")
    if not isinstance(usage, Mapping):
        return None
    return {k: v for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)}
