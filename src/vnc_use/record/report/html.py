"""The run report as one HTML page: no network, inline CSS, one small script (the video's).

Each step shows the screenshot the model saw with the action drawn over it as SVG (a
crosshair at the click point, an arrow for a drag or a scroll, a caption with the text typed
and the intent), the screenshot after it, the model's text, the call and its result, the
person's decision and the timings. Screenshots are referenced relative to the run folder (the
page lives in it), or embedded as ``data:`` URIs with ``embed=True``. When the run was
recorded, a player of its ``video.mp4`` sits above the steps (:mod:`.player`; the video is
a file beside the page, or with ``embed_video=True`` inside it too: one file with everything,
as ``report --fleet --out FILE`` writes it).
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import replace
from html import escape

from vnc_use.record import timefmt
from vnc_use.record.money import format_cost
from vnc_use.record.report.describe import call_text, grid_pixels, intent, typed_text
from vnc_use.record.report.markers import Marker, arrow_head, marker_for, shaft_end
from vnc_use.record.report.model import (
    Decision,
    Divergence,
    ModelTurn,
    Note,
    RunView,
    StepView,
)
from vnc_use.record.report.player import PLAYER_CSS, player, seek_button
from vnc_use.record.video import read_segments
from vnc_use.status import RunStatus
from vnc_use.version import __version__

__all__ = ["REPORT_CSS", "STATUS_TEXT", "render_html", "render_parts"]

STATUS_TEXT: dict[str, str] = {
    RunStatus.DONE: "Done",
    RunStatus.AWAITING_APPROVAL: "Waiting for a person's approval",
    RunStatus.AWAITING_HUMAN: "Waiting for a person",
    RunStatus.DENIED: "Denied",
    RunStatus.STEP_LIMIT: "Stopped: step budget reached",
    RunStatus.TIMEOUT: "Stopped: time budget reached",
    RunStatus.ERROR: "Error",
    RunStatus.BLOCKED: "Blocked for safety",
    RunStatus.INTERRUPTED: "Stopped on request",
    RunStatus.DIVERGED: "Replay stopped: the screen differs from the recording",
    RunStatus.STUCK: "Stuck: the model kept repeating actions that changed nothing",
    RunStatus.COST_LIMIT: "Stopped: cost cap reached",
    RunStatus.FAILED: "Failed: the model reported that the task failed",
    "unfinished": "Unfinished (running, or its process died)",
}

_CSS = """
:root { --ink:#1d2330; --muted:#5d6675; --line:#dde1e8; --bg:#f5f6f8; --card:#fff; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif;
  color:var(--ink); background:var(--bg); }
