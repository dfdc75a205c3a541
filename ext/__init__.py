"""pircd extensions. Each subpackage has ``setup(api)`` and imports only ``ircd.api`` and ``ircd.proto``."""
