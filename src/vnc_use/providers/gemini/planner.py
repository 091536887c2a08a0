"""Gemini Computer Use planner: calls the API and reads its answer into vnc-use's terms.

What the model is sent (tools, history, replies to calls) is built in
:mod:`vnc_use.providers.gemini.request`; this module sends it and turns the answer into a
provider-neutral :class:`~vnc_use.providers.base.Proposal`.

The client is the real ``google-genai`` SDK. Retries of 408/429/5xx and of connection errors
are the SDK's own (``HttpRetryOptions``); this module adds the retry of answers that are
neither calls, nor a normal finish, nor a refusal (``MALFORMED_FUNCTION_CALL``, no candidates,
``MAX_TOKENS`` without calls, ...), and maps failures to :mod:`vnc_use.errors`:
an API error status becomes :class:`~vnc_use.errors.ApiError`, an unreachable endpoint a
:class:`~vnc_use.errors.PlannerError`, a missing key a :class:`~vnc_use.errors.ConfigError`.
The API key never appears in an exception message or a log line.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from vnc_use import config
from vnc_use.actions import (
    GEMINI_25_TABLE,
    ActionError,
    ActionTable,
    ValidatedAction,
    split_safety_decision,
)
from vnc_use.errors import ApiError, ConfigError, PlannerError
from vnc_use.providers.base import (
    HistoryRecord,
    LoadPng,
    Proposal,
    ProposedCall,
    SafetyMark,
    StopReason,
)
from vnc_use.providers.gemini import request
from vnc_use.providers.gemini.families import (
    EnvironmentName,
    ModelFamily,
    family_by_name,
    family_for_model,
    normalize_environment,
)

__all__ = [
    "DEFAULT_API_VERSION",
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "RETRY_STATUS_CODES",
    "CustomFunction",
    "GeminiComputerUse",
    "Proposal",
    "safety_mark",
]

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "gemini-2.5-computer-use-preview-10-2025"
"""The Gemini 2.5 Computer Use preview model."""

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/"
"""Where the SDK sends Developer API requests when no base URL is configured."""

DEFAULT_API_VERSION = "v1beta"
"""The API version requests go to unless chosen otherwise: every documented Computer Use REST
example uses ``v1beta`` (google-genai 3 would send ``v1``, where the tool is not documented)."""

_API_VERSION_RE = re.compile(r"v[0-9]+(?:(?:alpha|beta)[0-9]*)?")

RETRY_STATUS_CODES: tuple[int, ...] = (408, 429, 500, 502, 503, 504)
"""HTTP statuses the SDK retries (with exponential backoff) before giving up."""

BENIGN_DECISIONS = frozenset({"regular", "allowed", "allow"})
"""``safety_decision.decision`` values that let an action run without asking."""

CONFIRM_DECISION = "require_confirmation"
"""The one ``safety_decision.decision`` that goes to a person. Any other value that is not
benign (``blocked``, or one we do not know) is marked ``blocked``: never run, never asked."""

# Finish reasons of a turn without calls, as a StopReason: the model refused or was stopped by
# a filter ("blocked"), ended normally ("finished"); any other reason (MAX_TOKENS, OTHER,
# NO_CANDIDATES, MALFORMED_FUNCTION_CALL, none at all, ...) is an "error", asked again.
BLOCKED_FINISH = frozenset(
    {"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY", "RECITATION"}
)
FINISHED = "STOP"
PROMPT_BLOCKED = "PROMPT_BLOCKED:"


def _network_errors() -> tuple[type[BaseException], ...]:
    """Transport errors of httpx and of its fork httpx2 (the SDK may use either)."""
    errs: list[type[BaseException]] = [httpx.TransportError]
    try:
        httpx2 = importlib.import_module("httpx2")
    except ImportError:
        return tuple(errs)
    extra = getattr(httpx2, "TransportError", None)
    if isinstance(extra, type) and issubclass(extra, BaseException):
        errs.append(extra)
    return tuple(errs)


_NETWORK_ERRORS = _network_errors()


@dataclass(frozen=True)
class CustomFunction:
    """A function of your own that the model may call next to the predefined ones.

    ``declaration`` is sent to the model in a second tool (``function_declarations``);
    ``fn`` is called with the call's arguments as keywords and returns a plain JSON-able dict,
    which is sent back as the function response (no screenshot).
    """

    name: str
    declaration: types.FunctionDeclaration
    fn: Callable[..., dict[str, Any]]

    def __post_init__(self) -> None:
        if self.declaration.name != self.name:
            raise ConfigError(
                f"CustomFunction {self.name!r}: declaration is named {self.declaration.name!r}"
            )


class GeminiComputerUse:
    """Planner for Gemini Computer Use models through the ``google-genai`` SDK.

    ``model`` picks the model family (:func:`vnc_use.providers.gemini.families.family_for_model`;
    ``family``
    names one explicitly), which decides the action set (:attr:`action_table`) and how the
    ``environment`` goes on the wire. ``environment`` is ``"browser"`` or ``"desktop"`` (the
    ``ENVIRONMENT_*`` spellings work too); ``None`` means the family's default (desktop for
    Gemini 3.5 Flash, browser for the others). For the 2.5 / 3 families on a desktop the
    browser-only functions are excluded by default; ``keep_browser_actions=True`` keeps them.

    ``excluded_actions`` are predefined functions the model must not use (sent as
    ``excluded_predefined_functions``, together with the environment's default exclusions);
    ``custom_functions`` add your own. ``api_key`` falls back to ``GOOGLE_API_KEY`` then
    ``GEMINI_API_KEY`` (as the SDK does); ``base_url`` falls back to the SDK's own
    ``GOOGLE_GEMINI_BASE_URL`` handling; ``api_version`` (the path's ``v1beta`` / ``v1``)
    falls back to :func:`vnc_use.config.gemini_api_version`, then :data:`DEFAULT_API_VERSION`
    (fixed when the planner is made, and kept in run.json). The HTTP client is created on
    first use, so constructing a planner never touches the network or needs a key.
    """

    action_table: ActionTable = GEMINI_25_TABLE
    """The actions this model has in this environment (validation and execution use it)."""

    def __init__(
        self,
        excluded_actions: list[str] | None = None,
        model: str = DEFAULT_MODEL,
        include_thoughts: bool = False,
        custom_functions: list[CustomFunction] | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        api_version: str | None = None,
        retry_attempts: int = 5,
        retry_initial_delay: float = 1.0,
        retry_max_delay: float = 30.0,
        http_timeout_s: float = 120.0,
        max_malformed_retries: int = 3,
        keep_screenshots: int = 3,
        environment: str | None = None,
        family: str | ModelFamily | None = None,
        keep_browser_actions: bool = False,
    ) -> None:
        self.model = model
        self.family: ModelFamily = (
            family_for_model(model)
            if family is None
            else family
            if isinstance(family, ModelFamily)
            else family_by_name(family)
        )
        self.environment: EnvironmentName = (
            self.family.default_environment
            if environment is None
            else normalize_environment(environment)
        )
        self.action_table = self.family.table_for(self.environment)
        self.keep_browser_actions = keep_browser_actions
        explicit = list(excluded_actions or [])
        defaults = () if keep_browser_actions else self.family.default_exclusions(self.environment)
        self.excluded_actions: list[str] = explicit + [n for n in defaults if n not in explicit]
        """Sent as ``excluded_predefined_functions`` and refused if called anyway."""
        self.wire_environment: str = self.family.wire_environment(self.environment)
        """The ``ComputerUse.environment`` sent, e.g. ``"ENVIRONMENT_DESKTOP"``."""
        self.include_thoughts = include_thoughts
        self.custom_functions: dict[str, CustomFunction] = {}
        self.retry_attempts = retry_attempts
        self.retry_initial_delay = retry_initial_delay
        self.retry_max_delay = retry_max_delay
        self.http_timeout_s = http_timeout_s
        self.max_malformed_retries = max_malformed_retries
        self.keep_screenshots = keep_screenshots
        self._api_key = api_key
        self._base_url = base_url
        self.api_version: str = (
            api_version or config.gemini_api_version() or DEFAULT_API_VERSION
        ).strip()
        """The API version every request goes to (``/v1beta/models/...``)."""
        self._client: genai.Client | None = None
        self._resolved_key: str | None = None

        self._check_settings(explicit)
        for cf in custom_functions or []:
            if cf.name in self.custom_functions:
                raise ConfigError(f"Custom function {cf.name!r} is declared twice.")
            if cf.name in self.action_table and cf.name not in self.excluded_actions:
                raise ConfigError(
                    f"Custom function {cf.name!r} clashes with a predefined function; "
                    f"exclude the predefined one (excluded_actions) or rename yours."
                )
            self.custom_functions[cf.name] = cf

        self.config: types.GenerateContentConfig = request.build_config(
            wire_environment=self.wire_environment,
            excluded_actions=self.excluded_actions,
            custom_declarations=[cf.declaration for cf in self.custom_functions.values()],
            include_thoughts=include_thoughts,
        )
        """The tools and thinking config sent with every request (see :mod:`.request`)."""

    def _check_settings(self, explicit_exclusions: list[str]) -> None:
        if not _API_VERSION_RE.fullmatch(self.api_version):
            raise ConfigError(
                f"API version {self.api_version!r} is not a Gemini API version; use "
                f"{DEFAULT_API_VERSION} (the default), v1 or v1alpha."
            )
        unknown = self.action_table.unknown_names(explicit_exclusions)
        if unknown:
            raise ConfigError(
                f"Unknown excluded action(s) {', '.join(unknown)} for {self.model} "
                f"({self.family.name}, {self.environment}); "
                f"known: {', '.join(self.action_table.names)}."
            )
        if (
            self.keep_browser_actions
            and self.environment == "desktop"
            and (not self.family.excludes_browser_only)
        ):
            raise ConfigError(
                f"keep_browser_actions has no effect for {self.model}: the {self.family.name} "
                f"desktop environment has no browser actions; use environment='browser'."
            )
        if self.retry_attempts < 1:
            raise ConfigError("retry_attempts must be >= 1 (1 means no retry).")
        if self.max_malformed_retries < 0:
            raise ConfigError("max_malformed_retries must be >= 0.")
        if self.keep_screenshots < 0:
            raise ConfigError("keep_screenshots must be >= 0.")
        if self.http_timeout_s <= 0:
            raise ConfigError("http_timeout_s must be > 0.")

    # ------------------------------------------------------------------ client

    @property
    def base_url(self) -> str:
        """The endpoint requests go to (explicit, else ``GOOGLE_GEMINI_BASE_URL``, else Google)."""
        return self._base_url or config.gemini_base_url() or DEFAULT_BASE_URL

    def _resolve_key(self) -> str:
        # Mirrors google.genai._api_client.get_env_api_key: GOOGLE_API_KEY wins over
        # GEMINI_API_KEY (the SDK logs a warning when both are set); empty means unset.
        key = (self._api_key or config.gemini_api_key() or "").strip()
        if not key:
            raise ConfigError(
                "No Gemini API key: set GOOGLE_API_KEY (or GEMINI_API_KEY), or pass api_key=. "
                "Get one at https://aistudio.google.com/apikey."
            )
        return key

    @property
    def client(self) -> genai.Client:
        """The SDK client, created on first use (raises ConfigError when no key is set)."""
        if self._client is None:
            key = self._resolve_key()
            retry = types.HttpRetryOptions(
                attempts=self.retry_attempts,
                initial_delay=self.retry_initial_delay,
                max_delay=self.retry_max_delay,
                exp_base=2,
                # The SDK's default jitter is a flat 1 s; scale it with the configured delay.
                jitter=min(1.0, self.retry_initial_delay),
                http_status_codes=list(RETRY_STATUS_CODES),
            )
            http_options = types.HttpOptions(
                base_url=self._base_url,  # None: the SDK reads GOOGLE_GEMINI_BASE_URL itself
                api_version=self.api_version,
                timeout=int(self.http_timeout_s * 1000),
                retry_options=retry,
            )
            # vertexai=False: this planner speaks the Gemini Developer API with an API key,
            # whatever GOOGLE_GENAI_USE_VERTEXAI says.
            self._client = genai.Client(vertexai=False, api_key=key, http_options=http_options)
            self._resolved_key = key
            logger.debug(
                "Gemini client ready: base_url=%s api_version=%s model=%s",
                self.base_url,
                self.api_version,
                self.model,
            )
        return self._client

    def _redact(self, text: str) -> str:
        for secret in (self._resolved_key, self._api_key):
            if secret:
                text = text.replace(secret, "***")
        return text

    # ------------------------------------------------------------------ requests

    def generate(
        self,
        contents: list[types.Content],
        config: types.GenerateContentConfig | None = None,
    ) -> types.GenerateContentResponse:
        """One ``generateContent`` call (with the SDK's retries); errors mapped to ours."""
        client = self.client
        try:
            return client.models.generate_content(
                model=self.model, contents=contents, config=config or self.config
            )
        except genai_errors.APIError as exc:
            message = self._redact(str(exc.message or exc.details or "").replace("\n", " "))
            if exc.code == 404:
                message += self._not_found_hint()
            logger.debug("Gemini API error %s %s: %s", exc.code, exc.status, message)
            raise ApiError(int(exc.code), exc.status, message) from None
        except _NETWORK_ERRORS as exc:
            detail = self._redact(f"{type(exc).__name__}: {exc}".replace("\n", " "))
            logger.debug("Gemini API unreachable at %s: %s", self.base_url, detail)
            raise PlannerError(
                f"Cannot reach the Gemini API at {self.base_url} ({detail}); check the network "
                f"or the base URL (GOOGLE_GEMINI_BASE_URL)."
            ) from None
        except ValueError as exc:  # a body that is not JSON (a proxy's error page, say)
            detail = self._redact(f"{type(exc).__name__}: {exc}".replace("\n", " "))
            logger.debug("Gemini API at %s answered non-JSON: %s", self.base_url, detail)
            raise PlannerError(
                f"The Gemini API at {self.base_url} answered something that is not JSON "
                f"({detail}); is GOOGLE_GEMINI_BASE_URL pointing at the API?"
            ) from None

    def _not_found_hint(self) -> str:
        """What to do about a 404: another API version, or the model id."""
        if self.api_version != DEFAULT_API_VERSION:
            return (
                f" (requests go to API version {self.api_version}, which may not serve this "
                f"model or the Computer Use tool: use {DEFAULT_API_VERSION}, the default, with "
                f"--api-version {DEFAULT_API_VERSION}, api_version= or "
                f"{config.API_VERSION_VARIABLE})"
            )
        return f" (API version {self.api_version}; check the model id {self.model!r})"

    def propose(
        self,
        history: Sequence[HistoryRecord],
        load_png: LoadPng,
        keep_screenshots: int | None = None,
    ) -> Proposal:
        """Ask the model for its next calls, given vnc-use's history records.

        Screenshots go inline in the last ``keep_screenshots`` turns that carry one (default:
        the planner's ``keep_screenshots``). An answer whose ``stop`` is ``"error"`` (a
        ``MALFORMED_FUNCTION_CALL``, no candidates without a block reason, ``MAX_TOKENS`` or
        any other unexpected finish without calls) is asked again with the same history (as
        Google's reference agent does for malformed calls), at most ``max_malformed_retries``
        times; after that a :class:`PlannerError` is raised. A refusal (``stop == "blocked"``)
        is returned at once: asking again would not change it.
        """
        keep = self.keep_screenshots if keep_screenshots is None else keep_screenshots
        contents = request.to_contents(history, load_png, keep)
        sent = request.request_json(self.model, contents, self.config)
        for attempt in range(self.max_malformed_retries + 1):
            proposal = self.parse_response(self.generate(contents), sent)
            if proposal.stop != "error":
                return proposal
            logger.info(
                "Model answered %s without calls (attempt %d of %d); asking again.",
                proposal.reason,
                attempt + 1,
                self.max_malformed_retries + 1,
            )
        tries = self.max_malformed_retries + 1
        raise PlannerError(
            f"the model answered {proposal.reason or 'without a finish reason'} "
            f"{tries} time{'' if tries == 1 else 's'} in a row without calls "
            f"({proposal.stop_message}); giving up on this step"
        )

    # ------------------------------------------------------------------ responses

    def parse_response(
        self,
        response: types.GenerateContentResponse,
        request_json: dict[str, Any] | None = None,
    ) -> Proposal:
        """Turn a raw response into a :class:`Proposal` (never raises on odd shapes).

        ``reason`` is Gemini's finish reason (e.g. ``"STOP"``, ``"SAFETY"``);
        ``"NO_CANDIDATES"`` when the answer had no candidate (``"PROMPT_BLOCKED:<reason>"``
        when the prompt was blocked); ``None`` when the candidate did not say. ``stop_message``
        says in one line why a turn without calls did not finish normally. ``turn`` is the
        candidate's content, kept whole: it carries ``thought_signature`` bytes that newer
        models require back.
        """
        sent = request_json or {}
        response_json = response.model_dump(mode="json", exclude_none=True)
        usage = _usage(response)
        candidates = response.candidates or []
        if not candidates:
            reason = "NO_CANDIDATES"
            feedback = response.prompt_feedback
            if feedback is not None and feedback.block_reason is not None:
                reason = PROMPT_BLOCKED + _enum_str(feedback.block_reason)
            stop = _stop_for([], reason)
            return Proposal(
                [], "", stop, reason, usage, None, sent, response_json, "", _why(stop, reason)
            )
        candidate = candidates[0]
        finish = _enum_str(candidate.finish_reason) if candidate.finish_reason else None
        content = candidate.content
        parts = (content.parts if content else None) or []
        calls = self.extract_function_calls(response)
        stop = _stop_for(calls, finish)
        return Proposal(
            calls=calls,
            text=" ".join(p.text for p in parts if p.text and not p.thought),
            stop=stop,
            reason=finish,
            usage=usage,
            turn=request.turn_record(content) if content is not None and parts else None,
            request_json=sent,
            response_json=response_json,
            thoughts=" ".join(p.text for p in parts if p.text and p.thought),
            stop_message=_why(stop, finish),
        )

    def extract_function_calls(self, response: types.GenerateContentResponse) -> list[ProposedCall]:
        """All function calls of the first candidate, in order, as neutral records.

        ``args`` are the raw 0-999 grid arguments with ``safety_decision`` removed (a copy; the
        response is not modified); the decision becomes the call's ``safety`` mark.
        """
        candidates = response.candidates or []
        if not candidates or candidates[0].content is None:
            return []
        calls: list[ProposedCall] = []
        for part in candidates[0].content.parts or []:
            fc = part.function_call
            if fc is None:
                continue
            args, decision = split_safety_decision(fc.args)
            intent = args.get("intent")
            explanation = (decision or {}).get("explanation")
            calls.append(
                {
                    "id": fc.id,
                    "name": fc.name or "",
                    "args": args,
                    "safety": safety_mark(decision),
                    "safety_explanation": str(explanation) if explanation else None,
                    "intent": intent if isinstance(intent, str) else None,
                }
            )
        return calls

    # ------------------------------------------------------------------ validation

    def validate(self, name: str, args: Mapping[str, Any]) -> ValidatedAction | ActionError:
        """Check a call against this model's action table and the excluded actions."""
        return self.action_table.validate(name, args, excluded=self.excluded_actions)

    # ------------------------------------------------------------------ custom functions

    def check_ready(self) -> None:
        """Raise :class:`~vnc_use.errors.ConfigError` when no API key is set."""
        _ = self.client

    def run_settings(self) -> dict[str, Any]:
        """The model, everything that shapes the tools it is sent, and the API version the
        requests go to (kept in run.json; approve/deny/resume rebuild the planner from it)."""
        return {
            "model": self.model,
            "provider": "gemini",
            "model_family": self.family.name,
            "environment": self.environment,
            "excluded_actions": self.excluded_actions,
            "keep_browser_actions": self.keep_browser_actions,
            "api_version": self.api_version,
        }

    def is_custom(self, name: str) -> bool:
        """True when ``name`` is one of this planner's custom functions."""
        return name in self.custom_functions

    def run_custom_function(self, call: Mapping[str, Any]) -> dict[str, Any]:
        """Run a custom function for ``call``; its dict (or ``{"error"}``) is the response."""
        cf = self.custom_functions[call["name"]]
        try:
            result = cf.fn(**call.get("args", {}))
        except Exception as exc:  # the model gets the error and may try again
            logger.warning("Custom function %s failed: %s", cf.name, exc)
            result = {"error": f"{type(exc).__name__}: {exc}"}
        return dict(result)


def safety_mark(decision: Mapping[str, Any] | None) -> SafetyMark:
    """The neutral mark of a Gemini ``safety_decision``: a benign decision (or none) runs,
    ``require_confirmation`` asks a person, anything else (``blocked``, a value we do not know,
    a decision without a value) is ``blocked`` (fail-safe: never run, never asked)."""
    if not decision:
        return "none"
    value = str(decision.get("decision", "")).strip().lower()
    if value in BENIGN_DECISIONS:
        return "none"
    if value == CONFIRM_DECISION:
        return "needs_confirmation"
    return "blocked"


def _stop_for(calls: Sequence[ProposedCall], reason: str | None) -> StopReason:
    """Why the turn ended, from its calls and Gemini's finish reason."""
    if calls:
        return "calls"
    if reason == FINISHED:
        return "finished"
    if reason is not None and (reason in BLOCKED_FINISH or reason.startswith(PROMPT_BLOCKED)):
        return "blocked"
    return "error"


def _why(stop: StopReason, reason: str | None) -> str | None:
    """One line for people on a turn without calls that did not finish normally."""
    if stop == "blocked" and reason is not None and reason.startswith(PROMPT_BLOCKED):
        return f"the API blocked the request: {reason.removeprefix(PROMPT_BLOCKED)}"
    if stop == "blocked":
        return f"the API blocked the model's answer: {reason}"
    if stop != "error":
        return None
    if reason == "NO_CANDIDATES":
        return "the API answered with no candidates"
    if reason == "MAX_TOKENS":
        return "the answer was cut short (MAX_TOKENS)"
    if reason is None:
        return "the answer gave no finish reason"
    return f"the answer ended with {reason}"


def _enum_str(value: Any) -> str:
    return str(getattr(value, "value", value))


def _usage(response: types.GenerateContentResponse) -> dict[str, int] | None:
    meta = response.usage_metadata
    if meta is None:
        return None
    dumped = meta.model_dump(exclude_none=True)
    return {k: v for k, v in dumped.items() if isinstance(v, int) and not isinstance(v, bool)}
