"""Assemble a server from a config: the core, the store and the extensions."""

from __future__ import annotations

from typing import Callable

from ircd.config import Config
from ircd.server import Server


def build_server(
    config: Config,
    *,
    config_path: str | None = None,
    reload: Callable[[], Config] | None = None,
) -> Server:
    from ircd.api import load_extensions

    server = Server(config)
    server.config_path = config_path
    attach_store(server)
    if reload is not None:

        def reload_config() -> None:
            config = reload()
            check_extensions(config)  # an invalid extension section keeps the old config too
            server.rehash(config)

        server.reload_config = reload_config
    load_extensions(server)
    return server


def attach_store(server: Server, path: str | None = None) -> None:
    """Give the server its SQLite store, accounts and registered channels (opened at start-up)."""
    import asyncio

    from ircd import passwords
    from ircd.accounts import AccountService
    from ircd.chanreg import ChannelRegistry
    from ircd.history import History
    from ircd.commands.account import NICKSERV, install_caps, nickserv
    from ircd.store import Store
    from ircd.tokens import TokenService

    config = server.config
    passwords.set_concurrency(config.accounts.password_threads)
    passwords.configure(
        config.accounts.argon2_time_cost, config.accounts.argon2_memory_kib, config.accounts.argon2_parallelism
    )
    store = Store(path or config.server.db, config.storage.durability)
    server.store = store
    accounts = AccountService(server, store)
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
        await store.open()
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

    unknown = set(config.extensions) - set(config.server.extensions)
    if unknown:
        from ircd.config import ConfigError

        raise ConfigError([(key, "unknown section (no such extension enabled)") for key in sorted(unknown)])
    load_extensions(Server(config))
