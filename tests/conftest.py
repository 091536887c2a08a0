"""Shared fixtures: real VNC desktops with the probe app, and the Gemini API stand-in."""

from hypothesis import HealthCheck, settings

from desktop_fixtures import *  # noqa: F403
from gemini_fixtures import *  # noqa: F403

# Tests check behaviour, never wall-clock time: no per-example deadline (a cold first example
# on a loaded 2-core CI machine must not fail a property test).
settings.register_profile(
    "vnc-use", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("vnc-use")
