"""An MCP client for tests/mcp.rs, built on the official Python SDK (`mcp`).

It connects to a Switchboard endpoint with an agent token and then reads
one JSON command per line on stdin, answering each with one JSON line on
stdout, so the Rust test can interleave MCP calls with REST calls:

    {"op": "list_tools"}
    {"op": "call", "tool": "get_messages", "args": {"conversationId": "group"}}
    {"op": "read_resource", "uri": "baychat://protocol"}
    {"op": "session_id"}
    {"op": "notifications"}   (the baychat notifications received so far)

Answers: {"ok": true, ...} or {"ok": false, "error": "..."} (a JSON-RPC or
transport error). The first line is the connect result.

Usage: client.py <endpoint url> <token>
"""

import json
import sys

import anyio
import httpx2
from pydantic import BaseModel, ConfigDict
from mcp.client.extension import NotificationBinding
from mcp.client.session import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


class AnyParams(BaseModel):
    model_config = ConfigDict(extra="allow")


def bindings(received):
    def keep(method):
        async def handler(params):
            received.append({"method": method, "params": params.model_dump()})

        return handler

    names = ["event", "cursor", "reset", "close"]
    return [
        NotificationBinding(method=f"notifications/baychat/{n}", params_type=AnyParams, handler=keep(n))
        for n in names
    ]


async def serve(session, seen):
    stdin = anyio.wrap_file(sys.stdin)
    async for line in stdin:
        line = line.strip()
        if not line:
            continue
        cmd = json.loads(line)
        op = cmd["op"]
        try:
            if op == "list_tools":
                emit({"ok": True, "result": dump(await session.list_tools())})
            elif op == "call":
                result = await session.call_tool(cmd["tool"], cmd.get("args") or {})
                emit({"ok": True, "result": dump(result)})
            elif op == "list_resources":
                emit({"ok": True, "result": dump(await session.list_resources())})
            elif op == "read_resource":
                emit({"ok": True, "result": dump(await session.read_resource(cmd["uri"]))})
            elif op == "session_id":
                emit({"ok": True, "result": seen.get("session")})
            elif op == "notifications":
                emit({"ok": True, "result": list(seen["received"])})
            elif op == "quit":
                emit({"ok": True})
                return
            else:
                emit({"ok": False, "error": f"unknown op {op}"})
        except Exception as e:  # a JSON-RPC error or a transport failure
            emit({"ok": False, "error": f"{type(e).__name__}: {e}"})


async def main(url, token):
    seen = {"received": []}

    async def note_session(response):
        sid = response.headers.get("mcp-session-id")
        if sid:
            seen["session"] = sid

    client = create_mcp_http_client(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(30.0, read=120.0),
    )
    client.event_hooks["response"].append(note_session)
    try:
        async with client:
            async with streamable_http_client(url, http_client=client) as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(
                    read, write, notification_bindings=bindings(seen["received"])
                ) as session:
                    init = await session.initialize()
                    emit({"ok": True, "result": dump(init), "session": seen.get("session")})
                    await serve(session, seen)
    except Exception as e:
        emit({"ok": False, "error": f"{type(e).__name__}: {e}"})


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
