"""Which computer tool each Claude model takes, and the image limits it reads screenshots at.

The one table of model -> tool version. Source: Anthropic's "Computer use tool" page
(https://platform.claude.com/docs/en/agents-and-tools/tool-use/computer-use-tool, copy
fetched 2026-09-26: "Compatibility" and "Earlier tool versions"), the Sonnet 5.5 migration guide
(https://platform.claude.com/docs/en/models/sonnet-5-5/migration-guide) and the Opus 5.5 notes
("computer_20251124 ... not supported on the Claude API"), as collected in
``shared/reference/anthropic-openai-computer-use.md`` section 2.1. Image limits: the same page,
"Coordinates and image sizing" (section 2.6 there).

- ``computer_toolset_20260801`` (GA, no beta header): every Claude 5.x model and Opus 4.8;
- ``computer_20251124`` (beta ``computer-use-2025-11-24``): models that accept only it (Opus
  4.7, 4.6, 4.5, Sonnet 4.6);
- ``computer_20250124`` (beta ``computer-use-2025-01-24``): Sonnet 4.5, Haiku 4.5, Opus 4.1,
  Sonnet 4, Opus 4, Sonnet 3.7.

An unknown ``claude-*`` id gets the toolset (with a warning naming the assumption); the user's
``--tool-version`` wins over the table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "BETA_HEADERS",
    "EARLIER_LIMITS",
    "HIGH_LIMITS",
    "LEGACY_VERSIONS",
    "MODEL_TABLE",
    "TOOLSET",
    "TOOL_VERSIONS",
    "ImageLimits",
    "ToolChoice",
    "choose",
    "fit",
]

TOOLSET = "computer_toolset_20260801"
COMPUTER_20251124 = "computer_20251124"
COMPUTER_20250124 = "computer_20250124"
LEGACY_VERSIONS = (COMPUTER_20251124, COMPUTER_20250124)
TOOL_VERSIONS = (TOOLSET, *LEGACY_VERSIONS)
"""The names ``--tool-version`` accepts."""

BETA_HEADERS = {
    COMPUTER_20251124: "computer-use-2025-11-24",
    COMPUTER_20250124: "computer-use-2025-01-24",
}
"""The ``anthropic-beta`` flag each legacy tool needs (the toolset needs none)."""


@dataclass(frozen=True)
class ImageLimits:
    """How large a screenshot the model reads unscaled: the long edge, and either a budget of
    28x28 visual tokens or of pixels."""

    name: str
    long_edge: int
    max_tokens: int | None = None
    max_pixels: int | None = None

    def fits(self, width: int, height: int) -> bool:
        """True when a ``width`` x ``height`` image is within the limits."""
        if max(width, height) > self.long_edge:
            return False
        if self.max_tokens is not None and tokens(width, height) > self.max_tokens:
            return False
        return self.max_pixels is None or width * height <= self.max_pixels


HIGH_LIMITS = ImageLimits("opus-4.7+", long_edge=2576, max_tokens=4784)
"""Opus 4.7 and later, every toolset model: long edge <= 2576 px, <= 4784 visual tokens."""
EARLIER_LIMITS = ImageLimits("earlier", long_edge=1568, max_pixels=1_150_000)
"""Earlier models: long edge <= 1568 px and about 1.15 megapixels."""


def tokens(width: int, height: int) -> int:
    """Visual tokens of an image: ``ceil(w/28) * ceil(h/28)``."""
    return math.ceil(width / 28) * math.ceil(height / 28)


def fit(width: int, height: int, limits: ImageLimits) -> tuple[int, int]:
    """The largest size of the screen's aspect that the model reads unscaled (the screen's own
    size when it fits): the size each screenshot is resized to and coordinates come back in."""
    if limits.fits(width, height):
        return width, height
    scale = min(1.0, limits.long_edge / max(width, height))
    if limits.max_pixels is not None:
        scale = min(scale, math.sqrt(limits.max_pixels / (width * height)))
    w, h = max(1, int(width * scale)), max(1, int(height * scale))
    while not limits.fits(w, h) and w > 1 and h > 1:  # the token budget: shrink a pixel at a time
        w -= 1
        h = max(1, int(w * height / width))
    return w, h


MODEL_TABLE: tuple[tuple[str, str, ImageLimits], ...] = (
    # the toolset (GA)
    ("claude-fable-5", TOOLSET, HIGH_LIMITS),
    ("claude-mythos-5", TOOLSET, HIGH_LIMITS),
    ("claude-opus-5", TOOLSET, HIGH_LIMITS),
    ("claude-sonnet-5", TOOLSET, HIGH_LIMITS),
    ("claude-haiku-5", TOOLSET, HIGH_LIMITS),
    ("claude-opus-4-8", TOOLSET, HIGH_LIMITS),
    # computer_20251124 only
    ("claude-opus-4-7", COMPUTER_20251124, HIGH_LIMITS),
    ("claude-opus-4-6", COMPUTER_20251124, EARLIER_LIMITS),
    ("claude-sonnet-4-6", COMPUTER_20251124, EARLIER_LIMITS),
    ("claude-opus-4-5", COMPUTER_20251124, EARLIER_LIMITS),
    # computer_20250124
    ("claude-sonnet-4-5", COMPUTER_20250124, EARLIER_LIMITS),
    ("claude-haiku-4-5", COMPUTER_20250124, EARLIER_LIMITS),
    ("claude-opus-4-1", COMPUTER_20250124, EARLIER_LIMITS),
    ("claude-sonnet-4", COMPUTER_20250124, EARLIER_LIMITS),
    ("claude-opus-4", COMPUTER_20250124, EARLIER_LIMITS),
    ("claude-3-7-sonnet", COMPUTER_20250124, EARLIER_LIMITS),
)
"""Model id prefix -> (tool version, image limits); the longest matching prefix wins (so
``claude-opus-4-5-20251101`` is Opus 4.5 and ``claude-sonnet-5-5`` a Sonnet 5)."""


@dataclass(frozen=True)
class ToolChoice:
    """The tool a model is sent, its image limits, and a warning when it was assumed."""

    version: str
    limits: ImageLimits
    warning: str | None = None

    @property
    def beta(self) -> str | None:
        """The ``anthropic-beta`` flag the version needs, if any."""
        return BETA_HEADERS.get(self.version)


def choose(model: str, override: str | None = None) -> ToolChoice:
    """The tool version and image limits for ``model`` (``override``: ``--tool-version``).

    Raises ``ValueError`` for an override that is not a known version.
    """
    if override is not None and override not in TOOL_VERSIONS:
        raise ValueError(
            f"unknown tool version {override!r}; use one of: {', '.join(TOOL_VERSIONS)}"
        )
    matches = [row for row in MODEL_TABLE if model == row[0] or model.startswith(row[0] + "-")]
    if matches:
        _, version, limits = max(matches, key=lambda row: len(row[0]))
        return ToolChoice(override or version, limits)
    if override:
        return ToolChoice(override, HIGH_LIMITS)
    return ToolChoice(
        TOOLSET,
        HIGH_LIMITS,
        f"vnc-use does not know the model {model!r}; assuming it takes {TOOLSET} with the "
        f"Opus 4.7+ image limits (pass --tool-version to choose another tool)",
    )
