"""The run folder: events, redacted model exchanges, executed calls and screenshots.

Layout of ``<runs_dir>/<thread_id>/``::

    run.json                    settings of the run (server address, model, budgets; no secrets)
    events.jsonl                one JSON object per event, in order
    screenshots/<sha256>.png    every distinct PNG, written once (content-addressed)
    steps/0003-click_at.png     the screenshot after step 3 (a hard link into screenshots/)
    steps/0003-click_at.json    the executed call of step 3: grid and pixel coordinates, result
    model/0002-request.json     the request of model call 2, images replaced by sha256 + size
    model/0002-response.json    its response

Nothing written here may contain a secret: every string passes through :class:`Redactor`.

A folder may have a :class:`FolderStore` (a fleet's database): every screenshot, event and
JSON file written is handed to it as it is written, and a screenshot the folder lacks (taken
on another host) is fetched from it. The folder is then a cache of what the store holds.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from vnc_use.record.tally import EVENTS, Tally

log = logging.getLogger(__name__)

REDACTED = "[REDACTED]"
_SECRET_KEY_NAMES = re.compile(
    r"(api[_-]?key|password|passwd|secret|authorization|(^|_)token$)", re.I
)
_THREAD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

EventListener = Callable[[dict[str, Any]], None]

STEP_EVENTS = frozenset(
    {
        "model_request",
        "model_response",
        "screenshot",
        "screen_not_settled",
        "action",
        "observe",
        "stall_detected",
        "stall_continued",
    }
)
"""The events of a step, which fold into the run's tally without writing ``summary.json``:
:meth:`RunFolder.keep_summary` writes it once a step (see :meth:`RunFolder._keep_tally`)."""


class FolderStore(Protocol):
    """Where a run folder's content also lives (e.g. :mod:`vnc_use.fleet.blobs`): what the
    folder writes is put there at once; a screenshot the folder lacks is fetched from it."""

    def put_screenshot(self, thread_id: str, sha: str, png: bytes) -> None:
        """Keep ``png`` (named by its ``sha``) as a screenshot of run ``thread_id``; raises
        when it cannot (a run whose history cannot be kept must not go on)."""

    def fetch_screenshot(self, sha: str) -> bytes | None:
        """The PNG stored under ``sha`` (None: the store has none)."""

    def put_event(self, thread_id: str, line: str) -> None:
        """Keep one line of the run's ``events.jsonl``."""

    def put_file(self, thread_id: str, relative: str, data: bytes) -> None:
        """Keep a JSON file the folder wrote (``run.json``, ``steps/...``)."""


def check_thread_id(thread_id: str) -> str:
    """Return ``thread_id`` if it is safe as a folder name, else raise ``ValueError``."""
    if not _THREAD_ID.match(thread_id):
        raise ValueError(
            f"invalid thread id {thread_id!r}: use 1-128 letters, digits, '.', '_' or '-'"
        )
    return thread_id


class Redactor:
    """Replaces known secret values, and values under secret-looking keys, with ``[REDACTED]``."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets = sorted({s for s in secrets if s and len(s) >= 3}, key=len, reverse=True)

    def text(self, value: str) -> str:
        """Redact every occurrence of a secret in ``value``."""
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def __call__(self, obj: Any) -> Any:
        """Return a redacted deep copy of a JSON-able object."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            out: dict[str, Any] = {}
            for key, value in obj.items():
                if _secret_key(key) and value:
                    out[key] = REDACTED
                else:
                    out[key] = self(value)
            return out
        if isinstance(obj, (list, tuple)):
            return [self(v) for v in obj]
        return obj


def _secret_key(key: object) -> bool:
    """A key whose value is a secret: ``password``, ``api_key``, ... but not the *name* of
    the variable holding one (``vnc_password_env``: a name, kept so that a run can be
    resumed)."""
    return isinstance(key, str) and bool(_SECRET_KEY_NAMES.search(key)) and not key.endswith("_env")


