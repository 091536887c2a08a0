"""PostgreSQL: checkpoints, the action journal and desktop leases (the only psycopg importer).

Installed with the ``postgres`` extra (``langgraph-checkpoint-postgres``, ``psycopg[binary,
pool]``). Every connection is opened the way ``PostgresSaver`` needs (``autocommit=True,
prepare_threshold=0, row_factory=dict_row``): each statement commits on its own, so a journal
record is durable when its ``INSERT`` returns.

A connection string (``postgresql://user:password@host:port/db`` or libpq's ``key=value``
form) may hold a password: it is never written anywhere; :func:`redact` is what run.json, logs
and messages show.

A process may tag its sessions (:func:`tag_sessions`, a fleet worker does: ``vnc-use worker
<id>``): every connection it opens from then on has an ``application_name`` of the tag, or
``<tag>: <name>`` for a connection that names itself (a lease: the run's thread id), so another
process can find and end them all in ``pg_stat_activity`` (:func:`tagged`).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from vnc_use.errors import ConfigError, StorageError
from vnc_use.store.journal import JOURNAL_TABLE

if TYPE_CHECKING:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

__all__ = [
    "PostgresJournalStore",
    "advisory_holder",
    "connect",
    "conninfo_of",
    "is_postgres_url",
    "open_saver",
    "password_of",
    "redact",
    "release_advisory_lock",
    "session_name",
    "tag_sessions",
    "tagged",
    "try_advisory_lock",
]

_INSTALL_HINT = "install the postgres extra: pip install 'vnc-use[postgres]'"
_SCHEMES = ("postgresql://", "postgres://")
_NAME_MAX = 63  # PostgreSQL keeps application_name to NAMEDATALEN - 1 bytes
_TAG_SEP = ": "
_tag: str | None = None


def tag_sessions(tag: str | None) -> None:
    """Name every connection this process opens from now on after ``tag`` (None: stop)."""
    global _tag
    _tag = tag


def session_name(name: str | None = None) -> str | None:
    """The ``application_name`` of a connection that calls itself ``name`` in this process."""
    if _tag is None:
        return name[:_NAME_MAX] if name else None
    return f"{_tag}{_TAG_SEP}{name}"[:_NAME_MAX] if name else _tag


def tagged(application_name: str | None, tag: str) -> bool:
    """Whether a session of that ``application_name`` was opened under ``tag``."""
    name = application_name or ""
    return name == tag or name.startswith(tag + _TAG_SEP)


def is_postgres_url(location: str) -> bool:
    """Whether ``location`` names a PostgreSQL database (a ``postgresql://`` URL)."""
    return location.strip().lower().startswith(_SCHEMES)


def _parts(conninfo: str) -> dict[str, Any]:
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        raise ConfigError(f"PostgreSQL needs psycopg: {_INSTALL_HINT}") from None
    try:
        return dict(conninfo_to_dict(conninfo))
    except Exception:  # psycopg.ProgrammingError; its message may quote the password
        raise ConfigError(
            "the PostgreSQL connection string is malformed; write it as "
            "postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
        ) from None


def password_of(conninfo: str) -> str | None:
    """The password a connection string holds, if any (a secret to redact everywhere)."""
    value = _parts(conninfo).get("password")
    return str(value) if value else None


def redact(conninfo: str) -> str:
    """The connection string as a ``postgresql://`` URL with the password shown as ``***``:
    what may be recorded and shown."""
    parts = _parts(conninfo)
    user = quote(str(parts.pop("user", "")), safe="")
    secret = ":***" if parts.pop("password", None) else ""
    host = str(parts.pop("host", ""))
    port = parts.pop("port", None)
    db = quote(str(parts.pop("dbname", "")), safe="")
    who = f"{user}{secret}@" if user or secret else ""
    where = f"{host}:{port}" if port else host
    query = f"?{urlencode(sorted(parts.items()))}" if parts else ""
    return f"postgresql://{who}{where}/{db}{query}"


def connect(conninfo: str, application_name: str | None = None) -> psycopg.Connection[Any]:
    """A connection as ``PostgresSaver`` needs it; a one-line :class:`StorageError` (with the
    redacted address) when the database cannot be reached."""
    try:
        import psycopg
        from psycopg.conninfo import make_conninfo
        from psycopg.rows import dict_row
    except ImportError:
        raise ConfigError(f"PostgreSQL needs psycopg: {_INSTALL_HINT}") from None
    name = session_name(application_name)
    extra = {"application_name": name} if name else {}
    try:
        conn: psycopg.Connection[Any] = psycopg.connect(
            make_conninfo(conninfo, connect_timeout=10, **extra),
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,
        )
        return conn
    except psycopg.OperationalError as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__  # libpq's lines, as one
        secret = password_of(conninfo)
        if secret:
            reason = reason.replace(secret, "***")
        raise StorageError(
            f"cannot connect to the checkpoint database {redact(conninfo)}: {reason}"
        ) from None


def open_saver(conninfo: str) -> tuple[psycopg.Connection[Any], PostgresSaver]:
    """A ``PostgresSaver`` on its own connection, its tables created (idempotent)."""
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError:
        raise ConfigError(f"PostgreSQL checkpoints need {_INSTALL_HINT}") from None
    conn = connect(conninfo)
    saver = PostgresSaver(conn)
    try:
        saver.setup()
    except BaseException:
        conn.close()
        raise
    return conn, saver


def conninfo_of(saver: Any) -> str | None:
    """The full connection string of a ``PostgresSaver``'s connection or pool (password
    included, for the journal's and the lease's own connections); ``None`` for any other
    checkpointer."""
    try:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.conninfo import make_conninfo
        from psycopg_pool import ConnectionPool
    except ImportError:
        return None
    if not isinstance(saver, PostgresSaver):
        return None
    conn = saver.conn
    if isinstance(conn, ConnectionPool):
        return str(conn.conninfo)
    if isinstance(conn, psycopg.Connection):
        password = conn.info.password
        extra = {"password": password} if password else {}
        return make_conninfo(conn.info.dsn, **extra)
    return None


class PostgresJournalStore:
    """The action journal in PostgreSQL, on a connection of its own (autocommit)."""

    def __init__(self, conninfo: str) -> None:
        self._lock = threading.Lock()
        self._conn = connect(conninfo, application_name="vnc-use journal")
        with self._conn.cursor() as cur:
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {JOURNAL_TABLE} (id BIGSERIAL PRIMARY KEY, "
                "thread_id TEXT NOT NULL, key TEXT NOT NULL, record TEXT NOT NULL)"
            )
            cur.execute(
                f"CREATE INDEX IF NOT EXISTS {JOURNAL_TABLE}_thread "
                f"ON {JOURNAL_TABLE} (thread_id, key)"
            )

    def append(self, thread_id: str, key: str, record: str) -> None:
        with self._lock, self._conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {JOURNAL_TABLE} (thread_id, key, record) VALUES (%s, %s, %s)",
                (thread_id, key, record),
            )

    def load(self, thread_id: str, key: str | None = None) -> list[str]:
        sql = f"SELECT record FROM {JOURNAL_TABLE} WHERE thread_id = %s"
        params: tuple[str, ...] = (thread_id,)
        if key is not None:
            sql, params = sql + " AND key = %s", (thread_id, key)
        with self._lock, self._conn.cursor() as cur:
            cur.execute(sql + " ORDER BY id", params)
            rows = cur.fetchall()
        return [str(row["record"]) for row in rows]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def try_advisory_lock(conn: psycopg.Connection[Any], key: int) -> bool:
    """Take the session-level advisory lock ``key`` if it is free; whether it was taken."""
    with conn.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s) AS taken", (key,))
        row = cur.fetchone()
    return bool(row and row["taken"])


def release_advisory_lock(conn: psycopg.Connection[Any], key: int) -> None:
    """Release the advisory lock ``key`` this session holds."""
    with conn.cursor() as cur:
        cur.execute("SELECT pg_advisory_unlock(%s)", (key,))


def advisory_holder(conn: psycopg.Connection[Any], key: int) -> str | None:
    """The ``application_name`` of the other session that holds the advisory lock ``key``."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT a.application_name AS name FROM pg_locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
            "AND a.pid <> pg_backend_pid() "
            "AND ((l.classid::bigint << 32) | l.objid::bigint) "
            "= (%s::bigint & x'ffffffffffffffff'::bigint)",
            (key,),
        )
        row = cur.fetchone()
    if not (row and row["name"]):
        return None
    name = str(row["name"])  # a tagged session: "<tag>: <holder>"
    return name.split(_TAG_SEP, 1)[1] if _TAG_SEP in name else name
