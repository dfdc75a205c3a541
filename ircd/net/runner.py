"""Run a server: listeners, ticker, signals, and a clean shutdown.

SIGTERM and SIGINT close the listeners, send every client ``ERROR`` (and its
peers QUIT), run the shutdown hooks (storage flush and close), give sockets a
moment to drain, and return. SIGHUP reloads the configuration file, like
REHASH. If start-up fails (a port in use, an unreadable certificate), what
was started is shut down the same way and ``StartupError`` says why.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys
from typing import Callable

from ircd import build
from ircd.config import Config
from ircd.net.http import HttpListener
from ircd.net.listener import start_listeners
from ircd.net.timers import Ticker
from ircd.server import Server

log = logging.getLogger("pircd")


class StartupError(Exception):
    """The server could not start; the message says why (no traceback needed)."""


def _rehash(server: Server) -> None:
    if server.reload_config is None:
        log.warning("SIGHUP ignored: the server was started without a configuration file")
        return
    try:
        server.reload_config()
    except Exception as exc:  # keep the old config, like REHASH does
        log.warning("rehash on SIGHUP failed, configuration unchanged: %s", exc)
        return
    log.info("rehash on SIGHUP")


async def run_server(
    server: Server,
    *,
    ready: Callable[[list[tuple[str, int]]], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    loop = asyncio.get_running_loop()
    stop = stop or asyncio.Event()
    handled: list[signal.Signals] = []
    for sig, handler in ((signal.SIGTERM, stop.set), (signal.SIGINT, stop.set), (signal.SIGHUP, lambda: _rehash(server))):
        try:
            loop.add_signal_handler(sig, handler)
            handled.append(sig)
        except (NotImplementedError, RuntimeError):  # not the main thread
            pass
    listeners: list = []
    ticker = Ticker(server)
    http = HttpListener(server)
    started = False
    try:
        try:
            for start in server.on_startup:
                await start()
        except Exception as exc:
            raise StartupError(f"cannot start: {_reason(exc)}") from None
        try:
            listeners = await start_listeners(server)
            await http.start()
        except OSError as exc:
            raise StartupError(f"cannot listen: {_reason(exc)}") from None
        except Exception as exc:
            raise StartupError(f"cannot start: {exc}") from None
        ticker.start()
        started = True
        for announce in server.on_ready:
            announce()
        addresses = [sock.getsockname()[:2] for srv in listeners for sock in srv.sockets]
        log.info("server %s ready (%s build)", server.name, build())
        if ready is not None:
            ready(addresses)
        await stop.wait()
    finally:
        log.info("shutting down")
        ticker.stop()
        for srv in listeners:
            srv.close()
        await http.stop()
        conns = [c.conn for c in server.clients]
        server.shutdown_clients("Server shutting down")
        for hook in reversed(server.on_shutdown):
            try:
                await hook()
            except Exception:
                log.exception("shutdown hook failed")
        await _drain(conns)
        for sig in handled:
            loop.remove_signal_handler(sig)
        log.info("stopped" if started else "stopped before it was ready")


_GC_YOUNG = 10_000  # allocations of tracked objects between two collections of the youngest generation


def freeze_startup_objects(_addresses: object = None) -> None:
    """Leave what start-up made (modules, the configuration, the extensions' tables: most of the
    heap) out of the cyclic garbage collector's full collections from now on. A full collection
    walks every tracked object, and with all of start-up in it one took 50-115 ms during a storm
    of 10,000 registrations: every client waited that long. Garbage is collected first, so that
    none is kept for good. For a process that only serves (``serve``): it applies to every object
    of the process, whoever made it.

    The youngest generation is then collected every ``_GC_YOUNG`` allocations rather than every
    700 (CPython's default): a connection keeps about ten tracked objects for as long as it lasts
    (its client, the client's sets, dicts and lists, its transport), so with 700 a burst of
    registrations ran a collection every 70-80 of them, and every tenth one also walked the
    connections made since: about 4 % of a registration's instructions. Cyclic garbage waits
    longer for its collection, at most ``_GC_YOUNG`` objects' worth."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(_GC_YOUNG, *gc.get_threshold()[1:])
    trim_heap()


def trim_heap() -> None:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``): start-up
    frees much of what it allocated (the configuration's parsing, the schema migrations'
    statements), and glibc keeps freed pages in the process otherwise. Elsewhere (musl, macOS),
    nothing."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return
    trim(0)


def _reason(exc: Exception) -> str:
    """An error in one line, naming the file when it is about one (a TLS certificate, the database)."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return str(exc) or type(exc).__name__


async def _drain(conns: list, timeout: float = 2.0) -> None:
    """Give closing sockets a moment to send their last lines."""
    await asyncio.sleep(0)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline and any(conn.buffered() for conn in conns):
        await asyncio.sleep(0.05)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (a faster event loop), plain asyncio otherwise."""
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


def serve(server: Server, *, use_uvloop: bool = True) -> None:
    """Run until a signal stops the server; raises StartupError if it cannot start."""
    loop = new_event_loop() if use_uvloop else asyncio.new_event_loop()
    try:
        loop.run_until_complete(run_server(server, ready=freeze_startup_objects))
    finally:
        loop.close()


__all__ = ["run_server", "serve", "new_event_loop", "StartupError", "Config"]
