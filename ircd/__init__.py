"""pircd: a pure-Python IRC server with the PIRCAN agent-network layer."""

__version__ = "0.1.0"
