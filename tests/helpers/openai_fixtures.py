"""Fixtures for the OpenAI-compatible stand-in (imported by conftest)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vnc_use.testing.openai_standin import (
    Violation,
    add_violation_listener,
    remove_violation_listener,
)

__all__ = ["openai_refusals_fail_the_test"]


@pytest.fixture(autouse=True)
def openai_refusals_fail_the_test(request: pytest.FixtureRequest) -> Iterator[list[Violation]]:
    """Fail any test in which an OpenAI stand-in refused a request.

    Every rule of the stand-in is one a strict server enforces (images outside user messages,
    unanswered tool calls, undecodable images, too many images, an unknown model, ...): the
    agent must never send such a request, so a refusal is a bug even when the test's own
    assertions pass. Tests that send bad bodies on purpose carry
    ``@pytest.mark.standin_refusals``.
    """
    seen: list[Violation] = []
    add_violation_listener(seen.append)
    try:
        yield seen
    finally:
        remove_violation_listener(seen.append)
    if seen and request.node.get_closest_marker("standin_refusals") is None:
        lines = "\n".join(f"  request {v.request_index} [{v.rule}]: {v.message}" for v in seen)
        pytest.fail(f"the OpenAI stand-in refused requests a strict server would refuse:\n{lines}")
