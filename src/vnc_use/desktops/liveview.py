"""A live view of a VNC desktop in the browser: noVNC's client, websockify's proxy, one token.

>>> with LiveView("127.0.0.1", 5901, view_password) as view:   # doctest: +SKIP
...     print(view.url)         # http://127.0.0.1:6080/<token>/

One small HTTP server on 127.0.0.1 serves, under ``/<token>/`` only:

* ``/<token>/`` - a page that runs noVNC's RFB client (``core/rfb.js`` from Debian's
  ``novnc`` package, ``/usr/share/novnc``) scaled to the window;
* ``/<token>/core/...``, ``/<token>/vendor/...`` - noVNC's modules (nothing else of the disk);
* ``/<token>/credentials.json`` - the VNC password the page logs in with (``no-store``);
* ``/<token>/websockify`` - the WebSocket that websockify's proxy handler relays to the VNC
  server's TCP port.

Every other path, and every path with a wrong token (compared in constant time), is a 404,
for plain HTTP and WebSocket upgrades alike. The token is 192 random bits, made per server.

**View-only is enforced by the VNC server, not by the page.** The view gets the password it
is given; for the managed desktop that is its *view-only* password, and Xvnc ignores every key
and pointer event of a session that logged in with it, whatever a person does to the page or
its URL. ``interactive=True`` hands out the full password instead. The page also sets noVNC's
``viewOnly`` so it does not try to send input, but that is a courtesy, not the guard.

**Trade-off of the token in the URL:** whoever has the URL can watch (or, with
``interactive``, use) the desktop while the server runs - it lands in the terminal that started
the server and in the browser's history. It never leaves the machine (the server listens on
127.0.0.1 only), the VNC password itself is never put in the URL or printed, and the token
dies with the server.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import secrets
import socket
import threading
from http.server import HTTPServer
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import urlsplit

from websockify.websocketproxy import ProxyRequestHandler  # type: ignore[import-untyped]

from vnc_use import config
from vnc_use.desktops.service import Service
from vnc_use.errors import ConfigError

__all__ = ["DEFAULT_NOVNC_DIR", "ENV_NOVNC_DIR", "LiveView", "find_novnc"]

log = logging.getLogger(__name__)

#: Where Debian's and Ubuntu's ``novnc`` package installs the web client.
DEFAULT_NOVNC_DIR = Path("/usr/share/novnc")
#: Environment variable naming another noVNC folder (one that has ``core/rfb.js``).
ENV_NOVNC_DIR = config.NOVNC_DIR_VARIABLE
_STATIC_ROOTS = ("core", "vendor")

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="referrer" content="no-referrer">
<title>vnc-use live view</title>
<style>
  html, body { height: 100%; margin: 0; background: #202428; }
  body { display: flex; flex-direction: column; }
  #bar { font: 13px sans-serif; color: #eee; background: #33393f; padding: 4px 8px; }
  #screen { flex: 1; overflow: hidden; }
</style>
</head>
<body data-state="loading" data-mode="__MODE__">
<div id="bar">vnc-use live view (__MODE_TEXT__): <span id="status">loading</span></div>
<div id="screen"></div>
<script type="module">
import RFB from "./core/rfb.js";
const setState = (state, text) => {
  document.body.dataset.state = state;
  document.getElementById("status").textContent = text || state;
};
const response = await fetch("credentials.json", { cache: "no-store" });
if (!response.ok) {
  setState("error", "no credentials (" + response.status + ")");
} else {
  const creds = await response.json();
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  const url = scheme + location.host + location.pathname.replace(/[^/]*$/, "") + "websockify";
  const rfb = new RFB(document.getElementById("screen"), url,
                      { credentials: { password: creds.password }, shared: true });
  rfb.viewOnly = creds.view_only;
  rfb.scaleViewport = true;
  rfb.addEventListener("connect", () => setState("connected"));
  rfb.addEventListener("disconnect", (e) =>
    setState("disconnected", e.detail.clean ? "disconnected" : "connection lost"));
  rfb.addEventListener("securityfailure", (e) =>
    setState("denied", "refused by the VNC server: " + (e.detail.reason || e.detail.status)));
  rfb.addEventListener("desktopname", (e) => { document.title = e.detail.name + " - live view"; });
  window.vncUseRfb = rfb;
}
</script>
</body>
</html>
"""


def find_novnc(novnc_dir: str | Path | None = None) -> Path:
    """The noVNC folder to serve (``novnc_dir``, ``$VNC_USE_NOVNC_DIR``, /usr/share/novnc).

    Raises :class:`ConfigError` with the install command when it has no ``core/rfb.js``.
    """
    from vnc_use.desktops.local import install_command

    folder = Path(novnc_dir or config.novnc_dir() or DEFAULT_NOVNC_DIR)
    if not (folder / "core" / "rfb.js").is_file():
        raise ConfigError(
            f"the live view needs noVNC, which is not in {folder}; "
            f"run: {install_command(['novnc'])}"
        )
    return folder.resolve()


