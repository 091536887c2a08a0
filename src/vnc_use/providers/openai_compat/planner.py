"""The ``openai-compatible`` planner: any chat-completions server (LM Studio, Ollama, vLLM,
llama.cpp) through the official ``openai`` SDK (imported from
:mod:`vnc_use.providers.openai_sdk`, its one import site).

What the model is sent is built in :mod:`.request`; how its answer is read is the dialect's
(:mod:`.dialects`). This module sends the request, reads the answer into a
:class:`~vnc_use.providers.base.Proposal` and maps failures to :mod:`vnc_use.errors`:

- the SDK's own retries (``max_retries``, backoff) cover connection errors, 408, 429 and 5xx;
  ``timeout_s`` bounds each request;
- then an unreachable server or a timeout is a :class:`~vnc_use.errors.PlannerError`, an error
  status an :class:`~vnc_use.errors.ApiError`, each one line naming the server and the fix;
- an answer that holds no usable action and no finish (free text, a malformed
  ``<tool_call>``, a point off the image) is answered to the model as an error -- the reply,
  a ``tool`` message per call id, then a ``user`` message naming the problem -- and asked
  again, at most ``max_parse_retries`` times; then a PlannerError. No call of such an answer
  runs: one bad call in a turn makes the whole turn retried (never a guessed point).

The API key never appears in an exception message or a log line.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlparse

from vnc_use import config
from vnc_use.actions import GEMINI_35_DESKTOP_TABLE, ActionError, ActionTable, ValidatedAction
from vnc_use.errors import ApiError, ConfigError, PlannerError
from vnc_use.providers.base import HistoryRecord, LoadPng, Proposal, ProposedCall
from vnc_use.providers.openai_compat import request
from vnc_use.providers.openai_compat.dialects import (
    DIALECT_NAMES,
    Dialect,
    Parsed,
    ParseError,
    dialect_by_name,
    dialect_for_model,
)
from vnc_use.providers.openai_compat.dialects.base import Frame
from vnc_use.providers.openai_sdk import openai  # ConfigError when the extra is missing
from vnc_use.providers.pricing import flat_usage

__all__ = ["PLACEHOLDER_API_KEY", "PROVIDER", "OpenAICompatPlanner"]

logger = logging.getLogger(__name__)

PROVIDER = "openai-compatible"
"""The provider's name in ``run.json`` and ``--provider``."""

PLACEHOLDER_API_KEY = "no-key"
"""Sent when no key is set: the SDK requires one, local servers ignore it."""

API_LABEL = "OpenAI-compatible server"
"""How :class:`ApiError` names this provider."""

_CONTEXT_WORDS = ("context", "too long", "maximum", "token", "length")


