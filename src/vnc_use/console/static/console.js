// The console's pages: the start form, the live runs list, a run's page (its steps as they
// happen, the approval, Stop and Resume, Take over and Hand back). Plain JavaScript, no build
// step.
"use strict";

const page = document.body.dataset.page;

async function post(url, body) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body || {}),
  });
  let data = {};
  try { data = await response.json(); } catch (e) { data = {}; }
  return { ok: response.ok, status: response.status, data: data };
}

function say(text, bad) {
  const box = document.getElementById("message");
  box.textContent = text;
  box.dataset.bad = bad ? "1" : "";
}

if (page === "runs") {
  const form = document.getElementById("start-form");
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = new FormData(form);
    const body = { task: String(f.get("task") || "") };
    for (const k of ["provider", "model", "desktop"]) {
      if (f.get(k)) { body[k] = String(f.get(k)); }
    }
    const confirm = String(f.get("confirm") || "").split(/[\s,]+/).filter(Boolean);
    if (confirm.length) { body.confirm = confirm; }
    if (f.get("step_limit")) { body.step_limit = Number(f.get("step_limit")); }
    if (f.get("max_cost")) { body.max_cost = Number(f.get("max_cost")); }
    say("starting...", false);
    const r = await post("/api/runs", body);
    if (r.ok) { location.href = r.data.url; } else { say(r.data.error || "error " + r.status, true); }
  });
  const table = document.getElementById("runs");
  setInterval(async () => {
    const r = await fetch("/fragments/runs" + location.search, { cache: "no-store" });
    if (r.ok) { table.innerHTML = await r.text(); }
  }, 2000);
}

if (page === "run") {
  const id = document.body.dataset.thread;
  const head = document.getElementById("run-head");
  const steps = document.getElementById("steps");
  const live = document.getElementById("live");
  // event id -> when the page showed it (ms since the epoch); kept over the page's reloads
  const seenKey = "vnc-use-seen-" + id;
  window.vncUseSeen = JSON.parse(sessionStorage.getItem(seenKey) || "{}");
  let lastId = 0, timer = null, busy = false, again = false;

  const verbs = ["approve", "deny", "stop", "resume", "takeover", "handback"];

  function controls(shown) {
    for (const verb of verbs) {
      document.getElementById("do-" + verb).hidden = !shown.includes(verb);
    }
    document.getElementById("reason-box").hidden = !shown.includes("deny");
    document.getElementById("note-box").hidden = !shown.includes("handback");
  }

  async function refresh() {
    timer = null;
    if (busy) { again = true; return; }
    busy = true;
    const upTo = lastId;
    try {
      const r = await fetch("fragment", { cache: "no-store" });
      if (r.ok) {
        const data = await r.json();
        const wasEnded = document.body.dataset.ended === "1";
        head.innerHTML = data.header;
        document.body.dataset.status = data.status;
        document.body.dataset.ended = data.ended ? "1" : "0";
        controls(data.verbs);
        steps.innerHTML = data.main;
        live.hidden = !data.live;
        document.body.dataset.yours = data.yours ? "1" : "0";
        if (data.live) { window.dispatchEvent(new Event("vnc-use-live")); }
        const now = Date.now();
        for (let i = 1; i <= upTo; i++) {
          if (!(i in window.vncUseSeen)) { window.vncUseSeen[i] = now; }
        }
        sessionStorage.setItem(seenKey, JSON.stringify(window.vncUseSeen));
        if (data.ended && !wasEnded) {
          location.reload();   // the ended run's page: with its video and seek buttons
          return;
        }
      }
    } finally {
      busy = false;
      if (again) { again = false; refresh(); }
    }
  }

  function onEvent(e) {
    if (e.lastEventId) { lastId = Math.max(lastId, Number(e.lastEventId)); }
    if (e.type === "console") {
      const data = JSON.parse(e.data);
      if (data.message) { say(data.message, true); }
    }
    if (!timer) { timer = setTimeout(refresh, 30); }
  }

  if (document.body.dataset.poll === "1") {   // a fleet's run: its table changes too
    setInterval(() => { if (!timer) { timer = setTimeout(refresh, 0); } }, 1500);
  }

  const names = ["message", "console", "run_started", "observe", "model_request",
    "model_response", "action", "run_paused", "approved", "denied", "resumed", "run_ended",
    "stall_detected", "error", "interrupted", "reconnected", "connection_lost", "taken_over",
    "handed_back"];
  window.vncUseEvents = new EventSource("/api/runs/" + encodeURIComponent(id) + "/events");
  for (const name of names) { window.vncUseEvents.addEventListener(name, onEvent); }

  for (const verb of verbs) {
    document.getElementById("do-" + verb).addEventListener("click", async () => {
      const body = {};
      const reason = document.getElementById("reason").value;
      if (verb === "deny" && reason) { body.reason = reason; }
      const note = document.getElementById("note").value;
      if (verb === "handback" && note) { body.note = note; }
      if (verb === "handback") {   // view only again at once, before the server says so
        document.body.dataset.yours = "0";
        window.dispatchEvent(new Event("vnc-use-live"));
      }
      say(verb + "...", false);
      const r = await post("/api/runs/" + encodeURIComponent(id) + "/" + verb, body);
      say(r.ok ? (r.data.message || verb + ": done") : (r.data.error || "error " + r.status), !r.ok);
      refresh();
    });
  }
}
