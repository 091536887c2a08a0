"""Each provider's stand-in, scripted to click one point and finish, and the environment that
configures that provider and nothing else (used by ``test_matrix.py``).

:class:`ProviderCase` starts its vendor's stand-in (the real SDK talks to it), answers every
conversation the same way — first the click at the point :data:`TARGET` of the screen
(3/4 across, half-way down: the probe's plain canvas), then, once a result of it came back, a
final answer — and knows which model options that provider takes, how they are spelled on
the command line, and where each one shows in the requests the stand-in recorded.

A conversation whose task says ``HOLD`` waits before its final answer until :meth:`release`
(so that a test can SIGKILL the CLI mid-run).
"""

from __future__ import annotations

import base64
import io
import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from vnc_use.testing.anthropic_standin import Action, AnthropicStandIn
from vnc_use.testing.anthropic_standin import Reply as AnthropicReply
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn
from vnc_use.testing.gemini_standin import Reply as GeminiReply
from vnc_use.testing.openai_responses_standin import OpenAIResponsesStandIn, Turn
from vnc_use.testing.openai_standin import OpenAIStandIn, ToolCall
from vnc_use.testing.openai_standin import Reply as CompatReply

__all__ = [
    "HOLD",
    "PROVIDERS",
    "TARGET",
    "ProviderCase",
    "images_in",
    "provider_env",
    "start_cases",
]

TARGET = (0.75, 0.5)
"""Where every script clicks, as fractions of the screen (the probe's canvas point)."""
HOLD = "HOLD"
"""A task holding this word waits before its final answer until released."""
FINAL = "Clicked the canvas."

PROVIDER_VARIABLES = (
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_GENAI_API_VERSION",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_USE_ENTERPRISE",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
)
"""Every variable that configures a provider: cleared before one provider's own are set."""

PROVIDERS = ("gemini", "anthropic", "openai", "openai-compatible")


def _b64(text: str) -> bytes:
    """Base64 in either alphabet (SDKs send bytes URL-safe), padding or not."""
    text += "=" * (-len(text) % 4)
    return base64.b64decode(text, altchars=b"-_" if ("-" in text or "_" in text) else None)


def images_in(body: Any) -> list[bytes]:
    """Every inline image of a request body, in order, whatever the vendor's shape (a
    ``data``/``mime_type`` blob, a ``base64`` source, a ``data:image/...`` URL)."""
    found: list[bytes] = []

    def walk(node: Any) -> None:
        if isinstance(node, str):
            if node.startswith("data:image/") and ";base64," in node:
                found.append(_b64(node.split(",", 1)[1]))
        elif isinstance(node, dict):
            mime = node.get("mime_type") or node.get("mimeType") or node.get("media_type")
            if isinstance(node.get("data"), str) and isinstance(mime, str) and "image" in mime:
                found.append(_b64(node["data"]))
                return
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(body)
    return found


def _target_in_image(body: Any) -> list[int]:
    """:data:`TARGET` in pixels of the latest image the request carries."""
    with Image.open(io.BytesIO(images_in(body)[-1])) as image:
        width, height = image.size
    return [round(width * TARGET[0]), round(height * TARGET[1])]


GRID = [round(TARGET[0] * 1000), round(TARGET[1] * 1000)]


@dataclass
class ProviderCase:
    """One provider: its stand-in, its environment and its model options."""

    name: str
    standin: Any
    env: dict[str, str]
    args: list[str]
    """``--provider NAME --model ID`` (and ``--base-url`` where the provider needs it)."""
    options: dict[str, list[str]]
    """Each model option this provider takes -> its command-line words in the matrix."""
    model: str
    answered: Callable[[Any], bool] = field(repr=False)
    """True for a request that carries the result of the click (time to finish)."""
    click: Callable[[Any], Any] = field(repr=False)
    done: Any = field(repr=False)
    holding: threading.Event = field(default_factory=threading.Event)
    """Set once a held conversation waits for its final answer (its click is done)."""
    released: threading.Event = field(default_factory=threading.Event)

    def reply(self, body: Any, index: int) -> Any:
        """The script: the click, then (after its result) the final answer."""
        if not self.answered(body):
            return self.click(body)
        if HOLD in json.dumps(body):
            self.holding.set()
            self.released.wait(60)
        return self.done

    def release(self) -> None:
        """Let every held conversation finish."""
        self.released.set()

    def bodies(self, since: int = 0) -> list[Any]:
        """The bodies of the requests recorded from number ``since`` on."""
        return [r.body for r in self.standin.requests[since:]]

    def option_words(self, names: Any = None) -> list[str]:
        """The command-line words of the named options (default: all of them)."""
        chosen = self.options if names is None else {n: self.options[n] for n in names}
        return [word for words in chosen.values() for word in words]


def _contains(key: str) -> Callable[[Any], bool]:
    return lambda body: key in json.dumps(body)


