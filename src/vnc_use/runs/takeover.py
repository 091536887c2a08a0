"""Taking a run's desktop over (placeholder until the takeover lands)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from vnc_use.errors import ConfigError


def take_over(
    storage: Any,
    runs_dir: Path,
    thread_id: str,
    person: str,
    *,
    force: bool = False,
    here: Callable[[], None] | None = None,
) -> Any:
    raise ConfigError("takeover is not available yet")
