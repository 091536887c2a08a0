"""Pytest fixtures for the Gemini API stand-in (star-imported by ``tests/conftest.py``)."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from PIL import Image

from vnc_use.providers import history
from vnc_use.providers.base import Proposal
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.testing.gemini_standin import (
    STRICT_RULES,
    GeminiStandIn,
    Violation,
    add_violation_listener,
    make_png,
    remove_violation_listener,
)

__all__ = [
    "DUMMY_API_KEY",
    "FAST_RETRY",
    "PngStore",
    "ask",
    "gemini",
    "make_jpeg",
    "make_planner",
    "png",
    "refusals_fail_the_test",
]

DUMMY_API_KEY = "AIzaStandInDummyKey-0123456789abcdef"
"""The key the ``gemini`` fixture puts in GOOGLE_API_KEY (never a real one)."""

FAST_RETRY: dict[str, Any] = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05}
"""Planner settings that keep the SDK's retry back-off tiny in tests."""

_ENV_TO_CLEAR = (
    "GEMINI_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_GENAI_API_VERSION",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_USE_ENTERPRISE",
    "GOOGLE_GENAI_HTTP_CLIENT",
)


class PngStore:
    """Screenshots by sha256, as the run folder keeps them (what a planner loads PNGs from)."""

    def __init__(self) -> None:
        self.pngs: dict[str, bytes] = {}

    def put(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        self.pngs[sha] = data
        return sha

    def load(self, sha: str) -> bytes:
        return self.pngs[sha]


def ask(
    planner: GeminiComputerUse, task: str = "x", screenshot: bytes | None = None, keep: int = 3
) -> Proposal:
    """Ask ``planner`` with a history of one task turn (and its screenshot, if given)."""
    store = PngStore()
    sha = store.put(screenshot) if screenshot is not None else None
    return planner.propose([history.task_turn(task, sha)], store.load, keep)


def make_jpeg(width: int = 8, height: int = 8) -> bytes:
    """A small JPEG (for tests that need a non-PNG image)."""
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (200, 50, 50)).save(buf, format="JPEG")
    return buf.getvalue()


@pytest.fixture
def gemini(monkeypatch: pytest.MonkeyPatch) -> Iterator[GeminiStandIn]:
    """A started stand-in with an empty script; GOOGLE_GEMINI_BASE_URL points at it.

    GOOGLE_API_KEY is a dummy key; GEMINI_API_KEY and other SDK switches are cleared.
    Fill the script with ``gemini.script(...)`` or ``gemini.extend(...)``.
    """
    for name in _ENV_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", DUMMY_API_KEY)
    with GeminiStandIn() as standin:
        yield standin


@pytest.fixture
def make_planner(gemini: GeminiStandIn) -> Callable[..., GeminiComputerUse]:
    """Factory for planners aimed at the ``gemini`` stand-in, with fast SDK retries."""

    def factory(**kwargs: Any) -> GeminiComputerUse:
        return GeminiComputerUse(**{**FAST_RETRY, **kwargs})

    return factory


@pytest.fixture
def png() -> bytes:
    """A small valid PNG screenshot."""
    return make_png(16, 10)


@pytest.fixture(autouse=True)
def refusals_fail_the_test(request: pytest.FixtureRequest) -> Iterator[list[Violation]]:
    """Fail any test in which a stand-in refused a request the real API would refuse.

    Every stand-in of the test process reports here (:data:`STRICT_RULES`: unknown fields,
    roles, empty parts, function response shapes and ids, body size). The agent must never
    send such a request, so one is a bug even when the test's own assertions pass. Tests that
    send bad bodies on purpose carry ``@pytest.mark.standin_refusals``.
    """
    seen: list[Violation] = []

    def listener(violation: Violation) -> None:
        if violation.rule in STRICT_RULES:
            seen.append(violation)

    add_violation_listener(listener)
    try:
        yield seen
    finally:
        remove_violation_listener(listener)
    if seen and request.node.get_closest_marker("standin_refusals") is None:
        lines = "\n".join(f"  request {v.request_index} [{v.rule}]: {v.message}" for v in seen)
        pytest.fail(f"the Gemini stand-in refused requests the real API would refuse:\n{lines}")


class NotJsonHandler(BaseHTTPRequestHandler):
    """A server that is not the Gemini API: a proxy's HTML error page, with status 200."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b"<html><body>502 Bad Gateway</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass
