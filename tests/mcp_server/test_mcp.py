"""``vnc-use mcp`` in a real subprocess, driven by the MCP SDK's own client (issue 22).

Over stdio and over streamable HTTP (with and without the bearer token): the tools and their
schemas, a screenshot of the desktop's size, clicks and typing that land on the probe app at
the exact pixels, one-line tool errors, run_task through the Gemini stand-in (to done; through
awaiting_approval -> approve_run; and by elicitation), and the session's run folder read back
by ``vnc-use report``. The stand-in runs in this process; the server subprocess reaches it
through ``GOOGLE_GEMINI_BASE_URL`` like it would reach Google.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import io
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, ElicitResult, ImageContent, TextContent
from PIL import Image

from vnc_use.record.video import read_segments
from vnc_use.store.storage import open_storage
from vnc_use.testing.desktop import TestDesktop
from vnc_use.testing.gemini_standin import (
    FunctionCallSpec,
    GeminiStandIn,
    Reply,
    require_confirmation,
)

from cli_tools import CLI, run_cli
from desktop_fixtures import Probe
from doc_pages import page
from gemini_fixtures import DUMMY_API_KEY


def readme_mcp_section() -> str:
    """docs/mcp.md, the MCP server's page."""
    return page("mcp.md")


def readme_mcp_commands() -> list[list[str]]:
    """The ``vnc-use mcp`` command lines of docs/mcp.md (comments cut)."""
    return [
        shlex.split(line.split("#")[0])
        for line in readme_mcp_section().splitlines()
        if line.startswith("vnc-use mcp")
    ]


TOOLS = {
    "screenshot",
    "click",
    "type_text",
    "press_keys",
    "scroll",
    "drag",
    "run_task",
    "approve_run",
    "deny_run",
}


