"""The database the tests give pircd: a SQLite file (the default), or, with PIRCD_TEST_DB=postgresql,
a database of its own on one PostgreSQL server that the test session starts.

Tests name their database by a file path, as before (``tmp_path / "pircd.db"``); ``database(path)``
is what to put in ``server.db`` or ``--db``: the path itself on SQLite, or on PostgreSQL the URL of
a database made for that path on first use (the same path, the same database, so a test that
restarts a server on "the same file" finds its rows). ``connect(target)`` opens it for a test that
reads or writes rows directly, whichever it is.

The PostgreSQL server (``PgServer``) is Debian's ``postgresql`` binaries on a throwaway data
directory and a free loopback port, run as the ``postgres`` user when the tests run as root
(PostgreSQL refuses to run as root), with fsync off (a test never survives a power cut) and trust
authentication, except for the role ``PASSWORD_ROLE``, which must give its password (the tests
that check a password never shows). It stops when the session ends.
"""

from __future__ import annotations

import atexit
import glob
import hashlib
import os
import pwd
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

BACKEND = os.environ.get("PIRCD_TEST_DB", "sqlite").lower()
if BACKEND not in ("sqlite", "postgresql"):
    raise SystemExit(f"PIRCD_TEST_DB={BACKEND!r}: sqlite or postgresql")
POSTGRESQL = BACKEND == "postgresql"
PASSWORD_ROLE = "pircd_pw"
PASSWORD = "pg-secret-5f3a9c"  # the tests look for it in logs and errors: it must never appear


def _binaries() -> Path:
    """The directory of initdb and postgres (Debian keeps them out of PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb is None:
        raise RuntimeError("PostgreSQL is not installed (Debian: apt-get install postgresql; scripts/test does)")
    return Path(initdb).resolve().parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PgServer:
    """A PostgreSQL server of its own: ``start()``, ``stop()`` (and start again), ``destroy()``.
    ``durable``: fsync on, as a production server runs (the benchmarks); off for the tests."""

    def __init__(self, durable: bool = False) -> None:
        self.durable = durable
        self.bin = _binaries()
        self.user = None
        if os.geteuid() == 0:
            self.user = "postgres" if _has_user("postgres") else "nobody"
        self.dir = Path(tempfile.mkdtemp(prefix="pircd-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        if self.user is not None:
            shutil.chown(self.dir, self.user)
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust",
                  "-E", "UTF8", "--locale=C", "--no-sync")
        hba = (f"local all all trust\nhost all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256\n"
               "host all all 127.0.0.1/32 trust\n")
        self._write(self.data / "pg_hba.conf", hba)

    def _run(self, *argv: str) -> None:
        command = list(argv) if self.user is None else ["runuser", "-u", self.user, "--", *argv]
        subprocess.run(command, check=True, capture_output=True, cwd=self.dir)

    def _write(self, path: Path, text: str) -> None:
        path.write_text(text)
        if self.user is not None:
            shutil.chown(path, self.user)

    def start(self) -> "PgServer":
        argv = [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port), "-k", str(self.dir),
                "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=400", "-c", "log_min_messages=fatal"]
        if not self.durable:
            argv += ["-c", "fsync=off", "-c", "full_page_writes=off"]
        command = argv if self.user is None else ["runuser", "-u", self.user, "--", *argv]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     cwd=self.dir, start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
                import psycopg

                psycopg.connect(self.url("postgres"), connect_timeout=2).close()
                return self
            except OSError:
                pass
            except Exception:  # starting up: "the database system is starting up"
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start (exit status {self.proc.poll()})")
            time.sleep(0.05)

    def stop(self) -> None:
        """A fast shutdown (clients are disconnected; what they committed stays)."""
        if self.proc is not None and self.proc.poll() is None:
            # the postmaster itself (runuser, when it runs as another user, waits for it)
            postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
            os.kill(postmaster, signal.SIGINT)
            self.proc.wait(60)
        self.proc = None

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, database: str, role: str = "postgres", password: str | None = None) -> str:
        secret = f":{password}" if password else ""
        return f"postgresql://{role}{secret}@127.0.0.1:{self.port}/{database}"

    def admin(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement.encode())


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


_server: PgServer | None = None
_made: set[str] = set()


def server() -> PgServer:
    """The session's PostgreSQL server, started on first use."""
    global _server
    if _server is None:
        _server = PgServer().start()
        atexit.register(_server.destroy)
        _server.admin(f"CREATE ROLE {PASSWORD_ROLE} LOGIN SUPERUSER PASSWORD '{PASSWORD}'")
        # tests read ids as SQLite's printf('%016x', id) shows them (the wire's hex ids): every
        # database made from template1 has the same function (pircd itself never uses it)
        with_template = _server.url("template1")
        import psycopg

        with psycopg.connect(with_template, autocommit=True) as conn:
            conn.execute("CREATE FUNCTION printf(fmt text, value bigint) RETURNS text LANGUAGE sql IMMUTABLE "
                         "AS $$ SELECT CASE WHEN fmt = '%016x' THEN lpad(to_hex(value), 16, '0') END $$")
    return _server


def name_for(path: str | os.PathLike[str]) -> str:
    return "t" + hashlib.sha1(os.path.abspath(os.fspath(path)).encode()).hexdigest()[:24]


def database(path: str | os.PathLike[str]) -> str:
    """``server.db`` for the file ``path`` (see the module's text)."""
    text = os.fspath(path)
    if not POSTGRESQL or text.startswith("postgresql://"):
        return text
    return fresh_url(name_for(text))


def fresh_url(name: str) -> str:
    """The URL of the database ``name`` on the session's server, made empty on first use."""
    pg = server()
    if name not in _made:
        pg.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", f"CREATE DATABASE {name}")
        _made.add(name)
    return pg.url(name)


def shown(path: str | os.PathLike[str]) -> str:
    """How pircd names the test database of ``path`` ("using database ..."): the file's absolute
    path, or the URL without a password."""
    from ircd.store.db import describe

    return describe(database(path))


NEW = " (new database)" if POSTGRESQL else " (new file)"  # "using database X (new ...)"


def connect(target: str | os.PathLike[str]) -> Any:
    """A connection to the test database named by a path (or the URL ``store.path`` holds), with
    ``sqlite3``'s surface either way; autocommit, like ``sqlite3.connect(path, isolation_level=None)``."""
    text = database(target)
    if text.startswith("postgresql://"):
        from ircd.store import pg

        return pg.connect(text, notify=True)  # as a command-line tool: the server notices its commits
    return sqlite3.connect(text, isolation_level=None)


def rows(target: str | os.PathLike[str], sql: str, params: tuple = ()) -> list[tuple]:
    """The rows of one query on the test database (opened and closed around it)."""
    conn = connect(target)
    try:
        return [tuple(row) for row in conn.execute(sql, params).fetchall()]
    finally:
        conn.close()


def exists(path: str | os.PathLike[str]) -> bool:
    """Whether the test database named by ``path`` was made: the file, or on PostgreSQL its tables."""
    if not POSTGRESQL:
        return os.path.exists(path)
    name = name_for(path)
    if name not in _made:
        return False
    return bool(rows(path, "SELECT 1 FROM pg_tables WHERE tablename = 'schema_versions'"))
