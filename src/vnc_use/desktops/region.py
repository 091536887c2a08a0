"""The part of a VNC framebuffer that is the screen (``--screen-region WxH+X+Y``).

Some servers export more than the screen the model should see: x11vnc's ``-ncache`` appends
a pixel cache below the screen (a 1280x800 screen becomes a 1280x9600 framebuffer with
``-ncache 10``), and a multi-monitor server exports every monitor side by side. With a
region, :class:`~vnc_use.desktops.vnc.VNCController` presents that rectangle as the screen:
screenshots are cropped to it, its size is the screen size the 0-999 grid maps into, and
pointer positions are offset by its corner, so the executor, the settle/screenshot path and
the report all work in region pixels without knowing about it.

:func:`check_framebuffer` refuses, at connect, a framebuffer that looks like x11vnc's cache
when no region is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vnc_use.errors import ConfigError

__all__ = ["NCACHE_RATIO", "ScreenRegion", "check_framebuffer"]

#: A framebuffer more than this many times as tall as it is wide is refused without a region.
#: x11vnc's ``-ncache N`` exports N+2 screen heights (12x for the default N=10, 4x for N=2;
#: a 16:10 screen then is 7.5x or 2.5x as tall as wide), while a portrait monitor is at most
#: about 1.8x and two stacked 16:9 monitors 1.1x. SSVNC's viewer uses the same bound to
#: detect the cache.
NCACHE_RATIO = 2.0

_REGION_RE = re.compile(r"(\d+)x(\d+)\+(\d+)\+(\d+)")


@dataclass(frozen=True)
class ScreenRegion:
    """A rectangle of the framebuffer: ``width`` x ``height`` pixels at ``(x, y)``."""

    width: int
    height: int
    x: int = 0
    y: int = 0

    @classmethod
    def parse(cls, text: str) -> ScreenRegion:
        """Read ``WxH+X+Y`` (e.g. ``1280x800+0+0``); one-line :class:`ConfigError` otherwise."""
        match = _REGION_RE.fullmatch(text.strip()) if isinstance(text, str) else None
        if match is None:
            raise ConfigError(
                f"bad screen region {text!r}: use WIDTHxHEIGHT+X+Y in framebuffer pixels, "
                "e.g. 1280x800+0+0"
            )
        width, height, x, y = (int(v) for v in match.groups())
        if width < 16 or height < 16:
            raise ConfigError(
                f"screen region {text} is too small: use WIDTHxHEIGHT+X+Y of at least 16x16 pixels"
            )
        return cls(width, height, x, y)

    def __str__(self) -> str:
        return f"{self.width}x{self.height}+{self.x}+{self.y}"

    def check_within(self, server: str, width: int, height: int) -> None:
        """Raise a one-line :class:`ConfigError` unless the region fits a ``width`` x
        ``height`` framebuffer."""
        if self.x + self.width > width or self.y + self.height > height:
            raise ConfigError(
                f"screen region {self} does not fit the {width}x{height} framebuffer of "
                f"{server}; choose one inside it"
            )


def check_framebuffer(server: str, width: int, height: int, region: ScreenRegion | None) -> None:
    """Refuse a framebuffer the model must not see whole (see :data:`NCACHE_RATIO`) unless a
    region says which part is the screen; check that a given region fits."""
    if region is not None:
        region.check_within(server, width, height)
        return
    if height > NCACHE_RATIO * width:
        raise ConfigError(
            f"VNC server {server} serves a {width}x{height} framebuffer, more than twice as "
            "tall as wide: that is x11vnc's -ncache pixel cache below the screen; restart "
            f"x11vnc with -noncache, or pass --screen-region {width}xHEIGHT+0+0 "
            "(your screen's height) to use the screen part only"
        )
