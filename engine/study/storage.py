"""A study's ``study.db`` opened as the untrusted file it may be, before Optuna reads it.

A study folder may come from another machine or another user, and SQLite runs what the
file says: a ``trials`` that is a view over an endless recursive query never ends and
fills the memory of whoever reads it (``distloop sweep --resume``, the window listing
the studies among its runs). So the file is opened read-only, and before anyone queries
it its schema is checked: Optuna's tables and their indexes only, no view, no trigger,
no virtual table; no table holds more rows than a study writes. Every query, the checks
and Optuna's own reading through :func:`bounded_connection`, stops at a deadline (a
SQLite progress handler): a file that cannot be read in that time is unreadable, said
in one line (:class:`StudyUnreadable`), never waited for.
"""

from __future__ import annotations

import sqlite3
import time
import urllib.parse
from pathlib import Path

from ..code_text import shortened, shown

READ_SECONDS = 30.0
"""How long reading one study's storage may take: a real study's, thousands of trials
with their reports, is read in well under a second."""
MAX_ROWS = 5_000_000
"""Rows a table of a real study may hold: 10,000 trials (the most a study plans) with
hundreds of pruning reports each."""
OPTUNA_TABLES = frozenset(
    {
        "alembic_version",
        "studies",
        "study_directions",
        "study_system_attributes",
        "study_user_attributes",
        "trial_heartbeats",
        "trial_intermediate_values",
        "trial_params",
        "trial_system_attributes",
        "trial_user_attributes",
        "trial_values",
        "trials",
        "version_info",
    }
)
"""The tables of Optuna's RDB storage (schema of Optuna 3 to 5)."""
SQLITE_TABLES = frozenset({"sqlite_sequence", "sqlite_stat1", "sqlite_stat4"})
"""Tables SQLite itself adds (AUTOINCREMENT, ANALYZE)."""
_PROGRESS_STEPS = 10_000
"""SQLite virtual machine steps between looks at the clock."""


class StudyUnreadable(Exception):
    """The folder is no study this Distloop can read; the message is one line."""


def bounded_connection(database: Path, deadline: float) -> sqlite3.Connection:
    """``database`` opened read-only (another process may be writing it; nothing here
    writes it), every query on it interrupted once ``time.monotonic()`` passes
    ``deadline`` (SQLite then raises ``OperationalError: interrupted``), its text read
    even where it is not UTF-8."""
    uri = f"file:{urllib.parse.quote(str(database.resolve()))}?mode=ro"
    connection = sqlite3.connect(uri, uri=True, timeout=2, check_same_thread=False)
    connection.set_progress_handler(lambda: time.monotonic() > deadline, _PROGRESS_STEPS)
    # Text that is not UTF-8 (a damaged page) reads with U+FFFD where it is not, instead
    # of a UnicodeDecodeError from whichever query meets it first.
    connection.text_factory = lambda data: data.decode("utf-8", "replace")
    return connection


def check_storage(database: Path, deadline: float) -> str:
    """Refuses a ``study.db`` that is no plain Optuna storage, or too large to be one;
    returns the Optuna version that wrote it. StudyUnreadable says why, in one line."""
    try:
        connection = bounded_connection(database, deadline)
    except sqlite3.Error as exc:
        raise StudyUnreadable(f"{database} cannot be opened: {reason(exc)}") from None
    try:
        _check_schema(database, connection)
        for table in ("trials", "trial_params", "trial_intermediate_values", "trial_values"):
            # LIMIT bounds the count itself: a table of billions is not counted to the end.
            (rows,) = connection.execute(
                f"SELECT COUNT(*) FROM (SELECT 1 FROM {table} LIMIT {MAX_ROWS + 1})"
            ).fetchone()
            if rows > MAX_ROWS:
                raise StudyUnreadable(
                    f"{database}: {table} holds more than {MAX_ROWS} rows: no study's storage"
                )
        row = connection.execute("SELECT library_version FROM version_info").fetchone()
    except (sqlite3.Error, UnicodeDecodeError) as exc:  # SQLite's own message may be damaged
        raise unreadable(database, exc) from None
    finally:
        connection.close()
    if row is None:
        raise StudyUnreadable(f"{database} is damaged or no Optuna storage: no version_info")
    return shortened(str(row[0]))


def _check_schema(database: Path, connection: sqlite3.Connection) -> None:
    found = connection.execute(
        "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master"
    ).fetchall()
    tables = {name for kind, name, _, _ in found if kind == "table"}
    if "version_info" not in tables:
        raise StudyUnreadable(f"{database} is damaged or no Optuna storage: no version_info")
    for kind, name, table, sql in found:
        allowed = (
            (kind == "table" and name in OPTUNA_TABLES and sql.startswith("CREATE TABLE"))
            or (kind == "table" and name in SQLITE_TABLES)
            or (kind == "index" and table in OPTUNA_TABLES)
        )
        if not allowed:
            raise StudyUnreadable(
                f"{database} holds a {shortened(kind)} {shown(name)}, which no Optuna storage "
                "has: it is not read"
            )
    missing = {"studies", "trials"} - tables
    if missing:
        raise StudyUnreadable(
            f"{database} is damaged or no Optuna storage: no table {sorted(missing)[0]}"
        )


def unreadable(database: Path, exc: BaseException) -> StudyUnreadable:
    """The one line for an error SQLite (or SQLAlchemy around it) raised reading
    ``database``; a query stopped at the deadline says so."""
    text = reason(exc)
    if text == "interrupted":
        return StudyUnreadable(f"{database} could not be read within {READ_SECONDS:.0f} s")
    return StudyUnreadable(f"{database} is damaged or no Optuna storage: {text}")


def reason(exc: BaseException) -> str:
    """The database's own words, shortened: SQLAlchemy wraps them in SQL and links, and a
    crafted file's values may be megabytes long."""
    cause: BaseException = exc
    while cause.__cause__ is not None:
        cause = cause.__cause__
    text = str(getattr(cause, "orig", None) or cause)
    line = text.splitlines()[0] if text else type(cause).__name__
    return shortened(line)
