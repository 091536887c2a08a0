"""What every dialect shares: the assistant message as plain data, raw calls found in it,
points mapped onto the 0-999 grid, and the parse result.

A dialect's parser is pure: it reads an :class:`AssistantMessage` (no SDK object) and a
:class:`Frame` (how the model's coordinates relate to the image it saw) and returns a
:class:`Parsed` -- calls on the Gemini 3.5 desktop action set, or a finish -- or raises
:class:`ParseError`, whose message is written for the model (it is sent back to it).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from vnc_use.providers.openai_compat.resize import PixelLimits

__all__ = [
    "AssistantMessage",
    "Dialect",
    "Frame",
    "GridCall",
    "ParseError",
    "Parsed",
    "RawCall",
    "Translator",
    "keys_of",
    "point",
    "raw_calls",
    "strip_tool_call_blocks",
    "text_arg",
    "thought_of",
    "to_grid",
    "typed",
]

GRID = 1000
"""The grid has 1000 steps per side (0-999), like :mod:`vnc_use.actions.pixels`."""


class ParseError(ValueError):
    """The model's answer holds no usable action and no finish; the message tells it why."""


AssistantMessage = Mapping[str, Any]
"""The model's reply as OpenAI's JSON: ``{"role": "assistant", "content": str | None,
"tool_calls": [{"id", "type": "function", "function": {"name", "arguments": JSON str}}]}``."""


@dataclass(frozen=True)
class Frame:
    """How the model's coordinates relate to the screen: a value ``v`` on an axis of extent
    ``E`` is the grid value ``round(v * 1000 / E)``; ``0 <= v <= E`` or it is off the image.

    ``tools`` and ``qwen3-vl`` use a fixed 1000x1000 frame; the pixel dialects use the size of
    the image sent (``image_size``), never the screen's.
    """

    width: float
    height: float
    pointer: tuple[int, int] | None = None
    """The last grid point the pointer was sent to (coordinate-less clicks, Qwen drags)."""


@dataclass(frozen=True)
class RawCall:
    """A call as the model wrote it: a native tool call (``id`` set) or a ``<tool_call>`` block
    in the content (``id`` None)."""

    name: str
    arguments: dict[str, Any]
    id: str | None = None


@dataclass(frozen=True)
class GridCall:
    """A call translated into the Gemini 3.5 desktop action set (grid coordinates)."""

    name: str
    args: dict[str, Any]
    source_id: str | None = None
    """The native tool call it answers, if it came from one."""


@dataclass
class Parsed:
    """A parsed reply: calls to run, a finish (``finished`` True, ``text`` the answer;
    ``failed`` True when the model ended the task saying it failed), or a request for a
    person (``asks`` the model's question: the run waits for one)."""

    calls: list[GridCall] = field(default_factory=list)
    finished: bool = False
    text: str = ""
    thought: str = ""
    asks: str | None = None
    """The model asks for a person (UI-TARS ``call_user``, UI-Venus ``CallUser``): its
    question, or what it was doing when it asked."""
    failed: bool = False


class Dialect(Protocol):
    """One family's conversation: what it is told, and how its answers are read."""

    name: str
    """The dialect's name (``--dialect``)."""

    resize: PixelLimits | None
    """The resize rule for screenshots before sending (pixel dialects), else None."""

    def system_prompt(self, image_size: tuple[int, int] | None) -> str:
        """The system message; ``image_size`` is the size of the image the model is sent."""
        ...

    def task_text(self, task: str) -> str:
        """The first user message's text around the task."""
        ...

    def tools(self) -> list[dict[str, Any]] | None:
        """OpenAI function tools sent with the request (None: no ``tools`` parameter)."""
        ...

    def frame(self, image_size: tuple[int, int] | None, pointer: tuple[int, int] | None) -> Frame:
        """The coordinate frame of an answer to an image of ``image_size`` (sent size)."""
        ...

    def parse(self, message: AssistantMessage, frame: Frame) -> Parsed:
        """The reply as calls or a finish; :class:`ParseError` when it holds neither."""
        ...