header, main, footer { max-width:1500px; margin:0 auto; padding:16px 24px; }
h1 { font-size:22px; margin:0 0 4px; } h1 code { font-size:20px; }
.task { font-size:18px; margin:4px 0 12px; }
.status { display:inline-block; padding:4px 12px; border-radius:999px; font-weight:600;
  color:#fff; background:#5d6675; }
.status-done { background:#1f8a4c; } .status-error, .status-failed { background:#c62828; }
.status-blocked { background:#8e1b3a; }
.status-diverged { background:#8e1b3a; }
.shots.replayed { grid-template-columns:3fr 2fr 2fr; }
.divergence .shots { grid-template-columns:1fr 1fr; }
.status-awaiting_approval, .status-awaiting_human { background:#d97a00; }
.status-denied { background:#6d4c41; }
.status-step_limit, .status-timeout { background:#b35c00; }
dl.facts { display:grid; grid-template-columns:repeat(auto-fill, minmax(210px, 1fr));
  gap:4px 18px; margin:14px 0; }
dl.facts div { background:var(--card); border:1px solid var(--line); border-radius:8px;
  padding:6px 10px; }
dt { color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.04em; }
dd { margin:0; font-weight:600; overflow-wrap:anywhere; }
.outcome { background:var(--card); border-left:5px solid #1f8a4c; padding:10px 14px;
  border-radius:6px; margin:10px 0; }
.outcome.bad { border-color:#c62828; } .outcome.wait { border-color:#d97a00; }
nav.toc { display:flex; flex-wrap:wrap; gap:6px; margin-top:8px; }
nav.toc a { text-decoration:none; font-size:13px; padding:2px 8px; border-radius:6px;
  background:var(--card); border:1px solid var(--line); color:var(--ink); }
nav.toc a.err { border-color:#c62828; color:#c62828; }
section.step { background:var(--card); border:1px solid var(--line); border-radius:10px;
  padding:14px 16px; margin:0 0 18px; }
section.step.kind-denied { border-color:#8a8f98; }
section.step.kind-pending { border-color:#ff9f0a; }
section.step h2 { font-size:18px; margin:0 0 8px; display:flex; gap:10px; align-items:center; }
.badge { font-size:12px; padding:2px 8px; border-radius:999px; background:#1f8a4c; color:#fff; }
.badge.error { background:#c62828; } .badge.denied { background:#6d4c41; }
.badge.pending { background:#d97a00; } .badge.approved { background:#2f5fb3; }
.badge.stall { background:#8e24aa; }
blockquote.model { margin:0 0 10px; padding:8px 12px; background:#eef3ff; border-radius:6px;
  border-left:4px solid #2f5fb3; white-space:pre-wrap; }
.meta { display:block; color:var(--muted); font-size:12px; }
.shots { display:grid; grid-template-columns:3fr 2fr; gap:14px; align-items:start; }
figure { margin:0; } figcaption { color:var(--muted); font-size:13px; margin-top:4px; }
.shot { position:relative; line-height:0; border:1px solid var(--line); border-radius:4px;
  overflow:hidden; }
.shot img { width:100%; height:auto; display:block; }
.shot svg { position:absolute; left:0; top:0; width:100%; height:100%; }
.noshot { padding:30px; color:var(--muted); background:var(--bg); border-radius:4px; }
table.call { border-collapse:collapse; margin-top:10px; width:100%; font-size:14px; }
table.call th { text-align:left; color:var(--muted); font-weight:500; width:150px;
  vertical-align:top; padding:3px 8px 3px 0; }
table.call td { padding:3px 0; overflow-wrap:anywhere; }
code, pre { font-family:"DejaVu Sans Mono", ui-monospace, monospace; font-size:13px; }
pre { margin:0; white-space:pre-wrap; }
.error-text { color:#c62828; font-weight:600; }
.note { padding:8px 14px; margin:0 0 12px; border-radius:8px; background:var(--card);
  border:1px dashed var(--line); }
.note.error { border:1px solid #c62828; color:#8e1b1b; }
.note.answer { border:1px solid #1f8a4c; }
footer { color:var(--muted); font-size:12px; }
@media (max-width: 900px) { .shots { grid-template-columns:1fr; } }
"""


def _tokens(turn: ModelTurn) -> str:
    usage = turn.usage or {}
    total = turn.total_tokens
    if total is None:
        return ""
    prompt = usage.get("prompt_token_count", usage.get("promptTokenCount"))
    prompt = usage.get("input_tokens", usage.get("prompt_tokens")) if prompt is None else prompt
    out = usage.get("candidates_token_count", usage.get("candidatesTokenCount"))
    out = usage.get("output_tokens", usage.get("completion_tokens")) if out is None else out
    detail = (
        f" ({prompt:,} in, {out:,} out)" if isinstance(prompt, int) and isinstance(out, int) else ""
    )
    return f"{total:,} tokens{detail}"


def _action_rows(st: StepView) -> list[tuple[str, str]]:
    """The result, timing and stall rows of an executed action."""
    result = f'<span class="error-text">{escape(st.error)}</span>' if st.error else "ok"
    rows = [
        ("Result", result),
        (
            "Duration",
            escape(timefmt.milliseconds(st.duration_ms))
            + f" · at {escape(timefmt.when(st.ts, zone=True))}",
        ),
    ]
    if st.stall:
        rows.append(("Stall", escape(f"detected; the model was told: {st.stall}")))
    return rows


class _Page:
    """Renders one :class:`RunView`."""

    def __init__(self, view: RunView, embed: bool, embed_video: bool = False) -> None:
        self.view = view
        self.embed = embed
        self._data: dict[str, str] = {}
        # the video stays a file beside the page: an embedded page (sent alone) has no player,
        # unless its segments go inside it too
        self.video = [] if embed and not embed_video else read_segments(view.path)
        if embed_video:
            self.video = [
                replace(s, file=_data_uri("video/mp4", (view.path / s.file).read_bytes()))
                for s in self.video
            ]

    def src(self, sha: str | None) -> str | None:
        path = self.view.screenshot(sha)
        if path is None or sha is None:
            return None
        if not self.embed:
            return f"screenshots/{sha}.png"
        if sha not in self._data:
            self._data[sha] = (
                "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()
            )
        return self._data[sha]

    def poster(self) -> str | None:
        """What the video player shows before it plays: the screen the first step saw."""
        return next((self.src(st.before) for st in self.view.steps if st.before), None)

    # -- header -----------------------------------------------------------------------------
    def header(self) -> str:
        v = self.view
        s = v.settings
        duration = (v.ended - v.started) if v.ended and v.started else None
        facts = [
            ("Status", STATUS_TEXT.get(v.status, v.status)),
            ("Steps", str(v.steps_done or len([x for x in v.steps if x.kind == "action"]))),
            ("Started", timefmt.when(v.started, zone=True)),
            ("Duration", timefmt.duration(duration)),
            ("Model", str(s.get("model", "-"))),
            ("Desktop", str(s.get("vnc_server", "-"))),
            *self.replay_facts(),
            ("Model calls", f"{len(v.model_turns)} ({timefmt.milliseconds(v.model_ms)} waiting)"),
            ("Tokens", f"{v.total_tokens:,}" if v.total_tokens is not None else "not reported"),
            *([("Cost", format_cost(v.cost_usd))] if v.priced else []),
        ]
        facts_html = "".join(
            f"<div><dt>{escape(k)}</dt><dd>{escape(val)}</dd></div>" for k, val in facts
        )
        toc = "".join(
            f'<a href="#step-{i}" class="{"err" if st.error or st.kind != "action" else ""}">'
            f"{st.step}. {escape(st.name)}</a>"
            for i, st in enumerate(v.steps, 1)
        )
        return (
            f"<header><h1>vnc-use run <code>{escape(v.thread_id)}</code></h1>"
            f'<p class="task">{escape(v.task)}</p>'
            f'<span class="status status-{escape(v.status)}" data-status="{escape(v.status)}">'
            f"{escape(STATUS_TEXT.get(v.status, v.status))}</span>"
            f'<dl class="facts">{facts_html}</dl>{self.outcome()}'
            f'<nav class="toc">{toc}</nav></header>'
        )

    def replay_facts(self) -> list[tuple[str, str]]:
        """For a replay: the run it replays, and how."""
        replay = self.view.settings.get("replay")
        if not isinstance(replay, dict):
            return []
        how = f"tolerance {replay.get('tolerance')}, speed {replay.get('speed')}"
        if replay.get("heal"):
            how += ", heal"
        return [("Replay of", f"{replay.get('source_thread')} ({how})")]

    def outcome(self) -> str:
        v = self.view
        parts = []
        if v.final_text:
            said = "The model's answer" if v.status == "done" else "The model last said"
            parts.append(f"<p><strong>{said}:</strong> {escape(v.final_text)}</p>")
        if v.error:
            parts.append(f'<p class="error-text">{escape(v.error)}</p>')
        if v.status == RunStatus.AWAITING_APPROVAL and v.pending_call:
            p = v.pending_call
            parts.append(
                f"<p>Waiting for approval of <code>{escape(str(p.get('name')))}</code>: "
                f"{escape(str(p.get('explanation', '')))}<br>Approve: "
                f"<code>vnc-use approve {escape(v.thread_id)}</code> &nbsp; Deny: "
                f"<code>vnc-use deny {escape(v.thread_id)}</code></p>"
            )
        if v.status == RunStatus.AWAITING_HUMAN and v.human:
            t = escape(v.thread_id)
            said = (
                f"The model asks for a person: {escape(str(v.human.get('question') or ''))}"
                if v.human.get("asked_by") == "model"
                else f"A person has the desktop: {escape(str(v.human.get('holder') or ''))}"
            )
            parts.append(
                f"<p>{said}<br>Hand it back: <code>vnc-use handback {t} --note TEXT</code></p>"
            )
        if not parts:
            return ""
        tone: str = {
            RunStatus.DONE.value: "",
            RunStatus.AWAITING_APPROVAL.value: " wait",
            RunStatus.AWAITING_HUMAN.value: " wait",
        }.get(v.status, " bad")
        return f'<div class="outcome{tone}">{"".join(parts)}</div>'

    # -- steps -------------------------------------------------------------------------------
    def model_block(self, turn: ModelTurn | None, first: bool) -> str:
        if turn is None:
            return ""
        meta = [f"model call #{turn.n}", timefmt.milliseconds(turn.latency_ms)]
        tokens = _tokens(turn)
        if tokens:
            meta.append(tokens)
        if turn.priced:
            meta.append(format_cost(turn.cost_usd))
        if not first:
            meta.append("the same answer as the previous step")
        if not (turn.text and first):
            return f'<p class="meta">{escape(" · ".join(meta))}</p>'
        return (
            f'<blockquote class="model"><span class="meta">{escape(" · ".join(meta))}</span>'
            f"{escape(turn.text)}</blockquote>"
        )

    def figure(self, sha: str | None, caption: str, marker: Marker | None, alt: str) -> str:
        src = self.src(sha)
        if src is None:
            body = f'<div class="noshot">{escape("no screenshot")}</div>'
        else:
            svg = _svg(marker) if marker else ""
            body = f'<div class="shot"><img src="{escape(src)}" alt="{escape(alt)}">{svg}</div>'
        return f"<figure>{body}<figcaption>{escape(caption)}</figcaption></figure>"

    def step(self, index: int, st: StepView) -> str:
        marker = marker_for(st)
        if st.kind == "pending":
            badge = '<span class="badge pending">waiting for approval</span>'
        elif st.kind == "denied":
            badge = '<span class="badge denied">denied</span>'
        elif st.error:
            badge = '<span class="badge error">error</span>'
        else:
            badge = '<span class="badge">ok</span>'
        if st.decision and st.decision.approved:
            badge += '<span class="badge approved">approved</span>'
        if st.stall:
            badge += '<span class="badge stall" data-stall="1">stall detected</span>'
        saw = self.figure(
            st.before,
            "What the model saw when it proposed this action (the action drawn on it)"
            if st.original is None
            else "The screen before the replayed action (the action drawn on it)",
            marker,
            f"step {st.step}: {st.name}",
        )
        if st.kind == "action":
            after = self.figure(st.after, "After the action", None, f"after step {st.step}")
            if st.original is not None:
                after += self.figure(
                    st.original.after,
                    f"The recorded run after its step {st.original.step}",
                    None,
                    f"recorded step {st.original.step}",
                )
        else:
            missing = "Not executed" if st.kind == "denied" else "Not executed yet"
            after = f'<div class="noshot">{missing}</div>'
        shots = "shots" if st.original is None else "shots replayed"
        return (
            f'<section class="step kind-{st.kind}" id="step-{index}" data-step="{st.step}" '
            f'data-kind="{st.kind}" data-name="{escape(st.name)}">'
            f"<h2><span>Step {st.step}</span> <code>{escape(st.name)}</code> {badge}"
            f"{seek_button(index, st, self.video)}</h2>"
            f"{self.model_block(st.turn, st.first_of_turn) if st.original is None else ''}"
            f'<div class="{shots}">{saw}{after}</div>{self.details(st)}</section>'
        )

    def details(self, st: StepView) -> str:
        call = call_text(st.name, st.args, sensitive=st.sensitive, limit=200)
        rows: list[tuple[str, str]] = [("Call", f"<code>{escape(call)}</code>")]
        text = typed_text(st.args, sensitive=st.sensitive)
        if text is not None:
            rows.append(("Text typed", f"<pre>{escape(text)}</pre>"))
        why = intent(st.args)
        if why:
            rows.append(("Intent", escape(why)))
        targets = grid_pixels(st.args, st.pixels)
        if targets:
            shown = "; ".join(
                f"grid {g[0]}, {g[1]} → pixel {p[0]}, {p[1]}" if g else f"pixel {p[0]}, {p[1]}"
                for g, p in targets
            )
            size = f" (screen {st.size[0]} x {st.size[1]} px)" if st.size else ""
            rows.append(("Where", escape(shown + size)))
        if st.kind == "action":
            rows += _action_rows(st)
        if st.original is not None:
            o = st.original
            diff = "not compared" if o.difference is None else f"{o.difference:g}% of the screen"
            rows.append(("Replays", escape(f"recorded step {o.step} (difference before: {diff})")))
        if st.note:
            rows.append(("Note", escape(st.note)))
        if st.explanation and not st.decision:
            rows.append(("Why it asks", escape(st.explanation)))
        if st.decision:
            rows.append(("Decision", _decision(st.decision)))
        if st.kind == "pending":
            tid = escape(self.view.thread_id)
            rows.append(
                ("Decide", f"<code>vnc-use approve {tid}</code> or <code>vnc-use deny {tid}</code>")
            )
        body = "".join(f"<tr><th>{escape(k)}</th><td>{v}</td></tr>" for k, v in rows)
        return f'<table class="call">{body}</table>'

    def note(self, n: Note) -> str:
        if n.kind == "answer" and n.turn is not None:
            meta = " · ".join(
                x
                for x in (
                    f"model call #{n.turn.n}",
                    timefmt.milliseconds(n.turn.latency_ms),
                    _tokens(n.turn),
                )
                if x
            )
            return (
                f'<div class="note answer" data-note="answer"><span class="meta">{escape(meta)}'
                f" · no more actions</span>{escape(n.text) or '<em>(no text)</em>'}</div>"
            )
        css = "note error" if n.kind in ("error", "connection_lost") else "note"
        text = f": {escape(n.text)}" if n.text and n.kind != "paused" else ""
        label = escape(n.text) if n.kind == "paused" else f"<strong>{escape(n.kind)}</strong>{text}"
        return (
            f'<div class="{css}" data-note="{escape(n.kind)}">'
            f'<span class="meta">{escape(timefmt.when(n.ts, zone=True))}</span>{label}</div>'
        )

    def divergence(self, d: Divergence) -> str:
        diff = "?" if d.difference is None else f"{d.difference:g}%"
        limit = "" if d.tolerance is None else f" (tolerance {d.tolerance:g}%)"
        then = (
            f"The rest of the task went to the model {d.healed_by}."
            if d.healed_by
            else "Nothing was performed from this step on."
        )
        expected = self.figure(
            d.expected, f"Recorded: the screen before step {d.original_step}", None, "recorded"
        )
        actual = self.figure(d.actual, "Now: the screen the replay found", None, "now")
        return (
            f'<section class="step divergence" data-kind="diverged" data-step="{d.step}" '
            f'data-original-step="{d.original_step}"><h2><span>Before step {d.step}</span> '
            f'<span class="badge error">diverged</span></h2>'
            f"<p>Before recorded step {d.original_step}, {escape(diff)} of the screen differs "
            f"from the recording{escape(limit)}. {escape(then)}</p>"
            f'<div class="shots">{expected}{actual}</div></section>'
        )

    def main(self) -> str:
        """The player (when the run was recorded) and the steps, notes and divergences."""
        v = self.view
        body = []
        index = 0
        for item in v.items:
            if isinstance(item, StepView):
                index += 1
                body.append(self.step(index, item))
            elif isinstance(item, Divergence):
                body.append(self.divergence(item))
            else:
                body.append(self.note(item))
        if not body:
            body.append('<div class="note">No steps yet.</div>')
        return f"{player(v.steps, self.video, self.poster())}{''.join(body)}"

    def render(self) -> str:
        v = self.view
        settings = escape(json.dumps(v.settings, indent=1, ensure_ascii=False))
        written = timefmt.when(time.time(), zone=True)
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<link rel="icon" href="data:,">'
            f"<title>vnc-use run {escape(v.thread_id)}: {escape(v.task[:80])}</title>"
            f"<style>{_CSS}{PLAYER_CSS}</style></head><body>{self.header()}"
            f"<main>{self.main()}</main>"
            f"<footer><details><summary>Settings of the run</summary><pre>{settings}</pre>"
            f"</details><p>Written by vnc-use {escape(__version__)} at {escape(written)}"
            f" from <code>events.jsonl</code>.</p></footer></body></html>\n"
        )


def _decision(d: Decision) -> str:
    word = "Approved" if d.approved else "Denied"
    who = "a person" if d.by == "person" else f"the {d.by}"
    why = f" — {escape(d.explanation)}" if d.explanation else ""
    return f"{word} by {escape(who)} at {escape(timefmt.when(d.ts, zone=True))}{why}"


def _svg(m: Marker) -> str:
    u = m.unit
    stroke = max(2.0, 0.35 * u)
    halo = stroke + max(2.0, 0.3 * u)
    c = escape(m.color)
    shapes: list[str] = []

    def line(a: tuple[float, float], b: tuple[float, float], cls: str) -> None:
        for width, color in ((halo, "#fff"), (stroke, c)):
            shapes.append(
                f'<line class="{cls}" x1="{a[0]:.1f}" y1="{a[1]:.1f}" x2="{b[0]:.1f}" '
                f'y2="{b[1]:.1f}" stroke="{color}" stroke-width="{width:.1f}" '
                'stroke-linecap="round"/>'
            )

    def head(a: tuple[int, int], b: tuple[int, int], cls: str) -> None:
        pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in arrow_head(a, b, 2.4 * u))
        shapes.append(
            f'<polygon class="{cls}" points="{pts}" fill="{c}" stroke="#fff" '
            f'stroke-width="{stroke / 2:.1f}"/>'
        )

    if m.drag_to and m.point:
        line(m.point, shaft_end(m.point, m.drag_to, 2.4 * u), "drag")
        head(m.point, m.drag_to, "drag-head")
    if m.scroll:
        line(m.scroll[0], shaft_end(*m.scroll, 2.4 * u), "scroll")
        head(m.scroll[0], m.scroll[1], "scroll-head")
    if m.point:
        x, y = m.point
        r, arm = 1.6 * u, 3.2 * u
        for width, color in ((halo, "#fff"), (stroke, c)):
            shapes.append(
                f'<circle class="crosshair" cx="{x}" cy="{y}" r="{r:.1f}" fill="none" '
                f'stroke="{color}" stroke-width="{width:.1f}"/>'
            )
        line((x - arm, y), (x - r / 2, y), "crosshair")
        line((x + r / 2, y), (x + arm, y), "crosshair")
        line((x, y - arm), (x, y - r / 2), "crosshair")
        line((x, y + r / 2), (x, y + arm), "crosshair")
        shapes.append(f'<circle class="dot" cx="{x}" cy="{y}" r="{stroke / 2:.1f}" fill="{c}"/>')
    font = m.font
    lx, ly = m.label_at
    width, height = m.label_size
    shapes.append(
        f'<g class="label"><rect x="{lx}" y="{ly}" width="{width:.1f}" height="{height:.1f}" '
        f'rx="{font / 4:.1f}" fill="{c}" opacity="0.92"/>'
        f'<text x="{lx + font / 2:.1f}" y="{ly + font * 1.15:.1f}" font-size="{font:.1f}" '
        'font-family="DejaVu Sans Mono, monospace" fill="#fff">'
        f"{escape(m.label)}</text></g>"
    )
    return (
        f'<svg class="marker" viewBox="0 0 {m.width} {m.height}" preserveAspectRatio="none" '
        f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(m.label)}">'
        f"{''.join(shapes)}</svg>"
    )


REPORT_CSS = _CSS + PLAYER_CSS
"""The report's style sheet (the console's run page uses it too)."""


def render_parts(view: RunView, *, video: bool = True) -> tuple[str, str]:
    """The report's header and its main part (player, steps), for a page of its own (the
    console's run page); screenshots and the video are referred to relative to the run
    folder (``screenshots/<sha256>.png``, ``video.mp4``). ``video=False`` leaves the player
    out (a run still recording)."""
    page = _Page(view, embed=False)
    if not video:
        page.video = []
    return page.header(), page.main()


def render_html(view: RunView, *, embed: bool = False, embed_video: bool = False) -> str:
    """The report page of a run (``embed=True`` puts the screenshots inside the page,
    ``embed_video=True`` the video's segments)."""
    return _Page(view, embed, embed_video).render()


def _data_uri(mime: str, data: bytes) -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode()
