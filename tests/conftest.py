"""Shared fixtures: real VNC desktops with the probe app, the Gemini API stand-in and the
OpenAI-compatible stand-in."""

import os
import shutil
import signal
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
# Likewise the RDP state (certificates trusted on first use, the kept-up bridge, FreeRDP's
# log): one folder per test process, so two xdist workers never write the same files.
os.environ["VNC_USE_RDP_DIR"] = tempfile.mkdtemp(prefix="vnc-use-test-rdp-")


# The suite runs on two pytest-xdist workers (pyproject's addopts: -n 2 --dist loadfile): a
# module is one unit of work, so its module-scoped desktops, databases and servers start once.
# The slowest modules are handed out first, so that no long one starts last while the other
# worker sits idle (a rough order, from `--durations=0` summed per module).
SLOW_FIRST = (
    "tests/e2e/test_matrix.py",
    "tests/cli/test_cli.py",
    "tests/agent/test_server.py",
    "tests/desktops/test_rdp.py",
    "tests/e2e/test_fleet.py",
    "tests/e2e/test_fleet_local.py",
    "tests/e2e/test_reliability.py",
    "tests/evaluation/test_eval.py",
    "tests/e2e/test_fleet_rdp.py",
    "tests/e2e/test_fleet_hung.py",
    "tests/e2e/test_fleet_hosts.py",
    "tests/cli/test_cli_providers.py",
    "tests/e2e/test_anthropic_e2e.py",
    "tests/agent/test_hostile.py",
    "tests/agent/test_bounded.py",
    "tests/calibration/test_calibrate.py",
    "tests/desktops/test_localdesktop.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the slow modules first (a stable sort: each module keeps its order)."""
    rank = {path: index for index, path in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


def pytest_configure(config: pytest.Config) -> None:
    # A suite started in the background of a non-interactive shell (`.ci/run &`) inherits
    # SIGINT ignored, and so would every process a test starts: the tests that stop a tool
    # with Ctrl-C (SIGINT) need it delivered, as in a person's terminal.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
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
    shutil.rmtree(os.environ["VNC_USE_RDP_DIR"], ignore_errors=True)
