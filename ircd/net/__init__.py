"""The only package with sockets, TLS and timers."""
