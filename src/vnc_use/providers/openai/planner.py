"""The ``openai`` planner: OpenAI's GA ``computer`` tool through the Responses API.

Requests are built in :mod:`.request` (stateless replay), actions translated in
:mod:`.actions`; this module sends the request with the official SDK (imported from
:mod:`vnc_use.providers.openai_sdk`) and reads the answer into a
:class:`~vnc_use.providers.base.Proposal`:

- each ``computer_call`` becomes its actions' vocabulary calls, in order; a call carrying
  ``pending_safety_checks`` marks its *first* vocabulary call ``needs_confirmation``, so the
  approval gate stops before any action of that call runs (the checks' codes and messages are
  the explanation); the approval is echoed as ``acknowledged_safety_checks``, a denial ends
  the run with nothing sent;
- an action that cannot run (an unknown key, button ``back``) is answered as an error and the
  actions after it in its call are not run (the model is told);
- a ``refusal`` content part, or a response or error of code ``misalignment_policy_violation``,
  ends the run as ``blocked``; a response without calls is the model's final answer;
- failures are one line naming the provider and the fix (:func:`_status_error`); the SDK
  retries connection errors, 408, 409, 429 and 5xx itself (``max_retries``), honouring
  ``retry-after``; ``timeout_s`` bounds each request.

The API key never appears in an exception message, a log line or a recorded request.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from vnc_use import config
from vnc_use.actions import GEMINI_35_DESKTOP_TABLE, ActionError, ActionTable, ValidatedAction
from vnc_use.errors import ApiError, ConfigError, PlannerError
from vnc_use.providers.base import HistoryRecord, LoadPng, Proposal, ProposedCall, StopReason
from vnc_use.providers.openai import request
from vnc_use.providers.openai.actions import Frame, Untranslatable, translate
from vnc_use.providers.openai_sdk import openai
from vnc_use.providers.pricing import flat_usage

__all__ = [
    "API_LABEL",
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "KNOWN_MODELS",
    "PROVIDER",
    "OpenAIPlanner",
]

logger = logging.getLogger(__name__)

PROVIDER = "openai"
"""The provider's name in ``run.json`` and ``--provider``."""

DEFAULT_MODEL = "gpt-5.5"
KNOWN_MODELS = ("gpt-5.5", "gpt-5.4")
"""Models documented with the GA ``computer`` tool (OpenAI's guide; openai-agents-python)."""

DEFAULT_BASE_URL = "https://api.openai.com/v1"
API_LABEL = "OpenAI API"
TOOL: dict[str, Any] = {"type": "computer"}
"""The GA computer tool: no display size, coordinates are pixels of the screenshot sent."""

MISALIGNMENT = "misalignment_policy_violation"
ERROR_KEY = "openai_error"
"""The argument that carries why an action could not be translated (validated as an error)."""

INSTRUCTIONS = (
    "You operate a Linux desktop through the computer tool. Each screenshot shows the whole "
    "screen. When the task is done, answer with a short summary."
)


