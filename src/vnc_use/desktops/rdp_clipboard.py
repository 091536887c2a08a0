"""``--rdp-paste-text``: text the RDP keyboard path cannot type goes through the RDP clipboard.

FreeRDP 2's X11 client sends US scancodes only, so ``é`` or ``日本`` cannot be typed over
RDP (:mod:`vnc_use.desktops.keyboard`). With ``--rdp-paste-text`` the bridge's ``xfreerdp``
runs with clipboard redirection (``+clipboard``) and :class:`ClipboardPaster` does, on the
bridge's private X display:

1. read what the clipboard holds now (the remote clipboard, through FreeRDP), as text;
2. offer the text as the bridge's CLIPBOARD (``xclip``), wait until FreeRDP has announced it
   to the server (its clipboard channel logs ``ServerFormatListResponse``);
3. press Ctrl+V on the remote desktop and wait until the remote side fetched the text
   (``xclip`` served it: the remote app asked for it) — else one line says it did not go;
4. offer the old text again (and wait for the server to take it), so the remote clipboard
   holds what it held before (text only; a clipboard that held no text is left empty).

Every wait has a deadline; FreeRDP's log (the run folder's ``freerdp.log``) is read only for
the clipboard channel's status lines. The helper processes are stopped by PID.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from vnc_use.desktops.xserver import stop_process
from vnc_use.errors import VncUseError

__all__ = ["ClipboardPaster", "RdpPasteError"]

_ANNOUNCED = "ServerFormatListResponse"
_SERVED = "Waiting for selection request number"


class RdpPasteError(VncUseError):
    """The text did not go through the RDP clipboard (one line: what, and why)."""


class ClipboardPaster:
    """Pastes text on the RDP desktop behind the bridge on X display ``env["DISPLAY"]``."""

    def __init__(
        self, xclip: str, env: dict[str, str], freerdp_log: Path, timeout: float = 5.0
    ) -> None:
        self.xclip = xclip
        self.env = env
        self.freerdp_log = freerdp_log
        self.timeout = timeout
        self._owner: _Offer | None = None
        self._lock = threading.Lock()

    def paste(self, text: str, press_paste: Callable[[], None]) -> None:
        """Offer ``text``, press Ctrl+V (``press_paste``), restore the clipboard."""
        with self._lock:
            before = self._read()
            self._offer(text)
            assert self._owner is not None
            press_paste()
            served = self._owner.wait_served(self.timeout)
            self._offer(before)
            if not served:
                raise RdpPasteError(
                    f"the remote desktop did not take the pasted text within {self.timeout:g} s "
                    "(no app there asked for the clipboard after Ctrl+V: is a text field "
                    "focused?); nothing was typed"
                )

    def close(self) -> None:
        """Stop the ``xclip`` that holds the restored clipboard."""
        with self._lock:
            if self._owner is not None:
                self._owner.stop()
                self._owner = None

    # -- steps ----------------------------------------------------------------------------
    def _read(self) -> str | None:
        """The clipboard's text now (None: it holds no text)."""
        try:
            result = subprocess.run(
                [self.xclip, "-selection", "clipboard", "-o", "-t", "UTF8_STRING"],
                env=self.env,
                capture_output=True,
                timeout=self.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return None
        if result.returncode != 0:
            return None
        return result.stdout.decode("utf-8", errors="replace")

    def _offer(self, text: str | None) -> None:
        """Make ``text`` the clipboard (None: release it) and wait until the server knows."""
        announced = self._announcements()
        if self._owner is not None:
            self._owner.stop()
            self._owner = None
        if text is None:
            return
        self._owner = _Offer(self.xclip, self.env, text)
        deadline = time.monotonic() + self.timeout
        while self._announcements() <= announced:
            if time.monotonic() > deadline or not self._owner.alive():
                raise RdpPasteError(
                    f"FreeRDP did not hand the clipboard to the RDP server within "
                    f"{self.timeout:g} s (does the server allow clipboard redirection?); "
                    f"see {self.freerdp_log}"
                )
            time.sleep(0.02)

    def _announcements(self) -> int:
        try:
            return self.freerdp_log.read_text(errors="replace").count(_ANNOUNCED)
        except OSError:
            return 0


class _Offer:
    """One ``xclip`` holding the bridge's CLIPBOARD, counting the requests it served."""

    def __init__(self, xclip: str, env: dict[str, str], text: str) -> None:
        self.proc = subprocess.Popen(
            [xclip, "-selection", "clipboard", "-i", "-quiet", "-verbose"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._served = threading.Event()
        self._waiting = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        with contextlib.suppress(BrokenPipeError):
            self.proc.stdin.write(text.encode("utf-8"))
            self.proc.stdin.close()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if _SERVED.encode() in line:
                self._waiting += 1
                if self._waiting >= 2:  # waiting for the 2nd: the 1st was served
                    self._served.set()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_served(self, timeout: float) -> bool:
        """Whether the text was fetched (by the remote side) within ``timeout`` s."""
        return self._served.wait(timeout)

    def stop(self) -> None:
        stop_process(self.proc)
        self._reader.join(timeout=2)
