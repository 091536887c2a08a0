// The live desktop of a run: noVNC (Debian's package) over the console's own WebSocket, view
// only. The console logs in to the VNC server itself: this page never sees a password.
import RFB from "/novnc/core/rfb.js";

const box = document.getElementById("screen");
const state = document.getElementById("live-state");
let rfb = null;
let failures = 0;   // a view that keeps failing stops trying (a server counts failed logins)

function connect() {
  if (rfb || failures >= 3 || document.getElementById("live").hidden) { return; }
  let connected = false;
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  const url = scheme + location.host + location.pathname.replace(/[^/]*$/, "") + "websockify";
  rfb = new RFB(box, url, { shared: true });
  rfb.viewOnly = true;
  rfb.scaleViewport = true;
  rfb.addEventListener("connect", () => {
    connected = true;
    failures = 0;
    state.textContent = "connected (view only)";
    box.dataset.state = "connected";
    sessionStorage.setItem("vnc-use-live-" + document.body.dataset.thread, "connected");
  });
  rfb.addEventListener("disconnect", () => {
    if (!connected) { failures += 1; }
    state.textContent = failures >= 3 ? "not available" : "disconnected";
    box.dataset.state = "disconnected";
    rfb = null;
  });
  window.vncUseRfb = rfb;
}

connect();
window.addEventListener("vnc-use-live", connect);
setInterval(connect, 2000);