_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_OPEN_TAG = re.compile(r"</?tool_call>")


def strip_tool_call_blocks(content: str) -> str:
    """The content without its ``<tool_call>`` blocks (the model's visible reasoning)."""
    return _TOOL_CALL.sub(" ", content).strip()


def _json_object(text: str, where: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"{where} is not valid JSON ({exc}).") from None
    if not isinstance(value, dict):
        raise ParseError(f"{where} must be a JSON object.")
    return value


def _native_calls(message: AssistantMessage) -> list[RawCall]:
    found: list[RawCall] = []
    for entry in message.get("tool_calls") or []:
        if not isinstance(entry, Mapping):
            raise ParseError("A tool call is not an object.")
        function = entry.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ParseError("A tool call has no function name.")
        assert isinstance(function, Mapping)
        raw_args = function.get("arguments") or "{}"
        args = (
            dict(raw_args)
            if isinstance(raw_args, Mapping)
            else _json_object(str(raw_args), f"The arguments of {name}")
        )
        call_id = entry.get("id")
        found.append(RawCall(name, args, str(call_id) if call_id else None))
    return found


def _block_calls(content: str) -> list[RawCall]:
    found: list[RawCall] = []
    for block in _TOOL_CALL.findall(content):
        obj = _json_object(block.strip(), "A <tool_call> block")
        name = obj.get("name")
        args = obj.get("arguments", {})
        if isinstance(args, str):
            args = _json_object(args, "The arguments of a <tool_call> block")
        if not isinstance(name, str) or not name or not isinstance(args, dict):
            raise ParseError('A <tool_call> block needs {"name": ..., "arguments": {...}}.')
        found.append(RawCall(name, args))
    leftover = _TOOL_CALL.sub("", content)
    if _OPEN_TAG.search(leftover):
        raise ParseError("A <tool_call> block is not closed (or not opened).")
    return found


def raw_calls(message: AssistantMessage) -> list[RawCall]:
    """Every call of the reply: native ``tool_calls`` first, then ``<tool_call>`` blocks of the
    content (servers differ in whether they convert). Malformed ones raise ParseError."""
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    return _native_calls(message) + _block_calls(text)


_THOUGHT = re.compile(
    r"(?:Thought|Reflection|Action_Summary)\s*:\s*(.*?)(?=\n\s*Action\s*:|$)", re.S
)


def thought_of(text: str) -> str:
    """The model's reasoning: the ``Thought:`` part if there is one, else the whole text,
    whitespace collapsed."""
    match = _THOUGHT.search(text)
    chosen = match.group(1) if match else text
    return " ".join(chosen.split())


def _number(value: Any) -> float:
    if isinstance(value, bool):
        raise ParseError(f"{value!r} is not a coordinate.")
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise ParseError(f"{value!r} is not a coordinate.") from None
    else:
        raise ParseError(f"{value!r} is not a coordinate.")
    if not math.isfinite(number):
        raise ParseError(f"{value!r} is not a coordinate.")
    return number


