"""``index.html`` of an evaluation: the summary and a sortable table, one row per task run,
each linking to its run's report. One self-contained file (no network, no external script)."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import Any

from vnc_use.evaluation.results import TaskResult
from vnc_use.providers.pricing import format_cost
from vnc_use.record.video import VIDEO_NAME

__all__ = ["render_index", "write_index"]

_COLUMNS = (
    "id",
    "repeat",
    "outcome",
    "status",
    "steps",
    "seconds",
    "cost_usd",
    "report",
    "error",
)

_STYLE = """
body{font:14px system-ui,sans-serif;margin:1.5em;color:#1d232a}
h1{font-size:1.3em}
table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #d5dbe1;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef2f6;cursor:pointer;user-select:none;white-space:nowrap}
th[aria-sort=ascending]::after{content:" \\25B2"}
th[aria-sort=descending]::after{content:" \\25BC"}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.passed td.outcome{color:#116329;font-weight:600}
tr.fail td.outcome{color:#a40e26;font-weight:600}
td.error{color:#57606a;max-width:40em;overflow-wrap:anywhere}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px}
dt{font-weight:600}
"""

# Sorts the table by the clicked column (numbers as numbers), toggling the direction.
_SCRIPT = """
document.querySelectorAll("th").forEach(function (th, col) {
  th.addEventListener("click", function () {
    var body = document.querySelector("tbody");
    var rows = Array.prototype.slice.call(body.rows);
    var up = th.getAttribute("aria-sort") !== "ascending";
    document.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", up ? "ascending" : "descending");
    rows.sort(function (a, b) {
      var x = a.cells[col].dataset.sort, y = b.cells[col].dataset.sort;
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return up ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
"""


def _cell(name: str, result: TaskResult, base: Path) -> str:
    value: Any = getattr(result, name)
    if name == "report":
        if not value:
            return '<td data-sort="">-</td>'
        if str(value).startswith("server:"):  # on the server's side only: shown, not linked
            shown = html.escape(str(value), quote=True)
            return f'<td data-sort="{shown}" title="{shown}">on the server</td>'
        href = html.escape(str(value), quote=True)
        return f'<td data-sort="{href}"><a href="{href}">report</a>{_video_link(value, base)}</td>'
    text = "" if value is None else str(value)
    sort = html.escape(text, quote=True)
    css = {"outcome": "outcome", "error": "error", "steps": "num", "seconds": "num"}.get(name)
    css = "num" if name == "cost_usd" else css
    cls = f' class="{css}"' if css else ""
    if name == "seconds":
        text = f"{float(value):.1f}"
    if name == "cost_usd":
        text = format_cost(value) if result.outcome != "setup_failed" else "-"
    return f'<td{cls} data-sort="{sort}">{html.escape(text)}</td>'


def _video_link(report: Any, base: Path) -> str:
    """A link to the task's video beside its report (when the run was recorded); ``base``:
    the folder the links are relative to."""
    video = PurePath(str(report)).with_name(VIDEO_NAME)
    if not (base / video).is_file():
        return ""
    href = html.escape(str(video), quote=True)
    return f' · <a href="{href}" class="video">video</a>'


def _number(value: Any) -> str:
    return "-" if value is None else f"{float(value):.1f}"


def _unscored(summary: dict[str, Any]) -> str:
    """How many runs the rate leaves out (their setup failed: no model failure)."""
    unscored = summary["runs"] - summary.get("scored_runs", summary["runs"])
    return f"; {unscored} whose setup failed not counted" if unscored else ""


def _summary(summary: dict[str, Any]) -> str:
    rate = summary.get("success_rate")
    low, high = summary.get("success_rate_95", [0, 1])
    items = {
        "model": f"{summary.get('model')} ({summary.get('provider')})",
        "passed": f"{summary['passed']} of {summary.get('scored_runs', summary['runs'])} runs "
        f"({summary['tasks']} tasks){_unscored(summary)}",
        "success rate": "-" if rate is None else f"{rate:.1%} (95 % CI {low:.1%} to {high:.1%})",
        "median steps": str(summary.get("median_steps")),
        "median seconds": _number(summary.get("median_seconds")),
        "outcomes": ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items() if v),
        "cost": format_cost(summary.get("cost_usd")),
        "cost per success": "-"
        if not summary.get("passed")
        else format_cost(summary.get("cost_per_success_usd")),
        "vnc-use": str(summary.get("version")),
    }
    rows = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in items.items())
    return f"<dl>{rows}</dl>"


def render_index(
    results: Sequence[TaskResult], summary: dict[str, Any], base: Path | None = None
) -> str:
    """The page's HTML (``base``: the folder it is written in; links are relative to it)."""
    where = base if base is not None else Path()
    head = "".join(f"<th>{name}</th>" for name in _COLUMNS)
    body = "".join(
        f'<tr class="{"passed" if r.success else "fail"}">'
        + "".join(_cell(name, r, where) for name in _COLUMNS)
        + "</tr>"
        for r in results
    )
    data = json.dumps(summary).replace("</", "<\\/")
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        "<title>vnc-use eval</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{_STYLE}</style></head><body><h1>vnc-use eval</h1>{_summary(summary)}"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        f'<script type="application/json" id="summary">{data}</script>'
        f"<script>{_SCRIPT}</script></body></html>"
    )


def write_index(path: Path, results: Sequence[TaskResult], summary: dict[str, Any]) -> Path:
    """Write ``index.html`` (atomically) and return its path."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(render_index(results, summary, path.parent), "utf-8")
    tmp.replace(path)
    return path
