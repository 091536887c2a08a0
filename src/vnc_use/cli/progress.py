"""What a person sees while a run goes on: one line per step, as it happens.

* On a terminal: coloured lines (rich) and a spinner while the model thinks.
* Not a terminal (a pipe, a CI log): the same lines, plain, one per event that matters.
* ``--quiet``: nothing until the final result. ``--json``: every event as one JSON line (the
  records of ``events.jsonl``, already redacted by the run folder).

A step line reads::

    step 2: type_text_at(x=500, y=118, text='hi') -> px (720, 106)  [3 ms; model 41 ms]

Typed text is shown through :func:`vnc_use.record.report.describe.typed_text` (hidden when the
action
is marked sensitive), the one place that decides it.
"""

from __future__ import annotations

import argparse
import atexit
import json
import sys
from collections.abc import Callable
from typing import Any, Literal, TextIO

from rich.console import Console
from rich.status import Status
from rich.text import Text

from vnc_use.providers.pricing import format_cost
from vnc_use.record import timefmt
from vnc_use.record.report.describe import call_text, grid_pixels, intent, is_sensitive

__all__ = ["LineFormatter", "Mode", "Progress", "choose_mode", "for_args"]

Mode = Literal["live", "plain", "quiet", "json"]
Segments = list[tuple[str, str]]
"""A line as (text, rich style) pieces; plain output joins the texts."""


def _ms(value: Any) -> str:
    return timefmt.milliseconds(value, missing="?", decimals=1)


