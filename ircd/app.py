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
    if reload is not None:

        def reload_config() -> None:
            server.rehash(reload())

        server.reload_config = reload_config
    load_extensions(server)
    return server


def check_extensions(config: Config) -> None:
    """Validate extension sections by loading the extensions on a throwaway server."""
    from ircd.api import load_extensions

    unknown = set(config.extensions) - set(config.server.extensions)
    if unknown:
        from ircd.config import ConfigError

        raise ConfigError([(key, "unknown section (no such extension enabled)") for key in sorted(unknown)])
    load_extensions(Server(config))