class OpenAICompatPlanner:
    """Planner for a model behind an OpenAI-compatible ``/v1/chat/completions`` endpoint.

    ``dialect`` (``tools``, ``qwen3-vl``, ``qwen2.5-vl``, ``ui-tars``) defaults from the model
    id (:func:`~.dialects.dialect_for_model`); an explicit value wins. ``api_key`` falls back
    to ``OPENAI_API_KEY`` and may be absent (a placeholder is sent). Answers are translated
    into the Gemini 3.5 desktop action set (:attr:`action_table`). Constructing a planner
    never touches the network.
    """

    action_table: ActionTable = GEMINI_35_DESKTOP_TABLE
    """The actions every dialect is translated into (validation and execution use it)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        dialect: str | None = None,
        api_key: str | None = None,
        keep_screenshots: int = 2,
        *,
        max_retries: int = 2,
        timeout_s: float = 120.0,
        max_parse_retries: int = 2,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.dialect_name = dialect or dialect_for_model(model)
        self.keep_screenshots = keep_screenshots
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.max_parse_retries = max_parse_retries
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._api_key = api_key
        self._client: openai.OpenAI | None = None
        self._images: request.ImageCache = {}
        """The screenshots of the last request as sent (the next one reuses all but one)."""
        self.check_ready()
        self.dialect: Dialect = dialect_by_name(self.dialect_name)

    # ------------------------------------------------------------------ settings

    def check_ready(self) -> None:
        """Raise :class:`ConfigError` for settings that cannot work (no network involved)."""
        url = urlparse(self.base_url)
        if url.scheme not in ("http", "https") or not url.netloc:
            raise ConfigError(
                f"Base URL {self.base_url!r} is not an http(s) URL; give the server's, e.g. "
                f"http://localhost:1234/v1 (LM Studio) or http://localhost:11434/v1 (Ollama)."
            )
        if not self.model.strip():
            raise ConfigError("No model id: pass the id the server lists at /v1/models.")
        if self.dialect_name not in DIALECT_NAMES:
            raise ConfigError(
                f"Unknown dialect {self.dialect_name!r}; known: {', '.join(DIALECT_NAMES)}."
            )
        if self.keep_screenshots < 0:
            raise ConfigError("keep_screenshots must be >= 0.")
        if self.max_retries < 0 or self.max_parse_retries < 0:
            raise ConfigError("max_retries and max_parse_retries must be >= 0.")
        if self.timeout_s <= 0:
            raise ConfigError("timeout_s must be > 0.")

    def run_settings(self) -> dict[str, Any]:
        """What ``run.json`` keeps to rebuild this planner (never the key)."""
        return {
            "model": self.model,
            "provider": PROVIDER,
            "base_url": self.base_url,
            "dialect": self.dialect_name,
            "keep_screenshots": self.keep_screenshots,
        }

    @property
    def client(self) -> openai.OpenAI:
        """The SDK client, created on first use."""
        if self._client is None:
            self._client = openai.OpenAI(
                base_url=self.base_url,
                api_key=self._key() or PLACEHOLDER_API_KEY,
                max_retries=self.max_retries,
                timeout=self.timeout_s,
            )
        return self._client

    def _key(self) -> str | None:
        return (self._api_key or config.openai_api_key() or "").strip() or None

    def _redact(self, text: str) -> str:
        key = self._key()
        return text.replace(key, "***") if key else text

    # ------------------------------------------------------------------ requests

    def complete(self, messages: Sequence[Mapping[str, Any]]) -> Any:
        """One chat completion (with the SDK's retries); errors mapped to ours."""
        extra: dict[str, Any] = {}
        tools = self.dialect.tools()
        if tools:
            extra["tools"] = tools
        if self.max_tokens is not None:
            extra["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            extra["temperature"] = self.temperature
        try:
            return self.client.chat.completions.create(
                model=self.model,
                messages=list(messages),  # type: ignore[arg-type]  # plain OpenAI JSON
                **extra,
            )
        except openai.APITimeoutError:
            raise PlannerError(
                f"The server at {self.base_url} did not answer within {self.timeout_s:g} s "
                f"(model {self.model}); raise the timeout or check the server's load."
            ) from None
        except openai.APIConnectionError as exc:
            detail = self._redact(str(exc.__cause__ or exc)).replace("\n", " ")
            raise PlannerError(
                f"Cannot reach the OpenAI-compatible server at {self.base_url} ({detail}); "
                f"start it (LM Studio, Ollama, vLLM) or fix the base URL."
            ) from None
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from None

    def _status_error(self, exc: openai.APIStatusError) -> ApiError:
        code = exc.status_code
        said = self._redact(_server_message(exc)).replace("\n", " ")
        if code == 404:
            fix = (
                f"model {self.model!r} is not available at {self.base_url} ({said}); load it in "
                f"the server, or pass an id listed at {self.base_url}/models."
            )
        elif code in (401, 403):
            fix = f"the server at {self.base_url} refused the key ({said}); set OPENAI_API_KEY."
        elif code in (400, 413) and any(w in said.lower() for w in _CONTEXT_WORDS):
            fix = (
                f"the request does not fit the model's context at {self.base_url} ({said}); "
                f"send fewer screenshots (keep_screenshots) or raise the server's context length."
            )
        elif code >= 500:
            fix = f"the server at {self.base_url} failed ({said}); see the server's log."
        else:
            fix = f"the server at {self.base_url} refused the request ({said})."
        logger.debug("%s error %s at %s: %s", API_LABEL, code, self.base_url, said)
        return ApiError(code, _reason(code), fix, api=API_LABEL)

    def propose(
        self,
        history: Sequence[HistoryRecord],
        load_png: LoadPng,
        keep_screenshots: int | None = None,
    ) -> Proposal:
        """Ask the model for its next calls, given vnc-use's history records.

        Screenshots go in the last ``keep_screenshots`` turns that carry one (default: the
        planner's). An unusable answer is answered as an error and asked again (see the
        module docstring).
        """
        keep = self.keep_screenshots if keep_screenshots is None else keep_screenshots
        built = request.build(history, load_png, keep, self.dialect, self._images)
        frame = self.dialect.frame(built.image_size, built.pointer)
        messages = built.messages
        error = ""
        for attempt in range(self.max_parse_retries + 1):
            sent = request.request_json(self.model, messages, self.dialect.tools())
            completion = self.complete(messages)
            message = _assistant_message(completion)
            try:
                parsed = self._parse(message, frame)
            except ParseError as exc:
                error = str(exc)
                logger.info("Unusable answer (attempt %d): %s", attempt + 1, error)
                messages = [*messages, *request.feedback(message or {}, error)]
                continue
            return self._proposal(parsed, message, built, sent, completion)
        raise PlannerError(
            f"The model {self.model} at {self.base_url} gave no usable action "
            f"{self.max_parse_retries + 1} times in a row (last: {error}); try another "
            f"--dialect or model."
        )

    def _parse(self, message: Mapping[str, Any] | None, frame: Frame) -> Parsed:
        if message is None:
            raise ParseError("The answer is empty.")
        return self.dialect.parse(message, frame)

    def _proposal(
        self,
        parsed: Parsed,
        message: Mapping[str, Any] | None,
        built: request.Built,
        sent: dict[str, Any],
        completion: Any,
    ) -> Proposal:
        calls: list[ProposedCall] = [
            {
                "id": c.source_id,
                "name": c.name,
                "args": dict(c.args),
                "safety": "none",
                "safety_explanation": None,
                "intent": c.args.get("intent"),
            }
            for c in parsed.calls
        ]
        choice = completion.choices[0]
        return Proposal(
            calls=calls,
            text=parsed.text if parsed.finished or parsed.asks else parsed.thought,
            stop="asks_person"
            if parsed.asks
            else "failed"
            if parsed.failed
            else "finished"
            if parsed.finished
            else "calls",
            stop_message=_failure_message(parsed),
            reason=choice.finish_reason,
            usage=_usage(completion),
            turn=request.turn_record(
                self.dialect_name, message or {}, parsed.calls, built.image_size
            ),
            request_json=sent,
            response_json=completion.model_dump(mode="json", exclude_none=True),
        )

    # ------------------------------------------------------------------ actions

    def validate(self, name: str, args: Mapping[str, Any]) -> ValidatedAction | ActionError:
        """Check a call against the Gemini 3.5 desktop action set."""
        return self.action_table.validate(name, args)

    def is_custom(self, name: str) -> bool:
        """No custom functions with this provider."""
        return False

    def run_custom_function(self, call: Mapping[str, Any]) -> dict[str, Any]:
        """No custom functions with this provider: an error for the model."""
        return {"error": f"{call.get('name')!r} is not a function of this agent."}


def _failure_message(parsed: Parsed) -> str | None:
    """The run's reason when the model ended the task saying it failed: its own words."""
    if not parsed.failed:
        return None
    return f"the model reported that the task failed: {parsed.text or '(no words)'}"


def _assistant_message(completion: Any) -> dict[str, Any] | None:
    """The first choice's message as OpenAI JSON, or None when there is none."""
    choices = getattr(completion, "choices", None) or []
    if not choices or choices[0].message is None:
        return None
    dumped: dict[str, Any] = choices[0].message.model_dump(mode="json", exclude_none=True)
    return dumped


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(exc.message)


def _reason(code: int) -> str | None:
    from http import HTTPStatus

    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return None


def _usage(completion: Any) -> dict[str, int] | None:
    usage = getattr(completion, "usage", None)
    if usage is None:
        return None
    return flat_usage(usage.model_dump(exclude_none=True))