class _Handler(ProxyRequestHandler):  # type: ignore[misc]
    """websockify's proxy handler behind a token check, serving our page and noVNC's files."""

    server: _Server

    def _route(self) -> str | None:
        """The path after ``/<token>`` when the token is right, else None."""
        parts = urlsplit(self.path).path.split("/", 2)  # "", token, rest
        if len(parts) != 3 or parts[0]:
            return None
        if not hmac.compare_digest(parts[1].encode(), self.server.token.encode()):
            return None
        return "/" + parts[2]

    def handle_upgrade(self) -> None:
        if self._route() != "/websockify":
            self.send_error(404)
            return
        super().handle_upgrade()

    def do_GET(self) -> None:
        route = self._route()
        if route is None:
            self.send_error(404)
        elif route == "/":
            self._send(_PAGE_FOR[self.server.interactive].encode(), "text/html; charset=utf-8")
        elif route == "/credentials.json":
            body = {"password": self.server.password, "view_only": not self.server.interactive}
            self._send(json.dumps(body).encode(), "application/json")
        elif route.split("/")[1] in _STATIC_ROOTS and ".." not in route.split("/"):
            self.path = route
            super().do_GET()
        else:
            self.send_error(404)

    def do_HEAD(self) -> None:
        self.send_error(405)

    def translate_path(self, path: str) -> str:
        self.directory = str(self.server.novnc_dir)
        result: str = super().translate_path(path)
        return result

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()

    def _send(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        # The token is in every request line: keep it out of the log.
        log.debug("live view: %s", (format % args).replace(self.server.token, "<token>"))


def _page(interactive: bool) -> str:
    mode = "interactive" if interactive else "view-only"
    text = "interactive: your input reaches the desktop" if interactive else "view only"
    return _PAGE.replace("__MODE__", mode).replace("__MODE_TEXT__", text)


_PAGE_FOR = {False: _page(False), True: _page(True)}


class _Server(ThreadingMixIn, HTTPServer):
    """The HTTP server, with the attributes websockify's handler reads from it."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        *,
        target: tuple[str, int],
        password: str,
        interactive: bool,
        token: str,
        novnc_dir: Path,
    ) -> None:
        self.target_host, self.target_port = target
        self.password = password
        self.interactive = interactive
        self.token = token
        self.novnc_dir = novnc_dir
        # What websockify's handler expects to find on its server:
        self.wrap_cmd = None
        self.wrap_mode = None
        self.unix_target = None
        self.unix_listen = None
        self.ssl_target = None
        self.token_plugin = None
        self.auth_plugin = None
        self.heartbeat = None
        self.only_upgrade = False
        self.file_only = True  # no directory listings
        self.verbose = False
        self.daemon = True
        self.record = ""
        self.run_once = False
        self.handler_id = 0
        self.web_auth = False
        self.host_token = False
        self.logger = logging.getLogger("vnc_use.desktops.liveview.websockify")
        self._connections: set[socket.socket] = set()
        self._conn_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        self.handler_id += 1
        with self._conn_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conn_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Cut every open connection (the proxy threads then end)."""
        with self._conn_lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("live view connection from %s ended with an error", client_address, exc_info=True)


class LiveView(Service):
    """Serve a browser view of the VNC server at ``vnc_host:vnc_port`` on 127.0.0.1.

    ``password`` is what the page logs in with: give a view-only password for a view-only
    live view (the VNC server enforces it). ``port=0`` picks a free port. Use :meth:`start`
    (a background thread) and :meth:`stop`, a ``with`` block, or :meth:`serve_forever`.
    """

    def __init__(
        self,
        vnc_host: str,
        vnc_port: int,
        password: str,
        *,
        interactive: bool = False,
        port: int = 0,
        host: str = "127.0.0.1",
        novnc_dir: str | Path | None = None,
    ) -> None:
        if not password:
            raise ConfigError("the live view needs the desktop's VNC password")
        self.interactive = interactive
        self.token = secrets.token_urlsafe(24)
        try:
            self._server = _Server(
                (host, port),
                target=(vnc_host, vnc_port),
                password=password,
                interactive=interactive,
                token=self.token,
                novnc_dir=find_novnc(novnc_dir),
            )
        except OSError as exc:
            raise ConfigError(f"the live view cannot listen on {host}:{port}: {exc}") from None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` the server listens on."""
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        """The URL to open: it carries the token, never the VNC password."""
        host, port = self.address
        return f"http://{host}:{port}/{self.token}/"

    def start(self) -> LiveView:
        """Serve in a daemon thread; returns ``self``."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever, name="vnc-use-live-view", daemon=True
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until :meth:`stop` is called from another (or Ctrl-C)."""
        self._server.serve_forever()

    def stop(self) -> None:
        """Stop serving, cut open connections and close the listening socket."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self._server.close_connections()
        self._server.server_close()