def _gemini() -> ProviderCase:
    standin = GeminiStandIn(api_versions=("v1beta", "v1alpha"))
    key = "AIzaMatrixStandInKey-0123456789abcdef"
    model = "gemini-3.5-flash"
    return ProviderCase(
        name="gemini",
        standin=standin,
        env={"GOOGLE_API_KEY": key, "GOOGLE_GEMINI_BASE_URL": ""},
        args=["--provider", "gemini", "--model", model],
        options={
            "--api-version": ["--api-version", "v1alpha"],
            "--environment": ["--environment", "desktop"],
            "--exclude": ["--exclude", "drag_and_drop"],
            "--keep-screenshots": ["--keep-screenshots", "1"],
            "--confirm": ["--confirm", "drag_and_drop"],
        },
        model=model,
        answered=lambda body: (
            "functionResponse" in json.dumps(body) or "function_response" in json.dumps(body)
        ),
        click=lambda body: GeminiReply.calls(
            FunctionCallSpec("click", x=GRID[0], y=GRID[1], intent="click the canvas")
        ),
        done=GeminiReply.text(FINAL),
    )


def _anthropic() -> ProviderCase:
    standin = AnthropicStandIn()
    model = "claude-opus-4-7"  # its own tool is computer_20251124: --tool-version must reach
    return ProviderCase(
        name="anthropic",
        standin=standin,
        env={"ANTHROPIC_API_KEY": "sk-ant-api03-matrix-0123456789", "ANTHROPIC_BASE_URL": ""},
        args=["--provider", "anthropic", "--model", model],
        options={
            "--tool-version": ["--tool-version", "computer_20250124"],
            "--keep-screenshots": ["--keep-screenshots", "1"],
            "--confirm": ["--confirm", "drag_and_drop"],
        },
        model=model,
        answered=_contains('"tool_result"'),
        click=lambda body: AnthropicReply.act(
            Action("left_click", {"coordinate": _target_in_image(body)})
        ),
        done=AnthropicReply.done(FINAL),
    )


def _openai() -> ProviderCase:
    standin = OpenAIResponsesStandIn()
    model = "gpt-5.5"
    return ProviderCase(
        name="openai",
        standin=standin,
        env={"OPENAI_API_KEY": "sk-matrix-openai-0123456789", "OPENAI_BASE_URL": ""},
        args=["--provider", "openai", "--model", model],
        options={
            "--tool-version": ["--tool-version", "computer"],
            "--keep-screenshots": ["--keep-screenshots", "1"],
            "--confirm": ["--confirm", "drag_and_drop"],
        },
        model=model,
        answered=_contains('"computer_call_output"'),
        click=lambda body: Turn.call(
            {
                "type": "click",
                "button": "left",
                "x": _target_in_image(body)[0],
                "y": _target_in_image(body)[1],
            }
        ),
        done=Turn.message(FINAL),
    )


def _openai_compatible() -> ProviderCase:
    model = "qwen3-vl-8b"  # its own dialect would be qwen3-vl: --dialect tools must reach
    standin = OpenAIStandIn(models=model)
    return ProviderCase(
        name="openai-compatible",
        standin=standin,
        env={"OPENAI_API_KEY": "sk-matrix-compat-0123456789"},
        args=["--provider", "openai-compatible", "--model", model, "--base-url", ""],
        options={
            "--dialect": ["--dialect", "tools"],
            "--keep-screenshots": ["--keep-screenshots", "1"],
            "--confirm": ["--confirm", "drag_and_drop"],
        },
        model=model,
        answered=lambda body: any(
            isinstance(m, dict) and m.get("role") == "tool" for m in body.get("messages", [])
        ),
        click=lambda body: CompatReply.tool_calls(
            ToolCall("click", {"x": GRID[0], "y": GRID[1], "intent": "click the canvas"})
        ),
        done=CompatReply.text(FINAL),
    )


_MAKERS = {
    "gemini": _gemini,
    "anthropic": _anthropic,
    "openai": _openai,
    "openai-compatible": _openai_compatible,
}


def _started(case: ProviderCase) -> ProviderCase:
    """Fill in the addresses the started stand-in listens on."""
    url = case.standin.base_url
    for name in ("GOOGLE_GEMINI_BASE_URL", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        if name in case.env:
            case.env[name] = url
    if "--base-url" in case.args:
        case.args[case.args.index("--base-url") + 1] = url
    return case


def start_cases(stack: ExitStack) -> Iterator[ProviderCase]:
    """Every provider's case, its stand-in started (stopped when ``stack`` closes)."""
    for name in PROVIDERS:
        case = _MAKERS[name]()
        case.standin.script(case.reply)
        stack.enter_context(case.standin)
        stack.callback(case.release)
        yield _started(case)


def provider_env(case: ProviderCase | None, **extra: str) -> dict[str, str]:
    """This process's environment with every provider variable removed, then ``case``'s own
    (its key and the address of its stand-in) and ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARIABLES}
    if case is not None:
        env.update(case.env)
    env.update(extra)
    return env
