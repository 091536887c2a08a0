"""The console's HTML, rendered on the server: the runs list with the start form, a run's page.

A run's page is the run report's own drawing (:func:`vnc_use.record.report.html.render_parts`:
each step's screenshot with the action drawn on it, the model's text, the call and its pixels,
tokens and cost, stall notes, the pending call with its target marked) with the console's
controls above it, the live desktop beside it while the run goes on, and after the end the
report's video with its per-step seek. Every value shown is escaped and passed through the
redactor first.
"""

from __future__ import annotations

import time
from html import escape
from urllib.parse import urlencode

from vnc_use.console.index import Page
from vnc_use.console.start import Defaults
from vnc_use.record import timefmt
from vnc_use.record.money import format_cost
from vnc_use.record.report.html import REPORT_CSS, STATUS_TEXT
from vnc_use.record.runs import RunSummary

__all__ = ["layout", "run_page", "runs_page", "runs_table"]

CSS = """
.console-bar { background:#1d2330; color:#fff; padding:10px 24px; display:flex; gap:18px;
  align-items:center; }
.console-bar a { color:#fff; text-decoration:none; font-weight:600; }
.console-main { max-width:1500px; margin:0 auto; padding:16px 24px; }
form.start { background:var(--card); border:1px solid var(--line); border-radius:10px;
  padding:14px 16px; margin:0 0 18px; display:grid; gap:10px;
  grid-template-columns:repeat(auto-fill, minmax(220px, 1fr)); }
form.start .wide { grid-column:1 / -1; }
form.start label { display:flex; flex-direction:column; font-size:13px; color:var(--muted);
  gap:3px; }
form.start textarea { min-height:52px; }
input, select, textarea, button { font:inherit; padding:5px 8px; border-radius:6px;
  border:1px solid var(--line); }
button { cursor:pointer; background:#2f5fb3; color:#fff; border-color:#2f5fb3; }
button.deny, button.stop { background:#c62828; border-color:#c62828; }
button.approve, button.handback { background:#1f8a4c; border-color:#1f8a4c; }
button.takeover { background:#8a5a1f; border-color:#8a5a1f; }
#message { min-height:1.4em; margin:4px 0 10px; font-weight:600; }
#message[data-bad="1"] { color:#c62828; }
table.runs { border-collapse:collapse; width:100%; background:var(--card); font-size:14px; }
table.runs th, table.runs td { text-align:left; padding:6px 8px;
  border-bottom:1px solid var(--line); }
table.runs td.task { max-width:480px; overflow-wrap:anywhere; }
nav.filters { display:flex; flex-wrap:wrap; gap:6px; margin:10px 0; }
nav.filters a { font-size:13px; padding:2px 8px; border-radius:6px; background:var(--card);
  border:1px solid var(--line); color:var(--ink); text-decoration:none; }
nav.filters a.on { border-color:#2f5fb3; color:#2f5fb3; font-weight:600; }
.controls { display:flex; gap:10px; align-items:center; flex-wrap:wrap; margin:10px 0; }
section.live { background:var(--card); border:1px solid var(--line); border-radius:10px;
  padding:10px 14px; margin:0 0 18px; }
#screen { height:60vh; background:#202428; }
"""


def layout(title: str, body: str, *, page: str, attrs: str = "", scripts: str = "") -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer"><link rel="icon" href="data:,">'
        f"<title>{escape(title)}</title><style>{REPORT_CSS}{CSS}</style></head>"
        f'<body data-page="{page}"{attrs}><div class="console-bar"><a href="/">vnc-use console'
        f"</a><span>runs, live, approvals</span></div>{body}"
        f'<script src="/static/console.js"></script>{scripts}</body></html>\n'
    )


def _status_text(status: str) -> str:
    extra = {"running": "Running", "starting": "Starting"}
    return extra.get(status, STATUS_TEXT.get(status, status))