def _one_line(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _security(security: Any) -> Segments:
    """`` (VeNCrypt TLSVnc, encrypted)``: the connection's security type, from the event."""
    if not isinstance(security, dict) or not security.get("name"):
        return []
    encrypted = security.get("encrypted") is True
    state = "encrypted" if encrypted else "not encrypted"
    return [(f" ({security['name']}, {state})", "green" if encrypted else "yellow")]


_TRUST = {
    "first use": "trusted on first use",
    "known": "as trusted before",
    "pinned": "pinned",
}


def _rdp(rdp: Any) -> Segments:
    """`` (RDP NLA, certificate SHA-256 ab:cd:..., trusted on first use)``."""
    if not isinstance(rdp, dict):
        return []
    protocol = rdp.get("protocol") or "?"
    parts = [f"RDP {protocol}"]
    if protocol != "NLA":
        parts[0] += " without NLA: the server checks any login in its own login screen"
        if rdp.get("username") and rdp.get("allow_unverified_login"):
            parts.append("login NOT verified (--rdp-allow-unverified-login)")
    if rdp.get("cert_sha256"):
        trust = _TRUST.get(str(rdp.get("cert_trust")), str(rdp.get("cert_trust")))
        parts.append(f"certificate SHA-256 {rdp['cert_sha256']}, {trust}")
    colour = "green" if rdp.get("cert_sha256") and protocol == "NLA" else "yellow"
    return [(f" ({', '.join(parts)})", colour)]


class LineFormatter:
    """Turns events into lines; remembers the latency of the model answer behind each step."""

    def __init__(self) -> None:
        self.model_ms: float | None = None
        self.cost: float | None = None
        """The run's cost so far (None: unknown), from the last model answer."""
        self.priced = False
        """True once a model answer said what the run cost (runs of older versions do not)."""

    def __call__(self, e: dict[str, Any]) -> Segments | None:
        """The line for an event, or None for events that get no line."""
        kind = e.get("event")
        if kind == "run_started":
            return [
                ("run ", ""),
                (str(e.get("thread_id")), "bold"),
                (f" on {e.get('vnc_server')}", ""),
                *(_rdp(e["rdp"]) if e.get("rdp") else _security(e.get("security"))),
                (": ", ""),
                (str(e.get("task", "")), "bold"),
            ]
        if kind == "resumed":
            return [("resumed run ", ""), (str(e.get("thread_id")), "bold")]
        if kind == "model_response":
            return self.model(e)
        if kind == "action":
            return self.step(e)
        if kind in _PEOPLE:
            return _PEOPLE[kind](e)
        if kind in ("error", "blocked", "model_failed"):  # the CLI prints the reason once
            return None
        if kind == "screen_not_settled" or (kind == "screenshot" and e.get("settled") is False):
            return [(f"  the screen was still changing after {_ms(e.get('waited_ms'))}", "dim")]
        detail = e.get("message") or e.get("reason") or e.get("decision") or e.get("note") or ""
        if kind in ("observe", "model_request", "run_paused", "run_ended") or not kind:
            return None
        if not detail and kind not in ("reconnected", "interrupted"):
            return None  # bookkeeping (e.g. each screenshot's timings): events.jsonl has it
        return [(f"  {kind}", "yellow"), (f": {detail}" if detail else "", "")]

    def model(self, e: dict[str, Any]) -> Segments | None:
        """The model's words, when it said any (its calls get their own step lines)."""
        self.model_ms = e.get("latency_ms")
        if "run_cost_usd" in e:
            self.cost = e.get("run_cost_usd")
            self.priced = True
        text = str(e.get("text") or "")
        calls = e.get("calls") or []
        if not text and calls:
            return None
        usage = e.get("usage") or {}
        tokens = usage.get("total_token_count") if isinstance(usage, dict) else None
        meta = f"model {_ms(self.model_ms)}" + (f", {tokens} tokens" if tokens else "")
        if "cost_usd" in e:
            meta += f", {format_cost(e.get('cost_usd'))}"
        stop = e.get("stop")
        end = (
            ""
            if calls
            else f" ({stop}: {e.get('finish_reason')})"
            if stop in ("blocked", "error")
            else " (the model says the task failed)"
            if stop == "failed"
            else " (no more actions)"
        )
        return [
            ("  model: ", "dim"),
            (_one_line(text) if text else "(no text)", "italic"),
            (end, "dim"),
            (f"  [{meta}]", "dim"),
        ]

    def step(self, e: dict[str, Any]) -> Segments:
        """``step N: call(args) -> px (x, y)  [duration; model latency]`` and what went wrong."""
        raw = e.get("args")
        args: dict[str, Any] = raw if isinstance(raw, dict) else {}
        sensitive = is_sensitive(e)  # the one switch that hides typed text
        line: Segments = [
            (f"step {e.get('step')}: ", "bold"),
            (call_text(str(e.get("name")), args, sensitive=sensitive), "cyan"),
        ]
        targets = grid_pixels(args, e.get("pixels") or {})
        if targets:
            where = " to ".join(f"({p[0]}, {p[1]})" for _, p in targets)
            line.append((f" -> px {where}", "green"))
        why = intent(args)
        if why:
            line.append((f' - "{_one_line(why, 80)}"', "magenta"))
        model_ms = e.get("model_ms", self.model_ms)  # older runs' events lack it
        # the running cost once known (an unknown one is said on the model's lines)
        spent = f"; {format_cost(self.cost)} so far" if self.cost is not None else ""
        line.append((f"  [{_ms(e.get('duration_ms'))}; model {_ms(model_ms)}{spent}]", "dim"))
        if e.get("approved"):
            line.append((" (approved)", "green"))
        if e.get("note"):
            line.append((f" ({e['note']})", "yellow"))
        if e.get("error"):
            line.append((f" ERROR: {_one_line(str(e['error']), 200)}", "bold red"))
        return line


def _decision_line(e: dict[str, Any]) -> Segments:
    """A call approved or denied, by whom and why."""
    kind = str(e.get("event"))
    why = e.get("explanation") or e.get("reason")
    return [
        (f"  {kind} by {e.get('by', 'person')}: ", "green" if kind == "approved" else "red"),
        (str(e.get("name", "")), "bold"),
        (f" - {why}" if why else "", ""),
    ]


def _human_line(e: dict[str, Any]) -> Segments:
    """A person took the desktop, or handed it back (with how long and the note)."""
    if e.get("event") == "asks_person":
        return [("  the model asks for a person: ", "yellow"), (str(e.get("question")), "bold")]
    if e.get("event") == "taken_over":
        return [("  a person took the desktop: ", "yellow"), (str(e.get("holder", "")), "bold")]
    note = f": {e.get('note')}" if e.get("note") else ""
    if e.get("asked_by") == "model":
        return [("  a person answered the model", "yellow"), (note, "")]
    clicks, keys = int(e.get("clicks") or 0), int(e.get("keys") or 0)
    held = (
        f"  a person had control, {float(e.get('seconds') or 0):.0f} s ({clicks} click"
        f"{'' if clicks == 1 else 's'}, {keys} key press{'' if keys == 1 else 'es'}), handed back"
    )
    return [(held, "yellow"), (note, "")]


_PEOPLE: dict[str, Callable[[dict[str, Any]], Segments]] = {
    "approved": _decision_line,
    "denied": _decision_line,
    "asks_person": _human_line,
    "taken_over": _human_line,
    "handed_back": _human_line,
}
"""Events of a person's part (approvals, a takeover, a hand-back) and their lines."""


def plain(segments: Segments) -> str:
    """A line without styles."""
    return "".join(text for text, _ in segments)


class Progress:
    """An event listener that shows a run's progress (see the module's doc for the modes)."""

    def __init__(self, mode: Mode, stream: TextIO | None = None) -> None:
        self.mode = mode
        self.stream = stream or sys.stdout
        self.format = LineFormatter()
        self._console: Console | None = None
        self._status: Status | None = None
        if mode == "live":
            self._console = Console(file=self.stream, highlight=False, soft_wrap=True)
            atexit.register(self.close)

    def __call__(self, event: dict[str, Any]) -> None:
        """Show one event."""
        if self.mode == "quiet":
            return
        if self.mode == "json":
            self.stream.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")
            self.stream.flush()
            return
        kind = event.get("event")
        if kind in ("model_response", "error", "run_paused", "run_ended", "denied"):
            self._stop_spinner()
        line = self.format(event)
        if line is not None:
            self._show(line)
        if kind == "model_request":
            self._start_spinner(f"waiting for the model (call #{event.get('n', '?')})…")

    def _show(self, line: Segments) -> None:
        if self._console is not None:
            self._console.print(Text.assemble(*line))
        else:
            self.stream.write(plain(line) + "\n")
            self.stream.flush()

    def _start_spinner(self, text: str) -> None:
        if self._console is None:
            return
        self._stop_spinner()
        self._status = self._console.status(text, spinner="dots")
        self._status.start()

    def _stop_spinner(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def close(self) -> None:
        """Stop the spinner (also done at the end of every run, and at exit)."""
        self._stop_spinner()


def choose_mode(*, quiet: bool, json_lines: bool, stream: TextIO) -> Mode:
    """``json`` and ``quiet`` when asked; else ``live`` on a terminal, ``plain`` otherwise."""
    if json_lines:
        return "json"
    if quiet:
        return "quiet"
    return "live" if stream.isatty() else "plain"


def for_args(args: argparse.Namespace) -> Progress:
    """The progress display the command line options ask for, on standard output."""
    mode = choose_mode(
        quiet=bool(getattr(args, "quiet", False)),
        json_lines=bool(getattr(args, "json", False)),
        stream=sys.stdout,
    )
    return Progress(mode, sys.stdout)