def _env(desktop: TestDesktop | None, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    if desktop is not None:
        env["VNC_PASSWORD"] = desktop.password
    env.update(extra)
    return env


def stdio_params(server: str, runs: Path, desktop: TestDesktop | None) -> StdioServerParameters:
    return StdioServerParameters(
        command=CLI[0],
        args=[*CLI[1:], "mcp", "--vnc", server, "--runs-dir", str(runs)],
        env=_env(desktop),
    )


def session_over_stdio(
    server: str,
    runs: Path,
    desktop: TestDesktop | None,
    body: Callable[[Client], Awaitable[None]],
    **client: Any,
) -> None:
    """Start ``vnc-use mcp`` over stdio, run ``body`` with a connected client, stop it."""

    async def main() -> None:
        async with Client(stdio_params(server, runs, desktop), **client) as c:
            await body(c)

    anyio.run(main)


def text_of(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


def png_of(result: CallToolResult) -> Image.Image:
    (image,) = [b for b in result.content if isinstance(b, ImageContent)]
    assert image.mime_type == "image/png"
    raw = base64.b64decode(image.data)
    assert raw.startswith(b"\x89PNG\r\n\x1a\n")
    return Image.open(io.BytesIO(raw))


def confirm_reply(x: int, y: int) -> Reply:
    return Reply.calls(
        FunctionCallSpec("click_at", x=x, y=y, safety_decision=require_confirmation("Submits."))
    )


def grid(probe: Probe, px: tuple[int, int]) -> tuple[int, int]:
    """The 0-999 grid point that maps to pixel ``px`` of the probe's screen."""
    w, h = probe.size
    return round(px[0] * 1000 / w), round(px[1] * 1000 / h)


def files_hold(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


@pytest.mark.desktop
def test_stdio_tools_drive_the_probe_and_journal_the_session(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    w, h = probe.size
    cx, cy = probe.canvas_point()
    ex, ey = probe.entry_center
    gx, gy = grid(probe, (cx, cy))
    gemini.script(
        Reply.calls(FunctionCallSpec("click_at", x=gx, y=gy)),
        Reply.text("Clicked the canvas."),
        confirm_reply(gx, gy),
        Reply.text("Submitted after approval."),
    )
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async def body(c: Client) -> None:
        listed = {t.name: t for t in (await c.list_tools()).tools}
        assert set(listed) == TOOLS
        click = listed["click"].input_schema
        assert set(click["properties"]) == {"x", "y", "button", "count"}
        assert set(click["required"]) == {"x", "y"}
        assert "left" in json.dumps(click["properties"]["button"])
        run_schema = listed["run_task"].input_schema
        assert set(run_schema["properties"]) == {
            "task",
            "model",
            "provider",
            "step_limit",
            "max_cost",
        }
        assert run_schema["required"] == ["task"]
        assert listed["scroll"].input_schema["required"] == ["x", "y", "direction"]
        assert set(listed["drag"].input_schema["required"]) == {"x", "y", "to_x", "to_y"}
        assert listed["type_text"].input_schema["required"] == ["text"]
        assert listed["press_keys"].input_schema["required"] == ["keys"]
        for name in ("approve_run", "deny_run"):
            assert listed[name].input_schema["required"] == ["thread_id"]
        assert all(len(t.description or "") > 60 for t in listed.values())

        shot = await c.call_tool("screenshot", {})
        assert not shot.is_error
        assert png_of(shot).size == (w, h)
        assert f"{w}x{h}" in text_of(shot)

        clicked = await c.call_tool("click", {"x": cx, "y": cy})
        assert not clicked.is_error, text_of(clicked)
        assert png_of(clicked).size == (w, h)
        press = probe.log.wait_type("press")
        assert (press["x"], press["y"], press["button"]) == (cx, cy, 1)

        probe.log.clear()
        right = await c.call_tool("click", {"x": cx + 5, "y": cy + 7, "button": "right"})
        assert not right.is_error
        press = probe.log.wait_type("press")
        assert (press["x"], press["y"], press["button"]) == (cx + 5, cy + 7, 3)

        await c.call_tool("click", {"x": ex, "y": ey})
        probe.log.clear()
        keys = await c.call_tool("press_keys", {"keys": "control+a"})  # the entry may hold text
        assert not keys.is_error
        assert probe.log.wait_type("key", keysym="a")["state"] & 4
        assert not (await c.call_tool("press_keys", {"keys": "backspace"})).is_error
        typed = await c.call_tool("type_text", {"text": "hello over MCP", "press_enter": True})
        assert not typed.is_error
        assert probe.log.wait_type("submit")["text"] == "hello over MCP"

        probe.log.clear()
        scrolled = await c.call_tool(
            "scroll", {"x": cx, "y": cy, "direction": "down", "amount": 200}
        )
        assert not scrolled.is_error, text_of(scrolled)
        wheel = probe.log.wait_type("wheel")
        assert (wheel["x"], wheel["y"]) == (cx, cy)

        probe.log.clear()
        dragged = await c.call_tool("drag", {"x": cx, "y": cy, "to_x": cx + 90, "to_y": cy + 40})
        assert not dragged.is_error, text_of(dragged)
        press, release = probe.log.wait_type("press"), probe.log.wait_type("release")
        assert (press["x"], press["y"], release["x"], release["y"]) == (cx, cy, cx + 90, cy + 40)

        # mistakes are one-line tool errors; the server goes on
        off = await c.call_tool("click", {"x": w, "y": 10})
        assert off.is_error and "off the screen" in text_of(off)
        assert "\n" not in text_of(off) and f"0..{w - 1}" in text_of(off)
        bad = await c.call_tool("press_keys", {"keys": "control+nosuchkey"})
        assert bad.is_error and "nosuchkey" in text_of(bad) and "\n" not in text_of(bad)
        wrong = await c.call_tool("click", {"x": 1, "y": 1, "button": "fourth"})
        assert wrong.is_error
        assert not (await c.call_tool("screenshot", {})).is_error

        # the agent: a task to done, one progress notification per step
        done = await c.call_tool(
            "run_task", {"task": "Click the canvas"}, progress_callback=on_progress
        )
        assert not done.is_error, text_of(done)
        outcome = done.structured_content
        assert outcome is not None and outcome["status"] == "done", outcome
        assert outcome["final_text"] == "Clicked the canvas."
        assert Path(outcome["report"]).name == "report.html" and Path(outcome["report"]).exists()
        assert len(progress) == 1 and progress[0][0] == 1
        assert "click_at" in (progress[0][2] or "")

        # a run that needs approval, from a client that cannot elicit
        probe.log.clear()
        waiting = await c.call_tool("run_task", {"task": "Submit", "step_limit": 5})
        pending = waiting.structured_content
        assert pending is not None and pending["status"] == "awaiting_approval", pending
        assert pending["pending_action"]["name"] == "click_at"
        assert pending["pending_action"]["explanation"] == "Submits."
        assert probe.log.events("press") == []
        approved = await c.call_tool("approve_run", {"thread_id": pending["thread_id"]})
        result = approved.structured_content
        assert result is not None and result["status"] == "done", result
        assert result["final_text"] == "Submitted after approval."
        press = probe.log.wait_type("press")
        assert (press["x"], press["y"]) == (cx, cy)

        again = await c.call_tool("deny_run", {"thread_id": pending["thread_id"]})
        assert again.is_error and "not waiting" in text_of(again)

    session_over_stdio(probe.desktop.server, tmp_path, probe.desktop, body)

    # the session's run folder: every action a journaled step, readable by `vnc-use report`
    (session_dir,) = [p for p in tmp_path.iterdir() if p.name.startswith("mcp-")]
    storage = open_storage(None, session_dir.parent)
    try:
        journal = storage.journal(session_dir.name).records()
    finally:
        storage.close()
    done_steps = [r["name"] for r in journal if r["state"] == "done"]
    assert done_steps == [
        *("click", "click", "click", "press_keys", "press_keys", "type_text", "scroll", "drag")
    ]
    steps = sorted(p.name for p in (session_dir / "steps").glob("*.json"))
    assert steps[0] == "0001-click.json" and steps[-1] == "0008-drag.json"
    first = json.loads((session_dir / "steps" / "0001-click.json").read_text())
    assert first["pixels"] == {"x": cx, "y": cy}
    proc = run_cli(["report", session_dir.name, "--runs-dir", str(tmp_path)])
    assert proc.returncode == 0, proc.stderr
    html = (session_dir / "report.html").read_text()
    assert "press_keys" in html and "type_text" in html
    assert read_segments(session_dir) and 'id="run-video"' in html  # recorded (issue 32)
    # each step's video button seeks just after its first press (issue 38): all 8 pressed
    events = [json.loads(x) for x in (session_dir / "events.jsonl").read_text().splitlines()]
    actions = [e for e in events if e["event"] == "action"]
    assert len(actions) == 8 and all(e["started"] <= e["pressed_at"] for e in actions)
    assert f'data-at="{actions[0]["pressed_at"] + 0.01:.3f}"' in html
    ended = json.loads((session_dir / "events.jsonl").read_text().splitlines()[-1])
    assert ended["event"] == "run_ended" and ended["steps"] == 8
    for secret in (probe.desktop.password, DUMMY_API_KEY):
        assert files_hold(tmp_path, secret) == []


@pytest.mark.desktop
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_run_task_asks_the_person_by_elicitation(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path, mode: str
) -> None:
    """auto: a 2026-07-28 connection, asked in an input_required round; legacy: the
    handshake era, asked by a server-to-client elicitation request mid-call."""
    cx, cy = probe.canvas_point()
    gemini.script(confirm_reply(*grid(probe, (cx, cy))), Reply.text("Done, as allowed."))
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"approve": True})

    async def body(c: Client) -> None:
        assert (c.protocol_version >= "2026") == (mode == "auto")
        result = await c.call_tool("run_task", {"task": "Submit"})
        outcome = result.structured_content
        assert outcome is not None and outcome["status"] == "done", outcome
        assert outcome["final_text"] == "Done, as allowed."

    session_over_stdio(
        probe.desktop.server, tmp_path, probe.desktop, body, elicitation_callback=elicit, mode=mode
    )
    assert len(asked) == 1 and "click_at" in asked[0] and "Submits." in asked[0]
    press = probe.log.wait_type("press")
    assert (press["x"], press["y"]) == (cx, cy)


@pytest.mark.desktop
def test_elicitation_declined_denies_the_run(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    gemini.script(confirm_reply(500, 500), Reply.text("never"))

    async def elicit(context: Any, params: Any) -> ElicitResult:
        return ElicitResult(action="decline")

    async def body(c: Client) -> None:
        result = await c.call_tool("run_task", {"task": "Submit"})
        assert result.structured_content is not None
        assert result.structured_content["status"] == "denied"

    session_over_stdio(
        probe.desktop.server, tmp_path, probe.desktop, body, elicitation_callback=elicit
    )
    assert probe.log.events("press") == []
    assert len(gemini.requests) == 1


@pytest.mark.desktop
def test_a_cancelled_question_leaves_the_run_waiting_for_the_shell(
    probe: Probe, gemini: GeminiStandIn, tmp_path: Path
) -> None:
    """The person cancels the elicitation: the run stays durable, awaiting approval, and a
    person approves it later with ``vnc-use approve`` from a shell."""
    cx, cy = probe.canvas_point()
    gemini.script(confirm_reply(*grid(probe, (cx, cy))), Reply.text("Approved from the shell."))
    found: dict[str, Any] = {}

    async def elicit(context: Any, params: Any) -> ElicitResult:
        return ElicitResult(action="cancel")

    async def body(c: Client) -> None:
        result = await c.call_tool("run_task", {"task": "Submit"})
        found.update(result.structured_content or {})

    session_over_stdio(
        probe.desktop.server, tmp_path, probe.desktop, body, elicitation_callback=elicit
    )
    assert found["status"] == "awaiting_approval", found
    assert probe.log.events("press") == []
    proc = run_cli(["approve", found["thread_id"], "--runs-dir", str(tmp_path)], probe.desktop)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Approved from the shell." in proc.stdout
    press = probe.log.wait_type("press")
    assert (press["x"], press["y"]) == (cx, cy)


@contextmanager
def http_server(
    desktop: TestDesktop, runs: Path, **env: str
) -> Iterator[tuple[str, str | None, subprocess.Popen[str]]]:
    """``vnc-use mcp --transport http --port 0``; yields its URL, the printed token, the
    process."""
    (line,) = [c for c in readme_mcp_commands() if "http" in c]  # as the docs show it
    args = [("0" if a == "8765" else a) for a in line[1:]]
    proc = subprocess.Popen(
        [*CLI, *args, "--vnc", desktop.server, "--runs-dir", str(runs)],
        env=_env(desktop, **env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines: list[str] = []
        assert proc.stdout is not None
        timer = threading.Timer(30, proc.kill)  # a server that never says where: fail, not hang
        timer.start()
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Ctrl-C"):
                break
        timer.cancel()
        out = "".join(lines)
        assert "http://127.0.0.1:" in out, out + (proc.stderr.read() if proc.stderr else "")
        url = out.split(" at ", 1)[1].split()[0]
        token = next(
            (ln.split(": ", 1)[1].strip() for ln in lines if ln.startswith("bearer token (")),
            None,
        )
        yield url, token, proc
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def with_token(token: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})


@pytest.mark.desktop
def test_http_needs_the_printed_token(probe: Probe, tmp_path: Path) -> None:
    w, h = probe.size
    cx, cy = probe.canvas_point()
    with http_server(probe.desktop, tmp_path) as (url, token, proc):
        assert token and len(token) >= 32

        async def main() -> None:
            async with httpx2.AsyncClient() as raw:
                body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
                assert (await raw.post(url, json=body)).status_code == 401
                bad = {"Authorization": "Bearer not-the-token"}
                assert (await raw.post(url, json=body, headers=bad)).status_code == 401
            from mcp.client.streamable_http import streamable_http_client

            with pytest.raises(Exception) as refused:
                async with Client(streamable_http_client(url)) as c:
                    await c.list_tools()
            assert "MCPError" in repr(refused.value)  # the 401, as the SDK reports it
            async with (
                with_token(token) as http,
                Client(streamable_http_client(url, http_client=http)) as c,
            ):
                assert {t.name for t in (await c.list_tools()).tools} == TOOLS
                shot = await c.call_tool("screenshot", {})
                assert png_of(shot).size == (w, h)
                await c.call_tool("click", {"x": cx, "y": cy})
                press = probe.log.wait_type("press")
                assert (press["x"], press["y"]) == (cx, cy)

        anyio.run(main)
        proc.terminate()  # SIGTERM: the session ends cleanly, its report written
        proc.wait(timeout=20)
        assert proc.stderr is not None
        assert token not in proc.stderr.read()
    (session_dir,) = tmp_path.glob("mcp-*")
    assert (session_dir / "report.html").exists()
    assert '"event": "run_ended"' in (session_dir / "events.jsonl").read_text().splitlines()[-1]
    assert files_hold(tmp_path, token) == []
    assert files_hold(tmp_path, probe.desktop.password) == []


@pytest.mark.desktop
def test_http_token_from_the_environment(desktop: TestDesktop, tmp_path: Path) -> None:
    secret = "mcp-token-from-env-0123456789abcdef"
    with http_server(desktop, tmp_path, VNC_USE_MCP_TOKEN=secret) as (url, token, _):
        assert token is None  # not printed: the user chose it
        from mcp.client.streamable_http import streamable_http_client

        async def main() -> None:
            async with (
                with_token(secret) as http,
                Client(streamable_http_client(url, http_client=http)) as c,
            ):
                assert len((await c.list_tools()).tools) == len(TOOLS)

        anyio.run(main)
    assert files_hold(tmp_path, secret) == []


def test_a_dead_desktop_is_a_one_line_tool_error(tmp_path: Path) -> None:
    async def body(c: Client) -> None:
        for _ in range(2):  # and the server is still there to say it again
            result = await c.call_tool("screenshot", {})
            assert result.is_error
            assert "cannot be reached" in text_of(result) and "\n" not in text_of(result)
        assert len((await c.list_tools()).tools) == len(TOOLS)

    session_over_stdio("127.0.0.1::1", tmp_path, None, body)


@pytest.mark.desktop
def test_sigterm_while_requests_flow_stops_the_stdio_server_cleanly(
    desktop: TestDesktop, tmp_path: Path
) -> None:
    """A host stops its server with SIGTERM while its client keeps stdin open and requests are
    flowing: the server ends at once with exit 0, no traceback, no asyncio error on the way
    out, and the session closed (``run_ended`` last). Before, the stop was a
    ``KeyboardInterrupt`` raised wherever the event loop was: 7 of 12 such stops ended with a
    traceback, asyncio errors or a process that never exited."""
    hello = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "a host", "version": "1"},
        },
    }
    shot = {"name": "screenshot", "arguments": {}}
    messages = [hello, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    messages += [{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": shot}]
    messages += [{"jsonrpc": "2.0", "id": n, "method": "ping"} for n in range(2, 3000)]
    flood = b"".join(json.dumps(m).encode() + b"\n" for m in messages)
    answered, sessions = 0, 0
    for i in range(8):  # the signal lands at different moments of the traffic
        runs = tmp_path / f"runs{i}"
        proc = subprocess.Popen(
            [*CLI, "mcp", "--vnc", desktop.server, "--runs-dir", str(runs)],
            env=_env(desktop),
            stdin=subprocess.PIPE,  # kept open: only the signal ends the server
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        replies: list[bytes] = []
        try:
            assert b"over stdio" in proc.stderr.readline()
            stdin, stdout = proc.stdin, proc.stdout
            writer = threading.Thread(target=_write_quietly, args=(stdin, flood), daemon=True)
            reader = threading.Thread(target=replies.extend, args=(stdout,), daemon=True)
            writer.start()
            reader.start()
            time.sleep(0.05 * i)
            proc.terminate()
            code = proc.wait(timeout=30)
            err = proc.stderr.read().decode()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert code == 0 and "Traceback" not in err and "ERROR" not in err, (i, code, err)
        reader.join(timeout=10)
        answered += len(replies)
        for session in runs.glob("mcp-*"):  # a session's folder starts with its first tool
            last = (session / "events.jsonl").read_text().splitlines()[-1]
            assert json.loads(last)["event"] == "run_ended", last
            sessions += 1
    assert answered > 0 and sessions > 0  # the requests did reach the servers


def _write_quietly(pipe: Any, data: bytes) -> None:
    """Write ``data`` down ``pipe``; a server that stopped reading ends the write."""
    with contextlib.suppress(OSError, ValueError):
        pipe.write(data)
        pipe.flush()


def test_mcp_usage_errors_are_one_line() -> None:
    proc = run_cli(["mcp", "--vnc", "not an address::x"])
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    proc = run_cli(["mcp", "--vnc", "127.0.0.1::5999", "--transport", "http", "--port", "70000"])
    assert proc.returncode == 2 and "--port" in proc.stderr
    assert sys.executable  # the CLI ran under this interpreter


@pytest.mark.desktop
def test_the_readme_commands_and_host_snippet(probe: Probe, tmp_path: Path) -> None:
    """The docs' ``vnc-use mcp --vnc ...`` line and its host JSON snippet, as written, with
    the test desktop's address, password and a temporary runs folder in place of the
    examples."""
    commands = readme_mcp_commands()
    assert [c[:2] for c in commands] == [["vnc-use", "mcp"]] * 3
    (with_vnc,) = [c for c in commands if "--vnc" in c]
    block = readme_mcp_section().split("```json", 1)[1].split("```", 1)[0]
    entry = json.loads(block)["mcpServers"]["vnc-use"]
    assert entry["command"] == "vnc-use"
    assert entry["env"].keys() == {"VNC_PASSWORD", "GOOGLE_API_KEY"}
    examples = {"desk-01::5901": probe.desktop.server, "localhost::5901": probe.desktop.server}
    examples["/home/me/vnc-use-runs"] = str(tmp_path / "snippet")
    bindir = Path(sys.executable).parent
    w, h = probe.size

    async def use(command: list[str]) -> None:
        args = [examples.get(a, a) for a in command]
        if "--runs-dir" not in args:
            args += ["--runs-dir", str(tmp_path / "line")]
        params = StdioServerParameters(
            command=str(bindir / "vnc-use"), args=args, env=_env(probe.desktop)
        )
        async with Client(params) as c:
            assert {t.name for t in (await c.list_tools()).tools} == TOOLS
            assert png_of(await c.call_tool("screenshot", {})).size == (w, h)

    async def main() -> None:
        await use(with_vnc[1:])
        await use(entry["args"])

    anyio.run(main)
    assert list((tmp_path / "snippet").glob("mcp-*/events.jsonl"))


def test_only_the_mcp_server_module_imports_the_sdk() -> None:
    """The SDK boundary: ``mcp`` is imported by vnc_use.mcp_server.server alone."""
    root = Path(__file__).resolve().parents[2] / "src"
    users = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            if any(n == "mcp" or n.startswith("mcp.") for n in names):
                users.append(path.relative_to(root).as_posix())
    assert sorted(set(users)) == ["vnc_use/mcp_server/server.py"]


@pytest.mark.desktop
def test_tools_refuse_unknown_arguments_and_apply_the_screen_region(
    probe: Probe, tmp_path: Path
) -> None:
    """Issue 29: every tool's input schema forbids unknown properties, and a misspelt
    argument (``press enter``) is a one-line tool error with nothing done; ``--screen-region``
    applies to the MCP session as to the other doors (screenshots of the region, clicks
    offset into it)."""
    w, h = probe.size
    cx, cy = probe.canvas_point()
    rw, rh = w // 2, h // 2
    ox, oy = min(max(0, cx - rw // 2), w - rw), min(max(0, cy - rh // 2), h - rh)
    params = StdioServerParameters(
        command=CLI[0],
        args=[
            *CLI[1:],
            *("mcp", "--vnc", probe.desktop.server, "--runs-dir", str(tmp_path)),
            *("--screen-region", f"{rw}x{rh}+{ox}+{oy}"),
        ],
        env=_env(probe.desktop),
    )

    async def main() -> None:
        async with Client(params) as c:
            listed = (await c.list_tools()).tools
            assert {t.name for t in listed} == TOOLS
            assert all(t.input_schema.get("additionalProperties") is False for t in listed)
            probe.log.clear()
            typed = await c.call_tool("type_text", {"text": "never typed", "press enter": True})
            assert typed.is_error and "\n" not in text_of(typed), text_of(typed)
            assert "'press enter'" in text_of(typed) and "press_enter" in text_of(typed)
            # issue 38: a wrong type or a missing argument is one line naming it and what it
            # should be, not pydantic's four lines with a web link
            for args, name, problem in (
                ({"x": "abc", "y": 5}, "'x'", "should be a valid integer"),
                ({"x": 5}, "'y'", "is missing"),
                ({"x": 5, "y": 5, "count": 7}, "'count'", "should be less than or equal to 3"),
            ):
                bad = await c.call_tool("click", args)
                said = text_of(bad)
                assert bad.is_error and "\n" not in said, said
                assert f"argument {name} {problem}" in said and "nothing was done" in said, said
                assert "pydantic" not in said and "http" not in said, said
            wrong = await c.call_tool("type_text", {"text": "never typed", "press_enter": "hm"})
            assert "argument 'press_enter' should be a valid boolean" in text_of(wrong)
            assert "\n" not in text_of(wrong) and "never typed" not in text_of(wrong)
            shot = await c.call_tool("screenshot", {})
            assert not shot.is_error and png_of(shot).size == (rw, rh)
            clicked = await c.call_tool("click", {"x": cx - ox, "y": cy - oy})
            assert not clicked.is_error, text_of(clicked)
            press = probe.log.wait_type("press")
            assert (press["x"], press["y"]) == (cx, cy)
            assert not probe.log.events("key") and not probe.log.events("submit")

    anyio.run(main)
    (record,) = tmp_path.glob("mcp-*/run.json")
    assert json.loads(record.read_text())["screen_region"] == f"{rw}x{rh}+{ox}+{oy}"