def runs_table(page: Page, statuses: dict[str, str], filt: str | None) -> str:
    """The runs list (one page of it) with its filters and pager."""
    links = ['<a href="/" class="{}">all ({})</a>'.format("" if filt else "on", page_total(page))]
    for status, count in sorted(page.counts.items()):
        on = "on" if status == filt else ""
        query = urlencode({"status": status})
        links.append(f'<a href="/?{query}" class="{on}">{escape(status)} ({count})</a>')
    rows = []
    for s in page.runs:
        status = statuses.get(s.thread_id, s.status)
        duration = timefmt.duration(s.duration_s)
        rows.append(
            f'<tr data-thread="{escape(s.thread_id)}" data-status="{escape(status)}">'
            f'<td><a href="/runs/{escape(s.thread_id)}/">{escape(s.thread_id)}</a></td>'
            f'<td><span class="status status-{escape(status)}">{escape(_status_text(status))}'
            f'</span></td><td class="task">{escape(s.task[:200])}</td>'
            f"<td>{escape(_model_of(s))}</td><td>{escape(_desktop_of(s))}</td>"
            f"<td>{s.steps}</td><td>{escape(format_cost(s.cost_usd) if s.priced else '-')}</td>"
            f"<td>{escape(timefmt.when(s.started))}</td><td>{escape(duration)}</td></tr>"
        )
    if not rows:
        rows.append('<tr><td colspan="9">No runs yet.</td></tr>')
    pager = []
    base = {"status": filt} if filt else {}
    if page.offset > 0:
        query = urlencode({**base, "offset": max(0, page.offset - page.limit)})
        pager.append(f'<a href="/?{query}">newer</a>')
    if page.offset + page.limit < page.total:
        query = urlencode({**base, "offset": page.offset + page.limit})
        pager.append(f'<a href="/?{query}">older</a>')
    shown = f"{page.offset + 1}-{page.offset + len(page.runs)} of {page.total}" if page.runs else ""
    return (
        f'<nav class="filters" aria-label="Filter by status">{"".join(links)}</nav>'
        '<table class="runs"><thead><tr><th>Run</th><th>Status</th><th>Task</th>'
        "<th>Provider / model</th><th>Desktop</th><th>Steps</th><th>Cost</th><th>Started</th>"
        f"<th>How long</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f'<nav class="filters">{escape(shown)} {" ".join(pager)}</nav>'
    )


def page_total(page: Page) -> int:
    return sum(page.counts.values())


def _model_of(s: RunSummary) -> str:
    return " / ".join(x for x in (s.provider, s.model) if x) or "-"


def _desktop_of(s: RunSummary) -> str:
    return s.desktop or "-"


def runs_page(defaults: Defaults, table: str) -> str:
    """The front page: the start form and the runs list."""
    spec = defaults.spec
    desks = "".join(
        f'<option value="{escape(d.name)}">{escape(d.name)} ({escape(d.kind)})</option>'
        for d in defaults.desktops
    )
    confirm = " ".join(spec.get("confirm_actions") or [])
    step_limit = spec.get("step_limit", "")
    max_cost = spec.get("max_cost") or ""
    body = (
        '<main class="console-main"><h1>Start a run</h1>'
        '<form class="start" id="start-form">'
        '<label class="wide">Task<textarea name="task" required '
        'placeholder="What to do, in plain words"></textarea></label>'
        f'<label>Provider<input name="provider" value="{escape(str(spec.get("provider") or ""))}"'
        ' placeholder="gemini"></label>'
        f'<label>Model<input name="model" value="{escape(str(spec.get("model") or ""))}"'
        ' placeholder="the provider\'s default"></label>'
        f'<label>Desktop<select name="desktop">{desks}</select></label>'
        f'<label>Actions that need approval<input name="confirm" value="{escape(confirm)}" '
        'placeholder="click_at type_text_at"></label>'
        f'<label>Step limit<input name="step_limit" type="number" min="1" '
        f'value="{escape(str(step_limit))}"></label>'
        f'<label>Cost cap (USD)<input name="max_cost" type="number" min="0" step="any" '
        f'value="{escape(str(max_cost))}"></label>'
        '<div class="wide"><button type="submit">Start</button></div></form>'
        '<div id="message" role="status" aria-live="polite"></div>'
        f'<h1>Runs</h1><div id="runs">{table}</div></main>'
    )
    return layout("vnc-use console", body, page="runs")


