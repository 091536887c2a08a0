"""Dialect ``qwen3-vl``: Qwen3-VL's ``computer_use`` function, coordinates relative 0-1000.

The computer-use cookbook declares a 1000x1000 screen whatever the image size (the mobile one
999x999: at most 0.1 % apart), so a coordinate ``v`` is the grid value ``round(v)`` (1000
becomes 999); the screenshot is sent as it is.
"""

from __future__ import annotations

from typing import Any

from vnc_use.providers.openai_compat.dialects import computer_use
from vnc_use.providers.openai_compat.dialects.base import AssistantMessage, Frame, Parsed
from vnc_use.providers.openai_compat.resize import PixelLimits

__all__ = ["DECLARED_SIZE", "Qwen3VL"]

DECLARED_SIZE = 1000
"""The screen size the model is told (``The screen's resolution is 1000x1000``)."""


class Qwen3VL:
    """Qwen3-VL (``<tool_call>`` text, relative coordinates)."""

    name = "qwen3-vl"
    resize: PixelLimits | None = None
    """The screenshot goes as it is (relative coordinates do not depend on its size)."""

    def system_prompt(self, image_size: tuple[int, int] | None) -> str:
        """The cookbook's tools block, declaring a 1000x1000 screen."""
        return computer_use.system_prompt(DECLARED_SIZE, DECLARED_SIZE)

    def task_text(self, task: str) -> str:
        """The task as it is."""
        return task

    def tools(self) -> list[dict[str, Any]] | None:
        """No ``tools`` parameter: the function is declared in the system text."""
        return None

    def frame(self, image_size: tuple[int, int] | None, pointer: tuple[int, int] | None) -> Frame:
        """A fixed 1000x1000 frame."""
        return Frame(DECLARED_SIZE, DECLARED_SIZE, pointer)

    def parse(self, message: AssistantMessage, frame: Frame) -> Parsed:
        """See :func:`~.computer_use.parse`."""
        return computer_use.parse(message, frame)