def _image_stub(data: Any, mime: Any) -> dict[str, Any]:
    raw: bytes
    if isinstance(data, (bytes, bytearray)):
        raw = bytes(data)
    elif isinstance(data, str):
        try:
            raw = base64.b64decode(data, validate=False)
        except (binascii.Error, ValueError):
            raw = data.encode()
    else:
        raw = b""
    return {"mime_type": mime, "sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(raw)}


def strip_images(obj: Any) -> Any:
    """Replace each inline blob (``{"data", "mime_type"}``, any spelling) by its sha256 and size."""
    if isinstance(obj, dict):
        mime = obj.get("mime_type", obj.get("mimeType"))
        if "data" in obj and mime is not None:
            return _image_stub(obj["data"], mime)
        return {k: strip_images(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strip_images(v) for v in obj]
    return obj


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def json_default(value: Any) -> Any:
    """How a value JSON has no type for is written (bytes by size and digest, sets sorted)."""
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": len(value), "sha256": hashlib.sha256(value).hexdigest()}
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    return str(value)


class RunFolder:
    """Everything a run leaves on disk, under ``<runs_dir>/<thread_id>/``."""

    def __init__(
        self,
        runs_dir: str | os.PathLike[str],
        thread_id: str,
        *,
        secrets: Iterable[str | None] = (),
        store: FolderStore | None = None,
    ) -> None:
        self.thread_id = check_thread_id(thread_id)
        self.store = store
        self.path = Path(runs_dir) / thread_id
        self.redact = Redactor(secrets)
        self._listeners: list[EventListener] = []
        self._lock = threading.Lock()
        self._tally: Tally | None = None
        self._tally_behind = False  # the tally holds events summary.json does not have yet
        for sub in ("screenshots", "steps", "model"):
            (self.path / sub).mkdir(parents=True, exist_ok=True)

    # -- events ------------------------------------------------------------------------------
    def add_listener(self, listener: EventListener) -> None:
        """Call ``listener(event)`` for every event written from now on."""
        self._listeners.append(listener)

    def event(self, event: str, /, **fields: Any) -> dict[str, Any]:
        """Append one event to ``events.jsonl`` (redacted) and pass it to the listeners."""
        record: dict[str, Any] = self.redact(
            {"ts": round(time.time(), 3), "event": event, **fields}
        )
        line = json.dumps(record, default=json_default, ensure_ascii=False)
        data = (line + "\n").encode("utf-8")
        with self._lock:
            with (self.path / EVENTS).open("ab") as fh:
                before = os.fstat(fh.fileno()).st_size
                fh.write(data)
                fh.flush()
                after = os.fstat(fh.fileno()).st_size
            if self.store is not None:  # in the lock: the store keeps the folder's order
                try:
                    self.store.put_event(self.thread_id, line)
                except Exception:  # the event is in the folder; the run goes on
                    log.exception("could not store an event of run %s", self.thread_id)
            self._keep_tally(data, before, after, event)
        for listener in self._listeners:
            try:
                listener(record)
            except Exception:  # a broken listener must not break the run
                log.exception("event listener failed")
        return record

    def keep_summary(self) -> None:
        """Write ``summary.json`` now if events folded since it was last written are not in
        it. The agent calls it once a step, as it starts waiting for the model (so the runs
        list reads a current summary for the whole wait); the events within a step only
        fold into the tally in memory (see :meth:`_keep_tally`)."""
        with self._lock:
            tally = self._tally
            if tally is None or not self._tally_behind:
                return
            self._tally_behind = False
            try:
                tally.write(self.path)
            except OSError as exc:  # listing the run reads the events instead
                log.debug("could not keep the summary of run %s: %s", self.thread_id, exc)

    def _keep_tally(self, data: bytes, before: int, after: int, kind: str) -> None:
        """Fold the event just appended (``data``, from byte ``before``) into the run's
        tally: what the runs list shows without reading the events again. Events this folder
        did not write (a resume's earlier ones, another process's) are read from the file
        first; when another writer raced this one, the tally is dropped (readers then read
        the events, see :mod:`vnc_use.record.tally`).

        ``summary.json`` is written at once for an event that is not one of a step's own
        (:data:`STEP_EVENTS`) or that changes the run's status (``run_started``,
        ``run_paused``, ``run_ended``, ``resumed``...): a finished or paused run's summary is
        current. A step's own events wait for :meth:`keep_summary` (issue 43: rewriting the
        file for each of them cost a step about 5 ms). A summary left behind by a crash is
        never wrong, only not read: readers trust it only while it covers the whole file."""
        try:
            tally = self._tally
            if tally is None or tally.events_bytes != before:
                tally = Tally.of_file(self.path, upto=before)
                if tally.events_bytes != before:  # the file changed meanwhile
                    self._tally = None
                    return
            status = tally.status
            tally.add_lines(data)
            if after != before + len(data):  # another writer's line is in between
                self._tally = None
                return
            self._tally = tally
            if kind in STEP_EVENTS and tally.status == status:
                self._tally_behind = True
                return
            self._tally_behind = False
            tally.write(self.path)
        except OSError as exc:  # the event is written; listing the run reads it instead
            self._tally = None
            log.debug("could not keep the summary of run %s: %s", self.thread_id, exc)

    def events(self) -> list[dict[str, Any]]:
        """All events written so far."""
        path = self.path / "events.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]

    # -- JSON files ---------------------------------------------------------------------------
    def write_json(self, relative: str, obj: Any) -> Path:
        """Write ``obj`` (images stripped, secrets redacted) as pretty JSON under the run folder."""
        path = self.path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(
            self.redact(strip_images(obj)), indent=1, default=json_default, ensure_ascii=False
        )
        data = text.encode("utf-8")
        _atomic_write(path, data)
        if self.store is not None:
            try:
                self.store.put_file(self.thread_id, relative, data)
            except Exception:
                log.exception("could not store %s of run %s", relative, self.thread_id)
        return path

    def update_json(self, relative: str, **fields: Any) -> Path:
        """Set ``fields`` in a JSON object file of the run folder (created when missing)."""
        try:
            obj = self.read_json(relative)
        except (OSError, ValueError):
            obj = {}
        if not isinstance(obj, dict):
            obj = {}
        obj.update(fields)
        return self.write_json(relative, obj)

    def read_json(self, relative: str) -> Any:
        """Read a JSON file of the run folder."""
        return json.loads((self.path / relative).read_text("utf-8"))

    def write_model_exchange(self, n: int, request: Any, response: Any) -> None:
        """Keep the raw request and response of model call ``n``."""
        self.write_json(f"model/{n:04d}-request.json", request)
        self.write_json(f"model/{n:04d}-response.json", response)

    # -- screenshots --------------------------------------------------------------------------
    def put_screenshot(self, png: bytes) -> str:
        """Store a PNG once under its sha256 and return the digest."""
        sha = hashlib.sha256(png).hexdigest()
        path = self.screenshot_path(sha)
        if not path.exists():
            _atomic_write(path, png)
        if self.store is not None:  # before the step's checkpoint names it
            self.store.put_screenshot(self.thread_id, sha, png)
        return sha

    def screenshot_path(self, sha: str) -> Path:
        """Where the PNG with this digest lives."""
        if not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise ValueError(f"not a sha256 digest: {sha!r}")
        return self.path / "screenshots" / f"{sha}.png"

    def load_screenshot(self, sha: str) -> bytes:
        """The PNG bytes stored under ``sha`` (fetched from the folder's store when the folder
        lacks it: taken on another host)."""
        path = self.screenshot_path(sha)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            found = self.store.fetch_screenshot(sha) if self.store is not None else None
            if found is None:
                raise
            _atomic_write(path, found)
            return found

    def write_step(self, step: int, name: str, record: dict[str, Any], sha: str | None) -> None:
        """Keep the executed call of ``step`` and link its screenshot as ``steps/NNNN-name.png``."""
        stem = f"steps/{step:04d}-{re.sub(r'[^A-Za-z0-9_]', '_', name)[:40]}"
        self.write_json(f"{stem}.json", record)
        if sha is None:
            return
        link = self.path / f"{stem}.png"
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        try:
            os.link(self.screenshot_path(sha), link)
        except OSError:  # file systems without hard links
            _atomic_write(link, self.load_screenshot(sha))
