"""Bounded context and bounded state over a long run.

A 50-step run of the real agent on a 1440x900 desktop with the busy probe (screenshots of
realistic size, ~0.35 MB) and a model whose answers carry reasoning text and a thought
signature, as real ones do. Measured in bytes, never in time:

* the request body at step 50 is within 10% of the one at step 5 (only the last 3
  screenshots are sent);
* the checkpoint database grows by the same amount per step early and late in the run (the
  history channels are DeltaChannels: no checkpoint rewrites the whole history), at most
  20 KB per step;
* a fresh agent rebuilds the whole history from those deltas.
"""

from __future__ import annotations

import random
import sqlite3
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vnc_use import VncUseAgent
from vnc_use.agent.state import extend_history
from vnc_use.providers.gemini.planner import GeminiComputerUse
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import FunctionCallSpec, GeminiStandIn, Reply
from vnc_use.testing.probe import ProbeLog

from gemini_fixtures import FAST_RETRY

STEPS = 50


class SizedStandIn(GeminiStandIn):
    """The stand-in, keeping each request's body size in bytes and image count (not bodies)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sizes: list[int] = []
        self.images: list[int] = []

    def _handle(
        self, method: str, raw_path: str, headers: Mapping[str, str], raw: bytes
    ) -> tuple[int, dict[str, Any]]:
        answer = super()._handle(method, raw_path, headers, raw)
        rec = self.requests[-1]
        self.sizes.append(len(raw))
        self.images.append(len(rec.image_parts()))
        rec.body = None
        return answer


def clicker(steps: int) -> Any:
    rng = random.Random(6)

    def script(body: Any, index: int) -> Reply:
        if index >= steps:
            return Reply.text("finished")
        x, y = rng.randrange(40, 400), rng.randrange(300, 800)
        text = (
            f"Step {index + 1}. I can see the canvas; I will click at ({x}, {y}) as asked and "
            "then check the next screenshot for the marker that shows the click landed."
        )
        return Reply.calls(
            FunctionCallSpec(
                "click_at",
                x=round(x * 1000 / 1440),
                y=round(y * 1000 / 900),
                thought_signature=rng.randbytes(512),
            ),
            text=text,
        )

    return script


@pytest.fixture(scope="module")
def long_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One 50-step run; yields the request sizes and where the run's files are."""
    tmp = tmp_path_factory.mktemp("bounded")
    mp = pytest.MonkeyPatch()
    mp.setenv("GOOGLE_API_KEY", "AIzaStandInDummyKey-0123456789abcdef")
    mp.delenv("GEMINI_API_KEY", raising=False)
    try:
        with TestDesktop(1440, 900) as desk, SizedStandIn(clicker(STEPS)) as api:
            out = tmp / "probe.jsonl"
            argv = [sys.executable, "-m", "vnc_use.testing.probe", "--out", str(out), "--busy"]
            desk.launch(argv)
            ProbeLog(out).wait_type("ready", timeout=30)
            with VncUseAgent(
                vnc_server=desk.server,
                vnc_password=desk.password,
                runs_dir=tmp / "runs",
                step_limit=STEPS + 1,
                planner=GeminiComputerUse(**FAST_RETRY),
            ) as agent:
                result = agent.run(task="Click where I say", thread_id="long")
            assert result.status == "done", result.error
            assert not api.violations
            yield {"sizes": api.sizes, "images": api.images, "runs": tmp / "runs"}
    finally:
        mp.undo()


@pytest.mark.desktop
def test_request_size_stays_flat(long_run: dict[str, Any]) -> None:
    sizes, images = long_run["sizes"], long_run["images"]
    assert len(sizes) == STEPS + 1
    assert images[:4] == [1, 2, 3, 3] and set(images[3:]) == {3}
    assert sizes[5] > 500_000  # realistic screenshots, so the images dominate
    assert abs(sizes[50] - sizes[5]) <= 0.10 * sizes[5], (sizes[5], sizes[50])


def _bytes_per_checkpoint(db: Path) -> list[int]:
    """Logical bytes each checkpoint added (its row plus its writes), oldest first."""
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT length(c.checkpoint) + length(c.metadata) + coalesce((SELECT "
            "sum(length(w.value)) FROM writes w WHERE w.thread_id = c.thread_id AND "
            "w.checkpoint_id = c.checkpoint_id), 0) FROM checkpoints c "
            "WHERE c.thread_id = 'long' ORDER BY c.checkpoint_id"
        ).fetchall()
    finally:
        conn.close()
    return [int(n) for (n,) in rows]


@pytest.mark.desktop
def test_checkpoints_grow_linearly_and_by_little(long_run: dict[str, Any]) -> None:
    per = _bytes_per_checkpoint(long_run["runs"] / "vnc-use.sqlite")
    assert len(per) >= 2 * STEPS  # propose + act per step, plus the start
    early = sum(per[20:40]) / 10  # steps ~10-20, per step (two checkpoints a step)
    late = sum(per[-20:]) / 10  # the last 10 steps
    assert late <= 20 * 1024, late
    assert late <= 1.25 * early, (early, late)  # operator.add history would be ~4x here
    # the last checkpoint row does not hold the history (only its last step's writes do)
    conn = sqlite3.connect(long_run["runs"] / "vnc-use.sqlite")
    try:
        (newest,) = conn.execute(
            "SELECT length(checkpoint) FROM checkpoints WHERE thread_id = 'long' "
            "ORDER BY checkpoint_id DESC LIMIT 1"
        ).fetchone()
    finally:
        conn.close()
    assert newest < 8 * 1024


@pytest.mark.desktop
def test_a_fresh_agent_rebuilds_the_history(long_run: dict[str, Any]) -> None:
    with VncUseAgent(vnc_server="127.0.0.1::1", runs_dir=long_run["runs"]) as agent:
        result = agent.result("long")
        values = agent.graph.get_state({"configurable": {"thread_id": "long"}}).values
    assert result.status == "done" and result.final_text == "finished"
    assert [t["step"] for t in result.transcript] == list(range(1, STEPS + 1))
    turns = values["contents"]
    assert len(turns) == 1 + 2 * STEPS + 1  # task, (model, responses) per step, final answer
    assert [t["turn"] for t in turns[:3]] == ["user", "model", "user"]
    assert turns[0]["screen_size"] == [1440, 900]
    assert all(r["screen_size"] == [1440, 900] for t in turns[2:-1:2] for r in t["responses"])


@given(
    st.lists(st.integers(), max_size=5),
    st.lists(st.lists(st.integers(), max_size=4), max_size=6),
    st.integers(min_value=0, max_value=6),
)
def test_history_reducer_is_batching_invariant(
    base: list[int], writes: list[list[int]], cut: int
) -> None:
    once = extend_history(base, writes)
    twice = extend_history(extend_history(base, writes[:cut]), writes[cut:])
    assert once == twice == base + [x for w in writes for x in w]
