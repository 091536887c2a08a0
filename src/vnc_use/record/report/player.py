"""The report's video player: the run's ``video.mp4`` (and later segments), seekable by step.

Above the step list: a ``<video>`` of the run's first segment and a timeline with a mark per
step; each step's row has a button that seeks the video to its action (the frame with its
click's ring, in whichever segment holds it). When a segment ends the next one plays. The
only script of the report lives here; it reads the segments and step moments from a JSON
block in the page.
"""

from __future__ import annotations

import json
from html import escape

from vnc_use.record.report.model import StepView
from vnc_use.record.video import VideoSegment

__all__ = ["PLAYER_CSS", "moment", "player", "seek_button"]

PLAYER_CSS = """
section.video { background:var(--card); border:1px solid var(--line); border-radius:10px;
  padding:12px 16px; margin:0 0 18px; }
section.video video { width:100%; max-height:70vh; background:#000; border-radius:4px; }
.timeline { position:relative; height:18px; margin:6px 0 2px; background:var(--bg);
  border-radius:4px; }
.timeline a.mark { position:absolute; top:2px; width:4px; height:14px; margin-left:-2px;
  background:#2f5fb3; border-radius:2px; }
.timeline .now { position:absolute; top:0; width:2px; height:18px; background:#c62828; }
.clock { font:12px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; color:var(--muted); }
section.video video::-webkit-media-controls-current-time-display,
section.video video::-webkit-media-controls-time-remaining-display { display:none; }
button.seek { font-size:12px; padding:2px 8px; border-radius:6px; cursor:pointer;
  border:1px solid #2f5fb3; background:#eef3ff; color:#2f5fb3; }
"""

_SCRIPT = """
(function () {
  var data = JSON.parse(document.getElementById("video-data").textContent);
  var v = document.getElementById("run-video"), line = document.getElementById("run-timeline");
  var now = document.createElement("div"), cur = 0;
  var clock = document.getElementById("run-clock");
  now.className = "now";
  function fmt(t) {  // m:ss.s: a segment shorter than a second still reads its length
    var d = Math.round((isFinite(t) && t > 0 ? t : 0) * 10), m = Math.floor(d / 600);
    var s = (d - m * 600) / 10;
    return m + ":" + (s < 10 ? "0" : "") + s.toFixed(1);
  }
  function tick() {
    var n = data.segments.length;
    clock.textContent = fmt(v.currentTime) + " / " + fmt(v.duration) +
      (n > 1 ? " \u00b7 segment " + (cur + 1) + " of " + n : "");
  }
  function locate(at) {
    var i = 0;
    data.segments.forEach(function (s, k) { if (s.start <= at) { i = k; } });
    return [i, Math.max(0, at - data.segments[i].start)];
  }
  function ready(fn) {
    if (v.readyState >= 1) { fn(); return; }
    v.addEventListener("loadedmetadata", fn, {once: true});
  }
  function marks() {
    line.textContent = "";
    line.appendChild(now);
    var d = v.duration;
    if (!isFinite(d) || d <= 0) { return; }
    data.steps.forEach(function (st) {
      var p = locate(st.at);
      if (p[0] !== cur) { return; }
      var m = document.createElement("a");
      m.className = "mark"; m.href = "#step-" + st.index; m.title = "Step " + st.step;
      m.dataset.step = st.step; m.style.left = Math.min(100, p[1] / d * 100) + "%";
      m.addEventListener("click", function (e) { e.preventDefault(); seek(st.at); });
      line.appendChild(m);
    });
  }
  function load(i, fn) {
    if (i !== cur) { cur = i; v.src = data.segments[i].src; v.dataset.segment = i; }
    ready(function () { marks(); fn(); });
  }
  function seek(at) {
    var p = locate(at);
    load(p[0], function () { v.currentTime = p[1]; });
  }
  v.addEventListener("timeupdate", function () {
    if (isFinite(v.duration) && v.duration > 0) {
      now.style.left = Math.min(100, v.currentTime / v.duration * 100) + "%";
    }
    tick();
  });
  ["loadedmetadata", "durationchange", "seeked"].forEach(function (name) {
    v.addEventListener(name, tick);
  });
  v.addEventListener("ended", function () {
    if (cur + 1 < data.segments.length) {
      load(cur + 1, function () { v.currentTime = 0; v.play(); });
    }
  });
  document.addEventListener("click", function (e) {  // the steps come after this script
    var b = e.target.closest && e.target.closest("button.seek");
    if (!b) { return; }
    seek(parseFloat(b.dataset.at));
    document.getElementById("video").scrollIntoView();
  });
  v.dataset.segment = 0;
  ready(function () { marks(); tick(); });
})();
"""


AFTER_PRESS = 0.01
"""Seconds past a step's first press its button seeks to: past the millisecond roundings of
the times involved, well before the next frame (frames are at least 1/60 s apart)."""


def moment(st: StepView) -> float | None:
    """Where the video shows a step's action (wall clock): just after its first button or key
    press, on the frame whose ring marks the click; else (no press, older runs) when the
    action began: its ``started``, or the end of its event less its duration."""
    if st.pressed_at is not None:
        return st.pressed_at + AFTER_PRESS
    if st.started is not None:
        return st.started
    if st.ts is not None:
        return st.ts - (st.duration_ms or 0.0) / 1000
    return None


def seek_button(index: int, st: StepView, segments: list[VideoSegment]) -> str:
    """The step row's button that seeks the video to the action ("" without a video)."""
    at = moment(st)
    if not segments or at is None or st.kind != "action":
        return ""
    return (
        f'<button type="button" class="seek" data-index="{index}" data-at="{at:.3f}" '
        f'title="Show this action in the video">&#9654; video</button>'
    )


def player(steps: list[StepView], segments: list[VideoSegment], poster: str | None = None) -> str:
    """The player block, with its data and script ("" when the run has no video).

    ``poster`` (the first step's screenshot) is what the player shows before it plays, rather
    than black; under it, the position and length with tenths of a second (the browser's own
    controls read a sub-second segment as 0:00 / 0:00, and are hidden where they can be)."""
    if not segments:
        return ""
    moments = [
        {"index": i, "step": st.step, "at": round(at, 3)}
        for i, st in enumerate(steps, 1)
        if st.kind == "action" and (at := moment(st)) is not None
    ]
    data = {
        "segments": [{"src": s.file, "start": s.started} for s in segments],
        "steps": moments,
    }
    blob = json.dumps(data).replace("</", "<\\/")
    more = (
        f" It has {len(segments)} segments (one per leg of the run); they play in order."
        if len(segments) > 1
        else ""
    )
    first = escape(segments[0].file, quote=True)
    shown = f' poster="{escape(poster, quote=True)}"' if poster else ""
    return (
        '<section class="video" id="video"><h2>What happened on the screen</h2>'
        f'<video id="run-video" src="{first}"{shown} controls muted playsinline '
        f'preload="metadata"><a href="{first}">video</a></video>'
        '<div class="timeline" id="run-timeline"></div>'
        '<div class="clock" id="run-clock"></div>'
        '<p class="meta">Recorded from the VNC connection: a ring at each click, '
        f"the named keys pressed. Each step's &#9654; button shows its action.{more}</p>"
        f'<script type="application/json" id="video-data">{blob}</script>'
        f"<script>{_SCRIPT}</script></section>"
    )
