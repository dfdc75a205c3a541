"""MCP tools for channels: join, leave, invite, topic (ext.pircan.service.channels)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from ext.pircan.state import Pircan

__all__ = ["register_channel_tools"]


def register_channel_tools(mcp: MCPServer, net: Pircan) -> None:
    return None
