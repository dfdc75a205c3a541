"""Assemble a server from a config: the core, the store and the extensions.

``check_extensions`` and ``check_files`` find, before anything starts, what
would stop the server from starting (an unknown extension, a TLS file that
cannot be read, a database in a directory that does not exist), so
``check-config`` and ``serve`` refuse the same files with the same words.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from typing import Callable

from ircd.config import AccountsSection, Config, ConfigError
from ircd.server import Server

log = logging.getLogger("pircd")


def build_server(
    config: Config,
    *,
    config_path: str | None = None,
    reload: Callable[[], Config] | None = None,
) -> Server:
    from ircd.api import load_extensions

    _check_extension_names(config)
    server = Server(config)
    server.config_path = config_path
    attach_store(server)
    if config.cluster is not None:
        from ircd.cluster import attach

        attach(server)
    if reload is not None:

        def reload_config() -> None:
            config = reload()
            check_extensions(config)  # an invalid extension section keeps the old config too
            server.rehash(config)

        server.reload_config = reload_config
    load_extensions(server)
    return server


async def _send_mail(cfg: AccountsSection, to: str, subject: str, body: str) -> str | None:
    """``ircd.net.mail.send_mail``, imported with the first code sent: smtplib and the email
    package stay out of a server that never sends one."""
    from ircd.net.mail import send_mail

    return await send_mail(cfg, to, subject, body)


def attach_store(server: Server, path: str | None = None) -> None:
    """Give the server its store (SQLite or PostgreSQL), accounts and registered channels (opened at start-up)."""
    import asyncio

    from ircd import passwords
    from ircd.accounts import AccountService
    from ircd.chanreg import ChannelRegistry
    from ircd.history import History
    from ircd.commands.account import install_caps
    from ircd.commands.nickserv import NICKSERV, nickserv
    from ircd.store import Store
    from ircd.tokens import TokenService

    config = server.config
    passwords.set_concurrency(config.accounts.password_threads)
    passwords.configure(
        config.accounts.argon2_time_cost, config.accounts.argon2_memory_kib, config.accounts.argon2_parallelism
    )
    store = Store(path or config.server.db, config.storage.durability)
    server.store = store
    accounts = AccountService(server, store, _send_mail)
    server.accounts = accounts
    channels = ChannelRegistry(server, store)
    tokens = server.tokens = TokenService(server, store)
    history = server.history = History(server, store) if config.history.enabled else None
    if history is not None:
        server.isupport_extra["CHATHISTORY"] = str(config.history.max_query)
        server.isupport_extra["MSGREFTYPES"] = "msgid,timestamp"
        server.invalidate_isupport()
    install_caps(server)
    server.services[server.casefold(NICKSERV)] = nickserv
    polling: set[asyncio.Task[None]] = set()

    def poll() -> None:
        if not polling:
            task = asyncio.get_running_loop().create_task(accounts.poll_external_changes())
            polling.add(task)
            task.add_done_callback(polling.discard)

    async def start() -> None:
        from ircd.store.db import describe
        from ircd.store.errors import CANNOT_OPEN, StoreOpenError, StoreUnavailable

        where = describe(store.path)  # a PostgreSQL URL without its password
        try:
            await store.open()
        except (StoreOpenError, StoreUnavailable) as exc:  # the message names the database already
            raise RuntimeError(str(exc)) from None
        except CANNOT_OPEN as exc:  # NewerSchema: made by a newer pircd
            raise RuntimeError(f"cannot open database {where}: {exc}") from None
        log.info("using database %s", where)
        await tokens.start()
        await accounts.refresh()
        await channels.load()
        if history is not None:
            await history.start()
        server.tick_hooks.append(poll)

    async def stop() -> None:
        if history is not None:
            await history.stop()
        await store.close()  # commits what the history writer handed over

    server.on_startup.insert(0, start)
    server.on_shutdown.insert(0, stop)


def check_extensions(config: Config) -> None:
    """Validate extension sections by loading the extensions on a throwaway server."""
    from ircd.api import load_extensions

    _check_extension_names(config)
    load_extensions(Server(config))  # refuses a table no extension reads, as build_server does


def _check_extension_names(config: Config) -> None:
    """Every name in ``server.extensions`` is a package under ``ext/``."""
    problems = []
    for name in config.server.extensions:
        found = None
        if name.isidentifier():
            try:
                found = importlib.util.find_spec(f"ext.{name}")
            except ImportError:
                pass
        if found is None:
            problems.append(("server.extensions", f"no such extension {name!r}"))
    if problems:
        raise ConfigError(problems)


def check_files(config: Config) -> None:
    """The files the server opens at start-up: the TLS certificate and key (for the IRC or the
    HTTP TLS listeners) and the client CA, readable and loadable together, and the database's
    directory. Raises ConfigError naming each key."""
    import ssl

    server = config.server
    problems: list[tuple[str, str]] = []
    http_tls = config.http.enabled and bool(config.http.tls_listen)
    if http_tls and not (server.tls_cert and server.tls_key):
        problems.append(("http.tls_listen", "needs server.tls_cert and server.tls_key"))
    tls = [("server.tls_cert", server.tls_cert), ("server.tls_key", server.tls_key)]
    if server.tls_listen:  # the HTTP listener asks for no client certificate
        tls.append(("server.tls_client_ca", server.tls_client_ca))
    for key, path in tls if server.tls_listen or http_tls else []:
        if path is not None:
            try:
                with open(path, "rb"):
                    pass
            except OSError as exc:
                problems.append((key, f"cannot read {path}: {exc.strerror}"))
    if (server.tls_listen or http_tls) and not problems:
        from ircd.net.listener import make_tls_context

        assert server.tls_cert is not None and server.tls_key is not None  # checked above
        client_ca = server.tls_client_ca if server.tls_listen else None
        try:
            make_tls_context(server.tls_cert, server.tls_key, client_ca)
        except (ssl.SSLError, ValueError) as exc:
            files = " and ".join(path for _, path in tls[1:] if path)
            reason = getattr(exc, "reason", None) or exc
            problems.append(("server.tls_cert", f"cannot use {server.tls_cert} with {files}: {reason}"))
    from ircd.store.dialect import is_url

    if config.cluster is not None and not is_url(server.db):
        problems.append(("cluster", "needs a PostgreSQL server.db (postgresql://...): the nodes share one "
                                    "database, and a SQLite file belongs to one process"))
    if config.cluster is not None and importlib.util.find_spec("nats") is None:
        problems.append(("cluster", "needs the NATS client: pip install 'pircd[cluster]' (nats-py)"))
    directory = os.path.dirname(os.path.abspath(server.db))
    if is_url(server.db):
        pass  # a PostgreSQL database: whether it can be reached is found at start-up
    elif os.path.isdir(server.db):
        problems.append(("server.db", f"{server.db} is a directory"))
    elif not os.path.isdir(directory):
        problems.append(("server.db", f"cannot create {server.db}: no directory {directory}"))
    if problems:
        raise ConfigError(problems)
