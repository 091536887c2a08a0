"""Test helpers that users can run too.

* :class:`vnc_use.testing.FakeDesktop` (``vnc_use.testing.fake``): an in-memory desktop that
  records every input, for fast tests of agents (``VncUseAgent(desktop=FakeDesktop(...))``)
  without an X server, VNC or Twisted.
* :class:`vnc_use.testing.OpenAIStandIn` (``vnc_use.testing.openai_standin``): a strict local
  OpenAI-compatible chat-completions server that serves scripted assistant messages in any
  dialect and refuses what strict servers refuse
  (``python -m vnc_use.testing.openai_standin --script script.json --port N``).
* :class:`~vnc_use.testing.openai_responses_standin.OpenAIResponsesStandIn`: a strict local
  OpenAI Responses API with the GA ``computer`` tool, serving scripted ``computer_call``
  batches, safety checks, refusals and errors
  (``python -m vnc_use.testing.openai_standin --api responses --script script.json``).
* ``vnc_use.testing.anthropic_standin.AnthropicStandIn``: a strict local Anthropic Messages
  API (``POST /v1/messages``) for Claude's computer toolset and legacy tools, serving scripted
  turns through the real ``anthropic`` SDK
  (``python -m vnc_use.testing.anthropic_standin --script script.json``).
* ``vnc_use.testing.desktop`` starts a real TigerVNC ``Xvnc`` desktop
  (``python -m vnc_use.testing.desktop``).
* ``vnc_use.testing.probe`` is a full-screen Tk app that records every click, key and
  scroll it receives as JSON lines (``python -m vnc_use.testing.probe --out events.jsonl``),
  plus :class:`~vnc_use.testing.probe.ProbeLog` to read that file from tests.
* ``vnc_use.testing.rfb_front`` greets VNC clients as macOS Screen Sharing, RealVNC,
  UltraVNC or TightVNC, performs Apple's type-30 login (or VncAuth) and relays logged-in
  clients to a real server (``python -m vnc_use.testing.rfb_front --help``).
* ``vnc_use.testing.wayland`` starts headless sway with wayvnc (with or without its
  user/password and a throw-away certificate) and a terminal whose typed lines tests read
  (``python -m vnc_use.testing.wayland --help``).
* ``vnc_use.testing.postgres`` starts a throw-away PostgreSQL cluster (Debian's ``postgresql``
  package) on 127.0.0.1 with a random password, as a non-root user when run as root
  (``python -m vnc_use.testing.postgres``).
* ``vnc_use.testing.rdp_shadow`` starts FreeRDP's shadow server on an X screen (without
  authentication, or with NLA and a user/password), the RDP server the ``--rdp`` tests use.

This package module imports nothing heavy; import the submodules you need
(``FakeDesktop`` and ``OpenAIStandIn`` are loaded on first use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vnc_use.testing.fake import FakeDesktop
    from vnc_use.testing.openai_standin import OpenAIStandIn

__all__ = ["FakeDesktop", "OpenAIStandIn"]


def __getattr__(name: str) -> Any:
    if name == "FakeDesktop":
        from vnc_use.testing.fake import FakeDesktop

        return FakeDesktop
    if name == "OpenAIStandIn":
        from vnc_use.testing.openai_standin import OpenAIStandIn

        return OpenAIStandIn
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
