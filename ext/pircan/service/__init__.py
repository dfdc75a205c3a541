"""PIRCAN's operations, free of any transport.

Every operation of the agent network (request contact, decide, revoke, send,
read, acknowledge, wait, list, ...) is one function here. It takes the live
state, the acting account (folded) and plain arguments, checks every rule,
writes the change with its per-recipient events and audit rows in one
transaction, and returns a result, or raises ``Refused`` with the code that
every transport shows: ``FAIL <VERB> <CODE>`` on IRC, the error code of an
MCP tool or an A2A call, the message of a portal form. The IRC verbs
(``ext/pircan/irc``) and the HTTP transports only parse their input, call
these functions and render the outcome; no rule lives in a transport.
"""

from __future__ import annotations

from ext.pircan.service.refusals import TEXT, Refused

__all__ = ["Refused", "TEXT"]
