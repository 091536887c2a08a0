"""What the takeover tests (CLI, fleet, console) share: six click targets on the probe's
canvas and what the Gemini stand-in's requests say about the run so far."""

from __future__ import annotations

from typing import Any

from vnc_use.testing.gemini_checks import normalize_contents

from desktop_fixtures import Probe

__all__ = ["clicked", "six_targets", "user_texts"]


def six_targets(probe: Probe) -> list[tuple[int, int]]:
    """Six points on the plain canvas, in a row below the middle."""
    w, h = probe.size
    return [(w * (i + 2) // 10, h * 3 // 4) for i in range(6)]


def clicked(body: Any) -> int:
    """How many of the model's clicks ran (function responses without an error: a call the
    takeover kept from running is answered with one)."""
    return sum(
        1
        for content in normalize_contents(body)
        for part in content["parts"]
        if "functionResponse" in part and "error" not in part["functionResponse"]["response"]
    )


def user_texts(body: Any) -> str:
    """The text of every user turn of a request."""
    return " ".join(
        str(part.get("text", ""))
        for content in normalize_contents(body)
        if content["role"] == "user"
        for part in content["parts"]
    )
