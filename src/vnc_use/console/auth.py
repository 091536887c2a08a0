"""The console's one guard: a login token, for every page, file, API call and WebSocket.

* ``GET /any/path?token=T`` with the right token sets the ``vnc_use_console`` cookie
  (HttpOnly, SameSite=Strict, path ``/``) and redirects to the same path without the token, so
  it leaves the address bar;
* after that the cookie carries it; scripts send ``Authorization: Bearer T`` instead;
* anything else is a 401 (JSON under ``/api/``, a short page elsewhere; a WebSocket is refused
  with a 401 before it opens);
* a state-changing request (POST) that carries only the cookie must come from the console's
  own pages: its ``Origin`` (or ``Sec-Fetch-Site``) must say so, else 403, so no form on
  another site can approve an action.

Tokens are compared in constant time; the token is never logged.
"""

from __future__ import annotations

import hmac
import json
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["COOKIE", "TokenGuard"]

COOKIE = "vnc_use_console"
_UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


class TokenGuard:
    """ASGI middleware (see the module's doc)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    def _ok(self, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(str(given).encode(), self.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        bearer = headers.get("authorization", "")
        by_bearer = bearer.lower().startswith("bearer ") and self._ok(bearer[7:].strip())
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header: as if there were none
            cookie = SimpleCookie()
        by_cookie = COOKIE in cookie and self._ok(cookie[COOKIE].value)
        method = scope.get("method", "GET")
        if scope["type"] == "http" and method == "GET" and self._ok(query.get("token")):
            rest = {k: v for k, v in query.items() if k != "token"}
            await self._login(send, scope["path"] + (f"?{urlencode(rest)}" if rest else ""))
            return
        if not (by_bearer or by_cookie):
            await self._refuse(
                scope,
                send,
                401,
                "no valid console token: open the URL that "
                "'vnc-use console' printed, or send Authorization: Bearer TOKEN",
            )
            return
        unsafe = scope["type"] == "http" and method in _UNSAFE and not by_bearer
        if unsafe and not _same_origin(scope, headers):
            await self._refuse(
                scope,
                send,
                403,
                "a cross-site request was refused: use "
                "the console's own page, or send Authorization: Bearer TOKEN",
            )
            return
        await self.app(scope, receive, send)

    async def _login(self, send: Send, location: str) -> None:
        cookie = f"{COOKIE}={self.token.decode()}; HttpOnly; SameSite=Strict; Path=/"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location.encode("latin-1")),
                    (b"set-cookie", cookie.encode("latin-1")),
                    (b"cache-control", b"no-store"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"content-length", b"0"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})

    async def _refuse(self, scope: Scope, send: Send, status: int, message: str) -> None:
        if scope["type"] == "websocket":
            if "websocket.http.response" in scope.get("extensions", {}):
                await _send_http(send, status, message, "websocket.http.response")
            else:
                await send({"type": "websocket.close", "code": 4000 + status})
            return
        await _send_http(send, status, message, "http.response")


async def _send_http(send: Send, status: int, message: str, kind: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers: list[Any] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
    ]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="vnc-use console"'))
    await send({"type": f"{kind}.start", "status": status, "headers": headers})
    await send({"type": f"{kind}.body", "body": body})


def _same_origin(scope: Scope, headers: dict[str, str]) -> bool:
    """The request comes from the console's own pages (its Origin is the console's)."""
    origin = headers.get("origin")
    if origin is not None:
        host = headers.get("host", "")
        scheme = scope.get("scheme", "http")
        return origin in (f"{scheme}://{host}",)
    site = headers.get("sec-fetch-site")
    return site in (None, "same-origin", "none")
