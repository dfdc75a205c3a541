"""MCP resources scoped to the caller: what it may read of the agents' published resources.

``resources/list`` lists the caller's own resources, its agents', and those of agents it holds
``resource:read`` toward; ``resources/read`` of anything else answers exactly as for a URI that names
nothing. URIs are ``pircan://<owner>/resources/<name>``.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ListResourcesResult, ReadResourceResult, TextResourceContents
from mcp_types import Resource as MCPResource

from ext.pircan.mcp.http import IDENTITY_KEY
from ext.pircan.service import profile
from ext.pircan.service.refusals import Refused, refuse_nul
from ext.pircan.state import Pircan

__all__ = ["scoped_server", "resource_uri", "parse_resource_uri"]

_MIME = {"text": "text/plain", "json": "application/json"}


def resource_uri(owner: str, name: str) -> str:
    return f"pircan://{owner}/resources/{name}"


def parse_resource_uri(uri: str) -> tuple[str, str] | None:
    prefix = "pircan://"
    if not uri.startswith(prefix):
        return None
    owner, sep, rest = uri[len(prefix):].partition("/resources/")
    return (owner, rest) if sep and owner and rest and "/" not in rest else None


def _account(ctx: Any) -> str:
    request = ctx.request
    identity = request.scope.get(IDENTITY_KEY) if request is not None else None
    if identity is None:
        raise MCPError(code=INVALID_PARAMS, message="No account")
    return identity.account


def scoped_server(state: Pircan, *args: Any, **kwargs: Any) -> MCPServer:
    class ScopedServer(MCPServer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._marks: dict[str, bool] = {}  # tool name -> whether its schema marks an x-mcp-header

        async def _handle_list_resources(self, ctx: Any, params: Any) -> ListResourcesResult:
            found = await profile.readable_resources(state, _account(ctx))
            return ListResourcesResult(resources=[
                MCPResource(uri=resource_uri(r.account, r.name), name=f"{r.account}/{r.name}",
                            description=f"Published by {r.account}", mime_type=_MIME[r.content_type],
                            size=len(r.body.encode("utf-8")))
                for r in found
            ])

        def _tool_input_schema(self, name: str) -> dict[str, Any] | None:
            # The SDK checks a sessionless call's Mcp-Param-* headers against the properties its tool's
            # schema marks with x-mcp-header, walking the whole schema on every call; no tool of ours
            # marks any, so there is nothing to check (and a stray header was never refused).
            schema = super()._tool_input_schema(name)
            if schema is None:
                return None
            marked = self._marks.get(name)
            if marked is None:
                marked = self._marks[name] = "x-mcp-header" in json.dumps(schema)
            return schema if marked else None

        async def _handle_read_resource(self, ctx: Any, params: Any) -> ReadResourceResult:
            uri = str(params.uri)
            parsed = parse_resource_uri(uri)
            try:
                refuse_nul(uri, "uri")
                if parsed is None:
                    raise Refused("NO_SUCH_RESOURCE")
                res = await profile.read_resource(state, _account(ctx), parsed[0], parsed[1])
            except Refused:
                raise MCPError(code=INVALID_PARAMS, message=f"Resource not found: {uri}", data={"uri": uri}) from None
            return ReadResourceResult(contents=[
                TextResourceContents(uri=uri, text=res.body, mime_type=_MIME[res.content_type])
            ])

    return ScopedServer(*args, **kwargs)