FLEET_NOTE = "No steps yet: no worker has started the run."
SERVED_NOTE = (
    "The steps are in the run's folder on the server's machine: this console does not share "
    "it (run the console with the --runs-dir the server's runs write to)."
)


def fleet_parts(summary: RunSummary, note: str = FLEET_NOTE) -> tuple[str, str]:
    """The header and main part of a run whose folder is not here (a fleet's run no worker
    has started yet, a served run's folder on another machine): its status from the fleet's
    table or the server's thread."""
    status = summary.status
    header = (
        f"<header><h1>vnc-use run <code>{escape(summary.thread_id)}</code></h1>"
        f'<p class="task">{escape(summary.task)}</p>'
        f'<span class="status status-{escape(status)}" data-status="{escape(status)}">'
        f"{escape(_status_text(status))}</span>"
        f'<dl class="facts"><div><dt>Desktop</dt><dd>{escape(_desktop_of(summary))}</dd></div>'
        f"<div><dt>Steps</dt><dd>{summary.steps}</dd></div>"
        f"<div><dt>Cost</dt><dd>{escape(format_cost(summary.cost_usd) if summary.priced else '-')}"
        "</dd></div></dl>"
        + (f'<p class="final">{escape(summary.final_text)}</p>' if summary.final_text else "")
        + (f'<p class="error">{escape(summary.error)}</p>' if summary.error else "")
        + "</header>"
    )
    return header, f'<div class="note">{escape(note)}</div>'


def run_page(
    thread_id: str,
    status: str,
    header: str,
    main: str,
    verbs: list[str],
    *,
    live: bool,
    ended: bool,
    poll: bool = False,
    yours: bool = False,
) -> str:
    """A run's page (see the module's doc); ``yours``: this browser holds the run (its live
    view takes input)."""

    def button(verb: str, label: str) -> str:
        hidden = "" if verb in verbs else " hidden"
        return f'<button type="button" id="do-{verb}" class="{verb}"{hidden}>{label}</button>'

    reason_hidden = "" if "deny" in verbs else " hidden"
    note_hidden = "" if "handback" in verbs else " hidden"
    controls = (
        '<div class="controls">'
        f"{button('approve', 'Approve')}{button('deny', 'Deny')}"
        f'<label id="reason-box"{reason_hidden}>Reason (sent to the model) '
        '<input id="reason" name="reason" aria-label="Reason"></label>'
        f"{button('stop', 'Stop')}{button('resume', 'Resume')}"
        f"{button('takeover', 'Take over')}"
        f'<label id="note-box"{note_hidden}>Note (sent to the model) '
        '<input id="note" name="note" aria-label="Note"></label>'
        f"{button('handback', 'Hand back')}</div>"
        '<div id="message" role="status" aria-live="polite"></div>'
    )
    live_hidden = "" if live else " hidden"
    body = (
        f'<main class="console-main"><div id="run-head">{header}</div>{controls}'
        f'<section class="live" id="live"{live_hidden}><h2>The desktop, live '
        '<small id="live-state">connecting</small></h2><div id="screen"></div></section>'
        f'<div id="steps">{main}</div></main>'
    )
    attrs = (
        f' data-thread="{escape(thread_id)}" data-status="{escape(status)}"'
        f' data-ended="{"1" if ended else "0"}" data-rendered="{time.time():.3f}"'
        f' data-poll="{"1" if poll else "0"}" data-yours="{"1" if yours else "0"}"'
    )
    scripts = '<script type="module" src="/static/live.js"></script>'
    return layout(f"vnc-use run {thread_id}", body, page="run", attrs=attrs, scripts=scripts)
