// The live desktop of a run: noVNC (Debian's package) over the console's own WebSocket. View
// only, except for the browser that holds the run (it took it over): the console decides that
// when the WebSocket opens and enforces it itself; the page follows (viewOnly) and reconnects
// when it changes. The console logs in to the VNC server itself: this page never sees a
// password.
import RFB from "/novnc/core/rfb.js";

const box = document.getElementById("screen");
const state = document.getElementById("live-state");
let rfb = null;
let mode = null;    // "interactive" or "view only": what the open session was made for
let failures = 0;   // a view that keeps failing stops trying (a server counts failed logins)

function wanted() {
  return document.body.dataset.yours === "1" ? "interactive" : "view only";
}

function connect() {
  if (rfb && mode !== wanted()) {   // taken over or handed back: a session of the other kind
    rfb.viewOnly = true;
    rfb.disconnect();
    return;   // its disconnect event connects again
  }
  if (rfb || failures >= 3 || document.getElementById("live").hidden) { return; }
  let connected = false;
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  mode = wanted();   // the console gives input only to the holder's page that asks for it
  const url = scheme + location.host + location.pathname.replace(/[^/]*$/, "") + "websockify" +
    (mode === "interactive" ? "?input=1" : "");
  const mine = new RFB(box, url, { shared: true });
  rfb = mine;
  mine.viewOnly = mode !== "interactive";
  mine.scaleViewport = true;
  mine.addEventListener("connect", () => {
    connected = true;
    failures = 0;
    state.textContent = "connected (" + (mine.viewOnly ? "view only" : "your input reaches the desktop") + ")";
    box.dataset.state = "connected";
    box.dataset.mode = mine.viewOnly ? "view only" : "interactive";
    sessionStorage.setItem("vnc-use-live-" + document.body.dataset.thread, "connected");
  });
  mine.addEventListener("disconnect", () => {
    if (!connected) { failures += 1; }
    state.textContent = failures >= 3 ? "not available" : "disconnected";
    box.dataset.state = "disconnected";
    if (rfb === mine) { rfb = null; mode = null; }
    setTimeout(connect, 100);
  });
  window.vncUseRfb = mine;
}

connect();
window.addEventListener("vnc-use-live", connect);
setInterval(connect, 2000);
