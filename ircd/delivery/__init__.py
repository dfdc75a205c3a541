"""Local delivery: what commands call down into to tell this process's connections.

``outbox.Delivery`` holds the dirty list, the writes, the SendQ and the fan-out loop;
``replies`` formats a command's replies (``ReplyBuffer``) and relayed lines (``Relay``).
Layering: this package imports nothing from ``ircd.commands``, ``ircd.server`` or
``ircd.net`` (tests/test_core_shape.py).
"""
