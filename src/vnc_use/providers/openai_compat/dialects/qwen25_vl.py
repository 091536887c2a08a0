"""Dialect ``qwen2.5-vl``: Qwen2.5-VL's ``computer_use`` function, pixels of the image sent.

Qwen2.5-VL answers in absolute pixels of the image as its processor resized it. The client
resizes the screenshot itself with the processor's rule (:mod:`..resize`), declares that size
in the tool description (``The screen's resolution is WxH``, as the cookbook does) and maps
the model's pixels back through it.
"""

from __future__ import annotations

from typing import Any

from vnc_use.providers.openai_compat import resize
from vnc_use.providers.openai_compat.dialects import computer_use
from vnc_use.providers.openai_compat.dialects.base import AssistantMessage, Frame, Parsed

__all__ = ["Qwen25VL", "pixel_frame"]


def pixel_frame(image_size: tuple[int, int] | None, pointer: tuple[int, int] | None) -> Frame:
    """The frame of a pixel dialect: the size of the image sent (no image yet: an empty
    frame, on which every point is an error)."""
    if image_size is None:
        return Frame(0, 0, pointer)
    return Frame(image_size[0], image_size[1], pointer)


class Qwen25VL:
    """Qwen2.5-VL (``<tool_call>`` text, pixels of the smart-resized image)."""

    name = "qwen2.5-vl"

    def __init__(self, limits: resize.PixelLimits = resize.QWEN25_VL) -> None:
        self.resize: resize.PixelLimits | None = limits
        """The resize rule applied to every screenshot before it is sent."""

    def system_prompt(self, image_size: tuple[int, int] | None) -> str:
        """The cookbook's tools block, declaring the size of the image sent."""
        width, height = image_size or (1000, 1000)
        return computer_use.system_prompt(width, height)

    def task_text(self, task: str) -> str:
        """The task as it is."""
        return task

    def tools(self) -> list[dict[str, Any]] | None:
        """No ``tools`` parameter: the function is declared in the system text."""
        return None

    def frame(self, image_size: tuple[int, int] | None, pointer: tuple[int, int] | None) -> Frame:
        """The size of the image sent."""
        return pixel_frame(image_size, pointer)

    def parse(self, message: AssistantMessage, frame: Frame) -> Parsed:
        """See :func:`~.computer_use.parse`."""
        return computer_use.parse(message, frame)
