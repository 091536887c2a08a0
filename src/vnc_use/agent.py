"""``VncUseAgent``: the public face of the agent, and its durable runs.

The graph itself (nodes, routing) is in :mod:`vnc_use.graph`; this module compiles it with a
SQLite checkpointer, connects the desktop and the model, and turns the graph's state into a
:class:`~vnc_use.types.RunResult`. A run's id is its LangGraph thread id, so ``approve``,
``deny`` and ``resume`` work from any process that opens the same ``runs_dir``.
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from vnc_use import safety
from vnc_use.backends.vnc import VNCController
from vnc_use.errors import ConfigError, VncUseError
from vnc_use.graph import AgentContext, AgentSettings, build_graph
from vnc_use.logging_utils import RunFolder, check_thread_id
from vnc_use.planners.gemini import DEFAULT_MODEL, GeminiComputerUse
from vnc_use.types import CUAState, RunResult

__all__ = ["CHECKPOINT_DB", "AgentSettings", "VncUseAgent"]

CHECKPOINT_DB = "vnc-use.sqlite"


class VncUseAgent:
    """Drive a VNC desktop with Gemini Computer Use until the task is done or a budget ends.

    >>> agent = VncUseAgent(vnc_server="localhost::5901")          # doctest: +SKIP
    >>> result = agent.run(task="Open the terminal and run 'ls'")   # doctest: +SKIP
    >>> result.status, result.final_text                             # doctest: +SKIP

    Runs are checkpointed in ``<runs_dir>/vnc-use.sqlite`` under their thread id, so
    :meth:`approve`, :meth:`deny` and :meth:`resume` work from any process. ``screen_size`` is
    only a hint: the real size of every screenshot is what coordinates are scaled to.
    """

    def __init__(
        self,
        vnc_server: str = "localhost::5901",
        vnc_password: str | None = None,
        screen_size: tuple[int, int] = (1440, 900),
        excluded_actions: list[str] | None = None,
        step_limit: int = 40,
        seconds_timeout: float = 300,
        hitl_mode: bool = True,
        include_initial_screenshot: bool = True,
        runs_dir: str | Path = "runs",
        *,
        model: str = DEFAULT_MODEL,
        planner: GeminiComputerUse | None = None,
        keep_screenshots: int = 3,
        checkpoint_db: str | Path | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        settings: AgentSettings | None = None,
    ) -> None:
        if step_limit < 1:
            raise ConfigError(f"step_limit must be at least 1, got {step_limit}")
        if seconds_timeout <= 0:
            raise ConfigError(f"seconds_timeout must be positive, got {seconds_timeout}")
        self.vnc_server = vnc_server
        self._vnc_password = vnc_password
        self.screen_size = screen_size
        self.runs_dir = Path(runs_dir)
        self.settings = settings or AgentSettings()
        self.settings.step_limit = step_limit
        self.settings.seconds_timeout = float(seconds_timeout)
        self.settings.hitl_mode = hitl_mode
        self.settings.include_initial_screenshot = include_initial_screenshot
        self.settings.keep_screenshots = keep_screenshots
        self.planner = planner or GeminiComputerUse(
            excluded_actions=excluded_actions, model=model, keep_screenshots=keep_screenshots
        )
        self.on_event = on_event
        self._controller: VNCController | None = None
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        db = Path(checkpoint_db) if checkpoint_db else self.runs_dir / CHECKPOINT_DB
        self._conn = sqlite3.connect(db, check_same_thread=False)
        self.checkpointer = SqliteSaver(self._conn)
        self.graph: CompiledStateGraph[CUAState, AgentContext, CUAState, CUAState] = (
            build_graph().compile(checkpointer=self.checkpointer)
        )

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        """Disconnect from the desktop and close the checkpoint database."""
        if self._controller is not None:
            self._controller.disconnect()
            self._controller = None
        self._conn.close()

    def __enter__(self) -> VncUseAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def controller(self) -> VNCController:
        """The VNC connection, opened on first use (and again after it was lost)."""
        if self._controller is None or not self._controller.is_connected():
            if self._controller is not None:
                self._controller.disconnect()
            self._controller = VNCController().connect(self.vnc_server, self._vnc_password)
        return self._controller

    # -- runs --------------------------------------------------------------------------------
    def run(self, task: str, thread_id: str | None = None) -> RunResult:
        """Start a run for ``task``; returns when it is done, paused for approval, or stopped."""
        if not task or not task.strip():
            raise ConfigError("the task is empty: say in plain words what the agent should do")
        thread_id = check_thread_id(thread_id or uuid.uuid4().hex[:12])
        if self._snapshot(thread_id).values:
            raise ConfigError(
                f"thread {thread_id!r} already exists: use resume/approve/deny, or a new id"
            )
        # Fail before anything is recorded when the key or the desktop is missing.
        _ = self.planner.client
        _ = self.controller
        folder = self._folder(thread_id)
        folder.write_json(
            "run.json",
            {
                "thread_id": thread_id,
                "task": task,
                "vnc_server": self.vnc_server,
                "model": self.planner.model,
                "excluded_actions": self.planner.excluded_actions,
                "step_limit": self.settings.step_limit,
                "seconds_timeout": self.settings.seconds_timeout,
                "hitl_mode": self.settings.hitl_mode,
                "include_initial_screenshot": self.settings.include_initial_screenshot,
                "started": time.time(),
            },
        )
        folder.event("run_started", thread_id=thread_id, task=task, vnc_server=self.vnc_server)
        initial: CUAState = {
            "task": task,
            "pending_calls": [],
            "responses": [],
            "last_screenshot_png": None,
            "step": 0,
            "done": False,
            "safety": None,
            "approved_call": None,
            "call_index": 0,
            "status": "running",
            "final_text": "",
            "error": None,
            "model_calls": 0,
        }
        return self._invoke(initial, thread_id, folder)

    def approve(self, thread_id: str) -> RunResult:
        """Approve the call a run is waiting on; the run goes on from there."""
        return self._answer(thread_id, safety.APPROVE)

    def deny(self, thread_id: str) -> RunResult:
        """Deny the call a run is waiting on; nothing is executed and the run stops."""
        return self._answer(thread_id, safety.DENY)

    def resume(self, thread_id: str) -> RunResult:
        """Continue a run that stopped on an error or a crash (a pending approval stays pending)."""
        snap = self._existing(thread_id)
        folder = self._folder(thread_id)
        if not snap.next:  # finished: nothing to continue
            return self._result(thread_id, folder, emit=False)
        folder.event("resumed", thread_id=thread_id)
        return self._invoke(None, thread_id, folder)

    def result(self, thread_id: str) -> RunResult:
        """How a run stands now, without running anything."""
        self._existing(thread_id)
        return self._result(thread_id, self._folder(thread_id), emit=False)

    # -- internals ---------------------------------------------------------------------------
    def _answer(self, thread_id: str, decision: safety.Decision) -> RunResult:
        snap = self._existing(thread_id)
        if not snap.interrupts:
            raise ConfigError(f"run {thread_id!r} is not waiting for an approval")
        folder = self._folder(thread_id)
        return self._invoke(Command(resume=decision), thread_id, folder)

    def _config(self, thread_id: str) -> Any:
        return {"configurable": {"thread_id": thread_id}}

    def _snapshot(self, thread_id: str) -> Any:
        return self.graph.get_state(self._config(thread_id))

    def _existing(self, thread_id: str) -> Any:
        check_thread_id(thread_id)
        snap = self._snapshot(thread_id)
        if not snap.values:
            raise ConfigError(f"no run with thread id {thread_id!r} in {self.runs_dir}")
        return snap

    def _folder(self, thread_id: str) -> RunFolder:
        folder = RunFolder(self.runs_dir, thread_id, secrets=self._secrets())
        if self.on_event is not None:
            folder.add_listener(self.on_event)
        return folder

    def _secrets(self) -> list[str | None]:
        return [
            self._vnc_password,
            os.environ.get("GOOGLE_API_KEY"),
            os.environ.get("GEMINI_API_KEY"),
            os.environ.get("VNC_PASSWORD"),
        ]

    def _invoke(self, inp: Any, thread_id: str, folder: RunFolder) -> RunResult:
        error: str | None = None
        try:
            ctx = AgentContext(
                controller=self.controller, planner=self.planner, run=folder, settings=self.settings
            )
            # "sync": each step's checkpoint is on disk before the next step starts, so a
            # process killed at any point resumes from the step it was in.
            self.graph.invoke(inp, self._config(thread_id), context=ctx, durability="sync")
        except VncUseError as exc:
            error = str(exc)
            if self._controller is not None and not self._controller.is_connected():
                self._controller = None
            folder.event("error", message=error, kind=type(exc).__name__)
        return self._result(thread_id, folder, error=error)

    def _result(
        self, thread_id: str, folder: RunFolder, error: str | None = None, *, emit: bool = True
    ) -> RunResult:
        snap = self._snapshot(thread_id)
        values: CUAState = snap.values
        pending: dict[str, Any] | None = None
        status = values.get("status", "running")
        if error is not None:
            status = "error"
        elif snap.interrupts:
            status = "awaiting_approval"
            pending = dict(snap.interrupts[0].value)
        elif snap.next or status == "running":  # stopped mid-way (a crash): resumable
            status = "error"
            error = "the run stopped before finishing; continue it with resume()"
        result = RunResult(
            status=status,
            thread_id=thread_id,
            run_dir=str(folder.path),
            final_text=values.get("final_text", ""),
            transcript=list(values.get("transcript", [])),
            steps=values.get("step", 0),
            error=error or values.get("error"),
            pending_call=pending,
        )
        if emit:
            folder.event(
                "run_" + ("paused" if status == "awaiting_approval" else "ended"),
                status=status,
                steps=result.steps,
                final_text=result.final_text,
                error=result.error,
                pending_call=pending,
            )
        return result
