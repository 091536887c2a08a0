"""Shared fixtures: real VNC desktops with the probe app, the Gemini API stand-in and the
OpenAI-compatible stand-in."""

import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings

from desktop_fixtures import *  # noqa: F403
from gemini_fixtures import *  # noqa: F403
from openai_fixtures import *  # noqa: F403

pytest_plugins = ["pytester"]

# Tests check behaviour, never wall-clock time: no per-example deadline (a cold first example
# on a loaded 2-core CI machine must not fail a property test).
# In CI the examples are derived from each test's name (derandomize): a submission is judged
# on the same cases every run; a developer's runs keep exploring new ones.
settings.register_profile(
    "vnc-use",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
    derandomize=bool(os.environ.get("CI")),
)
settings.load_profile("vnc-use")

# A test that reaches the managed local desktop by accident (`vnc-use run` without --vnc) must
# never touch the state of a real user's desktop: point it at a throw-away folder. Set before
# any test runs, so CLI subprocesses inherit it too.
os.environ["VNC_USE_DESKTOP_DIR"] = tempfile.mkdtemp(prefix="vnc-use-test-desktop-")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "standin_refusals: the test sends the Gemini or OpenAI stand-in requests the real "
        "server refuses, on purpose (see refusals_fail_the_test, openai_refusals_fail_the_test)",
    )


def pytest_sessionfinish() -> None:
    """Stop a managed desktop a test may have left in that folder, by its recorded PIDs."""
    from vnc_use.desktops.local import LocalDesktop

    state_dir = os.environ["VNC_USE_DESKTOP_DIR"]
    LocalDesktop(state_dir=state_dir).down()
    shutil.rmtree(state_dir, ignore_errors=True)