def point(value: Any) -> tuple[float, float]:
    """A point as the model gave it: ``[x, y]``, a box ``[x1, y1, x2, y2]`` or
    ``[[x1, y1], [x2, y2]]`` (its centre)."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        items = list(value)
        if len(items) == 2 and all(
            isinstance(i, Sequence) and not isinstance(i, str) and len(i) == 2 for i in items
        ):
            items = [*items[0], *items[1]]
        if len(items) == 2:
            return _number(items[0]), _number(items[1])
        if len(items) == 4:
            x1, y1, x2, y2 = (_number(i) for i in items)
            return (x1 + x2) / 2, (y1 + y2) / 2
    raise ParseError(f"{value!r} is not a point: give [x, y] (or a box [x1, y1, x2, y2]).")


def _axis(value: float, extent: float, axis: str) -> int:
    if extent <= 0:
        raise ParseError("No screenshot has been sent yet: wait for one before pointing.")
    if not 0 <= value <= extent:
        raise ParseError(
            f"{axis}={value:g} is off the image (0 to {extent:g}); give a point on the screenshot."
        )
    return min(GRID - 1, round(value * GRID / extent))


def to_grid(xy: tuple[float, float], frame: Frame) -> tuple[int, int]:
    """The grid point of a model point in ``frame``; ParseError when it is off the image."""
    return _axis(xy[0], frame.width, "x"), _axis(xy[1], frame.height, "y")


class Translator:
    """Turns one reply's calls into grid calls, in order, tracking the pointer.

    ``intent`` is the model's reasoning for the turn (every 3.5 action carries one).
    """

    def __init__(self, frame: Frame, intent: str) -> None:
        self.frame = frame
        self.intent = intent
        self.pointer = frame.pointer
        self.calls: list[GridCall] = []
        self.finish: str | None = None
        self.question: str | None = None
        self.failed = False
        self.source_id: str | None = None
        """The native tool call being translated (its id goes on each grid call)."""

    def at(self, value: Any) -> tuple[int, int]:
        """The grid point of a model point; the pointer moves there."""
        self.pointer = to_grid(point(value), self.frame)
        return self.pointer

    def here(self, what: str) -> tuple[int, int]:
        """The pointer's grid point; ParseError when no point is known yet (never a guess)."""
        if self.pointer is None:
            raise ParseError(f"{what} needs a coordinate: the pointer's place is not known yet.")
        return self.pointer

    def add(self, name: str, **args: Any) -> None:
        """One grid call, with the turn's intent (or the action's name when there is none)."""
        args["intent"] = self.intent or name.replace("_", " ")
        self.calls.append(GridCall(name, args, self.source_id))

    def done(self, text: str, *, failed: bool = False) -> None:
        """A finish action: the run ends with ``text`` (the first finish wins); ``failed``:
        the model's explicit report that the task failed (the run ends ``failed``)."""
        if self.finish is None:
            self.finish = text
            self.failed = failed

    def ask(self, question: str) -> None:
        """The model asks for a person: the run waits for one (the first request wins)."""
        if self.question is None:
            self.question = " ".join(question.split()) or "The model asks for a person's help."

    def result(self, thought: str) -> Parsed:
        """The translated reply: calls if any (a finish or a request for a person next to
        calls is not acted on), else a request for a person, else a finish."""
        if self.calls:
            return Parsed(calls=self.calls, thought=thought)
        if self.question is not None:
            return Parsed(asks=self.question, text=self.question, thought=thought)
        if self.finish is not None:
            text = self.finish or thought
            return Parsed(finished=True, text=text, thought=thought, failed=self.failed)
        raise ParseError("The answer holds no action.")


_FAILURE_WORDS = frozenset({"failure", "fail", "failed"})


def reports_failure(status: Any) -> bool:
    """True for a ``terminate`` status that says the task failed (``"failure"``, the value
    the Qwen and OpenCUA schemas declare, and its near spellings)."""
    return isinstance(status, str) and status.strip().lower() in _FAILURE_WORDS


def keys_of(value: Any) -> list[str]:
    """Key names from a list, or a string split on spaces or ``+`` (``"ctrl c"``)."""
    if isinstance(value, str):
        keys = [k for k in re.split(r"[\s+]+", value.strip()) if k]
    elif isinstance(value, Sequence) and all(isinstance(k, str) for k in value):
        keys = [k.strip() for k in value if k.strip()]
    else:
        keys = []
    if not keys:
        raise ParseError(f"{value!r} names no key.")
    return keys


def text_arg(args: Mapping[str, Any], name: str) -> str:
    """A required string argument."""
    value = args.get(name)
    if not isinstance(value, str):
        raise ParseError(f"{name!r} must be a string.")
    return value


def typed(translator: Translator, text: str) -> None:
    """A ``type``: a trailing newline (real, or backslash-n) means press Enter after typing."""
    press_enter = False
    for ending in ("\\n", "\n"):
        if text.endswith(ending):
            text, press_enter = text[: -len(ending)], True
            break
    translator.add("type", text=text, press_enter=press_enter)
