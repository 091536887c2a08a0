"""Times read the same in the CLI, the progress lines and the report."""

from __future__ import annotations

import time

import pytest

from vnc_use.record import timefmt


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0.04, "0.0 s"), (59.94, "59.9 s"), (65, "1 min 05 s"), (3725, "1 h 02 min")],
)
def test_duration(seconds: float | None, text: str) -> None:
    assert timefmt.duration(seconds) == text


@pytest.mark.parametrize(
    ("value", "kwargs", "text"),
    [
        (840, {}, "840 ms"),
        (1250, {}, "1.25 s"),
        (1250, {"decimals": 1}, "1.2 s"),
        (None, {}, "-"),
        ("soon", {"missing": "?"}, "?"),
        (True, {"missing": "?"}, "?"),
    ],
)
def test_milliseconds(value: object, kwargs: dict[str, object], text: str) -> None:
    assert timefmt.milliseconds(value, **kwargs) == text  # type: ignore[arg-type]


def test_when_is_local_time_and_dash_when_unknown() -> None:
    ts = time.mktime((2026, 11, 25, 23, 41, 7, 0, 0, -1))
    assert timefmt.when(ts) == "2026-11-25 23:41:07"
    assert timefmt.when(ts, zone=True).startswith("2026-11-25 23:41:07 ")
    assert timefmt.when(None) == "-"