class OpenAIPlanner:
    """Planner for OpenAI's GA computer-use models (``gpt-5.5``, ``gpt-5.4``).

    ``api_key`` falls back to ``OPENAI_API_KEY``, ``base_url`` to ``OPENAI_BASE_URL``, then
    OpenAI's. Constructing a planner never touches the network; :meth:`check_ready` needs a
    key. ``max_pixels`` caps the screenshots sent (10.24 MP by default).
    """

    action_table: ActionTable = GEMINI_35_DESKTOP_TABLE

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        keep_screenshots: int = 3,
        max_retries: int = 3,
        timeout_s: float = 120.0,
        max_pixels: int = request.MAX_PIXELS,
        reasoning_effort: str | None = None,
    ) -> None:
        self.model = model.strip()
        self._api_key = api_key
        self._explicit_base_url = base_url.rstrip("/") if base_url else None
        self.keep_screenshots = keep_screenshots
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.max_pixels = max_pixels
        self.reasoning_effort = reasoning_effort
        self._client: openai.OpenAI | None = None
        self._images: request.ImageCache = {}
        self._check_settings()

    # ------------------------------------------------------------------ settings

    def _check_settings(self) -> None:
        if self.model.lower().startswith("computer-use-preview"):
            raise ConfigError(
                f"model {self.model!r} used OpenAI's computer_use_preview tool, shut down on "
                f"2026-07-23; use --model {DEFAULT_MODEL} or {KNOWN_MODELS[1]} (the GA computer "
                "tool)."
            )
        if not self.model:
            raise ConfigError(f"No model id: pass --model {DEFAULT_MODEL} (or {KNOWN_MODELS[1]}).")
        if self.keep_screenshots < 0:
            raise ConfigError("keep_screenshots must be >= 0.")
        if self.max_retries < 0 or self.timeout_s <= 0 or self.max_pixels < 1:
            raise ConfigError("max_retries must be >= 0, timeout_s and max_pixels > 0.")

    @property
    def base_url(self) -> str:
        """Where requests go: explicit, else ``OPENAI_BASE_URL``, else OpenAI's."""
        return (self._explicit_base_url or config.openai_base_url() or DEFAULT_BASE_URL).rstrip("/")

    def _key(self) -> str | None:
        return (self._api_key or config.openai_api_key() or "").strip() or None

    def check_ready(self) -> None:
        """Raise :class:`ConfigError` when no API key is set."""
        if self._key() is None:
            raise ConfigError(
                "No OpenAI API key: set OPENAI_API_KEY (https://platform.openai.com/api-keys)."
            )

    def run_settings(self) -> dict[str, Any]:
        """What ``run.json`` keeps to rebuild this planner (never the key; the base URL only
        when it was given explicitly, else ``OPENAI_BASE_URL`` is read again)."""
        settings: dict[str, Any] = {
            "model": self.model,
            "provider": PROVIDER,
            "tool_version": TOOL["type"],
            "keep_screenshots": self.keep_screenshots,
        }
        if self._explicit_base_url:
            settings["base_url"] = self._explicit_base_url
        return settings

    @property
    def client(self) -> openai.OpenAI:
        """The SDK client, created on first use."""
        if self._client is None:
            self.check_ready()
            self._client = openai.OpenAI(
                api_key=self._key(),
                base_url=self.base_url,
                max_retries=self.max_retries,
                timeout=self.timeout_s,
            )
        return self._client

    def _redact(self, text: str) -> str:
        key = self._key()
        return text.replace(key, "***") if key else text

    # ------------------------------------------------------------------ requests

    def body(self, items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The request body (what ``responses.create`` is given, and the run folder keeps)."""
        body: dict[str, Any] = {
            "model": self.model,
            "instructions": INSTRUCTIONS,
            "tools": [dict(TOOL)],
            "input": [dict(i) for i in items],
            "store": False,
            "include": ["reasoning.encrypted_content"],
        }
        if self.reasoning_effort:
            body["reasoning"] = {"effort": self.reasoning_effort}
        return body

    def create(self, body: Mapping[str, Any]) -> Any:
        """One ``responses.create`` (with the SDK's retries); errors mapped to ours."""
        try:
            return self.client.responses.create(**body)
        except openai.APITimeoutError:
            raise PlannerError(
                f"{API_LABEL} at {self.base_url} did not answer within {self.timeout_s:g} s "
                f"(model {self.model}); resume the run (vnc-use resume) when it answers again."
            ) from None
        except openai.APIConnectionError as exc:
            detail = self._redact(str(exc.__cause__ or exc)).replace("\n", " ")
            raise PlannerError(
                f"Cannot reach the {API_LABEL} at {self.base_url} ({detail}); check the "
                "network or OPENAI_BASE_URL, then resume the run (vnc-use resume)."
            ) from None

    def propose(
        self,
        history: Sequence[HistoryRecord],
        load_png: LoadPng,
        keep_screenshots: int | None = None,
    ) -> Proposal:
        """Ask the model for its next calls, given vnc-use's history records."""
        keep = self.keep_screenshots if keep_screenshots is None else keep_screenshots
        built = request.build(history, load_png, keep, self._images, self.max_pixels)
        body = self.body(built.items)
        try:
            response = self.create(body)
        except openai.APIStatusError as exc:
            if _error_code(exc) == MISALIGNMENT:
                return _blocked(body, _body_of(exc), self._redact(_server_message(exc)))
            raise _status_error(exc, self.model, self.base_url, self._redact) from None
        return self.read(response, body, built)

    # ------------------------------------------------------------------ responses

    def read(self, response: Any, body: dict[str, Any], built: request.Built) -> Proposal:
        """Turn a response into a :class:`Proposal` (see the module docstring)."""
        dumped: dict[str, Any] = response.model_dump(mode="json", exclude_none=True)
        output = [item for item in dumped.get("output", []) if isinstance(item, dict)]
        usage = _usage(dumped)
        error = dumped.get("error") or {}
        if error.get("code") == MISALIGNMENT:
            return _blocked(body, dumped, str(error.get("message", "")))
        refusals = [
            part.get("refusal", "")
            for item in output
            if item.get("type") == "message"
            for part in item.get("content", [])
            if part.get("type") == "refusal"
        ]
        text = " ".join(
            part.get("text", "")
            for item in output
            if item.get("type") == "message"
            for part in item.get("content", [])
            if part.get("type") == "output_text"
        ).strip()
        thoughts = " ".join(
            s.get("text", "")
            for item in output
            if item.get("type") == "reasoning"
            for s in item.get("summary", [])
        ).strip()
        if refusals:
            why = " ".join(str(r) for r in refusals).strip() or "no reason given"
            return Proposal(
                [], text, "blocked", "refusal", usage, None, body, dumped, thoughts,
                f"the OpenAI model refused: {why}",
            )  # fmt: skip
        frame = Frame(built.image_size or (1, 1), built.screen_size or built.image_size or (1, 1))
        calls, records = self._calls(output, frame, built.image_size is not None)
        status = str(dumped.get("status") or "completed")
        stop: StopReason = "calls" if calls else "finished"
        message = None
        if not calls and status != "completed":
            stop = "error"
            reason = (dumped.get("incomplete_details") or {}).get("reason") or error.get("message")
            message = f"the OpenAI response ended {status}" + (f" ({reason})" if reason else "")
        return Proposal(
            calls=calls,
            text=text,
            stop=stop,
            reason=status,
            usage=usage,
            turn=request.turn_record(output, records, built.image_size) if calls else None,
            request_json=body,
            response_json=dumped,
            thoughts=thoughts,
            stop_message=message,
        )

    def _calls(
        self, output: Sequence[Mapping[str, Any]], frame: Frame, have_image: bool
    ) -> tuple[list[ProposedCall], list[dict[str, Any]]]:
        """Every ``computer_call``'s vocabulary calls, and the record of each call."""
        calls: list[ProposedCall] = []
        records: list[dict[str, Any]] = []
        for item in output:
            if item.get("type") != "computer_call":
                continue
            call_id = str(item.get("call_id"))
            mine = _translated(item, frame, have_image)
            checks = [
                {k: c.get(k) for k in ("id", "code", "message")}
                for c in item.get("pending_safety_checks") or []
            ]
            if checks and mine:
                mine[0]["safety"] = "needs_confirmation"
                mine[0]["safety_explanation"] = _check_explanation(checks, mine)
            for n, call in enumerate(mine):
                call["id"] = request.result_id(call_id, n)
            calls += mine
            records.append({"call_id": call_id, "count": len(mine), "checks": checks})
        return calls, records

    # ------------------------------------------------------------------ actions

    def validate(self, name: str, args: Mapping[str, Any]) -> ValidatedAction | ActionError:
        """Check a call against the vocabulary; an untranslatable action is its error."""
        if ERROR_KEY in args:
            return ActionError(name, "invalid_args", str(args[ERROR_KEY]))
        return self.action_table.validate(name, args)

    def is_custom(self, name: str) -> bool:
        """No custom functions with this provider."""
        return False

    def run_custom_function(self, call: Mapping[str, Any]) -> dict[str, Any]:
        """No custom functions with this provider: an error for the model."""
        return {"error": f"{call.get('name')!r} is not a function of this agent."}


def _check_explanation(checks: Sequence[Mapping[str, Any]], calls: Sequence[ProposedCall]) -> str:
    """What a person approving a checked ``computer_call`` reads: the checks, then every
    action the approval lets run (grid coordinates, as the approval prompt shows them)."""
    said = "; ".join(
        f"{c.get('code') or 'check'}: {c.get('message') or c.get('id')}" for c in checks
    )
    batch = ", ".join(
        call["name"]
        + "("
        + ", ".join(f"{k}={v!r}" for k, v in call["args"].items() if k != "intent")
        + ")"
        for call in calls
    )
    return f"OpenAI safety check: {said}. Approving runs this whole batch: {batch}."


def _proposed(name: str, args: dict[str, Any]) -> ProposedCall:
    return {
        "id": None,
        "name": name,
        "args": args,
        "safety": "none",
        "safety_explanation": None,
        "intent": args.get("intent"),
    }


def _translated(item: Mapping[str, Any], frame: Frame, have_image: bool) -> list[ProposedCall]:
    """A ``computer_call``'s actions as vocabulary calls; an untranslatable action becomes one
    call answered with its error, and the actions after it are dropped (not run)."""
    actions = item.get("actions")
    if actions is None and item.get("action") is not None:
        actions = [item["action"]]  # the preview shape: one action
    if not isinstance(actions, list):
        actions = []
    try:
        if not have_image and any(
            a.get("type") not in ("screenshot", "wait", "type", "keypress") for a in actions
        ):
            raise Untranslatable("pointer actions need a screenshot first; ask for one", 0)
        done = translate(actions, frame)
        failed: Untranslatable | None = None
    except Untranslatable as exc:
        index = exc.index or 0
        done = translate(actions[:index], frame)
        failed = exc
    calls = [_proposed(c.name, dict(c.args)) for group in done for c in group]
    if failed is not None:
        rest = len(actions) - (failed.index or 0) - 1
        note = f" The {rest} action(s) after it were not run." if rest > 0 else ""
        kind = str(actions[failed.index or 0].get("type")) if actions else "action"
        calls.append(_proposed(kind, {ERROR_KEY: f"{failed}.{note}"}))
    if not calls:  # an empty batch: answer it with a fresh screenshot
        calls.append(_proposed("take_screenshot", {"intent": "OpenAI screenshot"}))
    return calls


def _blocked(body: dict[str, Any], response: dict[str, Any], message: str) -> Proposal:
    return Proposal(
        [], "", "blocked", MISALIGNMENT, None, None, body, response, "",
        f"the OpenAI API blocked the run ({MISALIGNMENT}): {message or 'no reason given'}",
    )  # fmt: skip


def _body_of(exc: openai.APIStatusError) -> dict[str, Any]:
    return dict(exc.body) if isinstance(exc.body, Mapping) else {"error": str(exc.message)}


def _error_code(exc: openai.APIStatusError) -> str | None:
    code = getattr(exc, "code", None)
    if code:
        return str(code)
    body = exc.body
    inner = body.get("error", body) if isinstance(body, Mapping) else None
    return str(inner.get("code")) if isinstance(inner, Mapping) and inner.get("code") else None


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    inner = body.get("error", body) if isinstance(body, Mapping) else None
    if isinstance(inner, Mapping) and inner.get("message"):
        return str(inner["message"]).replace("\n", " ")
    return str(exc.message).replace("\n", " ")


_RESUME = "then resume the run (vnc-use resume THREAD_ID)"


def _status_error(exc: openai.APIStatusError, model: str, base_url: str, redact: Any) -> ApiError:
    """One line naming the provider, the problem and the fix."""
    code = exc.status_code
    said = redact(_server_message(exc))
    err = _error_code(exc) or ""
    if code in (401, 403):
        fix = f"the key was refused ({said}); set OPENAI_API_KEY to a valid key, {_RESUME}"
    elif code == 404:
        fix = (
            f"model {model!r} is not available to this key ({said}); use --model "
            f"{DEFAULT_MODEL} or {KNOWN_MODELS[1]}"
        )
    elif code == 429 and err == "insufficient_quota":
        fix = f"the account is out of quota ({said}); add credit, {_RESUME}"
    elif code == 429:
        fix = f"rate limited after the SDK's retries ({said}); wait a minute, {_RESUME}"
    elif code == 413 or err in ("context_length_exceeded", "request_too_large"):
        fix = f"the request is too large ({said}); lower --keep-screenshots, {_RESUME}"
    elif code >= 500:
        fix = f"OpenAI failed ({said}); {_RESUME} later"
    else:
        fix = f"the request was refused ({said})"
    logger.debug("%s error %s at %s: %s", API_LABEL, code, base_url, said)
    return ApiError(code, _reason(code), fix, api=API_LABEL)


def _reason(code: int) -> str | None:
    from http import HTTPStatus

    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return None


def _usage(dumped: Mapping[str, Any]) -> dict[str, int] | None:
    usage = dumped.get("usage")
    if not isinstance(usage, Mapping):
        return None
    return flat_usage(usage)
