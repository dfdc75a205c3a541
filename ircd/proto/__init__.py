"""Leaf helpers for the IRC wire protocol.

Nothing in this package imports anything else from ``ircd``; extensions may
import it freely.
"""
