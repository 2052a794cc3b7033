"""Regenerate the real-server part of the schema corpus (not a test; run by hand).

The JSON files beside this script are the ``tools/list`` answers of real MCP servers
from npm and PyPI, so the format tests need no network. To refresh them, install the
servers in a scratch directory (never in the repository) and point this script at it::

    mkdir -p /tmp/corpus-npm && cd /tmp/corpus-npm && npm init -y
    npm install @modelcontextprotocol/server-everything \\
        @modelcontextprotocol/server-filesystem @modelcontextprotocol/server-memory \\
        @modelcontextprotocol/server-sequential-thinking \\
        @modelcontextprotocol/server-github @notionhq/notion-mcp-server \\
        @playwright/mcp chrome-devtools-mcp
    python3 -m venv /tmp/corpus-py/venv
    /tmp/corpus-py/venv/bin/pip install mcp-server-time mcp-server-fetch mcp-server-git
    .venv/bin/python tests/data/tool_schemas/dump_corpus.py /tmp/corpus-npm /tmp/corpus-py/venv

Each server is started over stdio with the official SDK client, listed once (all
pages), and stopped. Only ``name``, ``title``, ``description`` and ``inputSchema`` are
kept: the rest of a tool (annotations, output schemas) is not what the converters read.
"""

from __future__ import annotations

import json
import pathlib
import sys
import tempfile
from typing import Any

import anyio
import mcp
from mcp.client.stdio import StdioServerParameters, stdio_client

HERE = pathlib.Path(__file__).parent

# (corpus file stem, package spec for the record, command relative to the install dir, args)
NPM_SERVERS: list[tuple[str, str, str, list[str]]] = [
    ("server-everything", "@modelcontextprotocol/server-everything", "mcp-server-everything", []),
    ("server-filesystem", "@modelcontextprotocol/server-filesystem", "mcp-server-filesystem", ["{tmp}"]),
    ("server-memory", "@modelcontextprotocol/server-memory", "mcp-server-memory", []),
    (
        "server-sequential-thinking",
        "@modelcontextprotocol/server-sequential-thinking",
        "mcp-server-sequential-thinking",
        [],
    ),
    ("server-github", "@modelcontextprotocol/server-github", "mcp-server-github", []),
    ("notion-mcp-server", "@notionhq/notion-mcp-server", "notion-mcp-server", []),
    ("playwright-mcp", "@playwright/mcp", "playwright-mcp", []),
    ("chrome-devtools-mcp", "chrome-devtools-mcp", "chrome-devtools-mcp", []),
]
PYPI_SERVERS: list[tuple[str, str, str, list[str]]] = [
    ("mcp-server-time", "mcp-server-time", "mcp-server-time", []),
    ("mcp-server-fetch", "mcp-server-fetch", "mcp-server-fetch", []),
    ("mcp-server-git", "mcp-server-git", "mcp-server-git", []),
]


def _npm_version(install_dir: pathlib.Path, package: str) -> str:
    manifest = install_dir / "node_modules" / package / "package.json"
    return str(json.loads(manifest.read_text())["version"])


def _pypi_version(venv: pathlib.Path, package: str) -> str:
    for dist in venv.glob("lib/python*/site-packages/*.dist-info"):
        name, _, version = dist.name[: -len(".dist-info")].partition("-")
        if name.replace("_", "-").lower() == package:
            return version
    return "unknown"


async def _list_tools(command: str, args: list[str]) -> list[dict[str, Any]]:
    # Dummy credentials: some servers refuse to start without the variable being set,
    # but listing tools never uses it.
    env = {"GITHUB_PERSONAL_ACCESS_TOKEN": "unused", "NOTION_TOKEN": "unused"}
    params = StdioServerParameters(command=command, args=args, env=env)
    tools: list[dict[str, Any]] = []
    with anyio.fail_after(60):
        async with stdio_client(params) as (read, write), mcp.ClientSession(read, write) as session:
            await session.initialize()
            cursor: str | None = None
            while True:
                page_params = mcp.types.PaginatedRequestParams(cursor=cursor) if cursor else None
                result = await session.list_tools(params=page_params)
                for tool in result.tools:
                    dumped = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
                    tools.append(
                        {key: dumped[key] for key in ("name", "title", "description", "inputSchema") if key in dumped}
                    )
                cursor = result.next_cursor
                if not cursor:
                    return tools


async def _main(npm_dir: pathlib.Path, venv: pathlib.Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        jobs = [
            (stem, f"npm:{pkg}@{_npm_version(npm_dir, pkg)}", str(npm_dir / "node_modules/.bin" / cmd), args)
            for stem, pkg, cmd, args in NPM_SERVERS
        ] + [
            (stem, f"pypi:{pkg}=={_pypi_version(venv, pkg)}", str(venv / "bin" / cmd), args)
            for stem, pkg, cmd, args in PYPI_SERVERS
        ]
        for stem, source, command, args in jobs:
            tools = await _list_tools(command, [a.format(tmp=tmp) for a in args])
            out = {"server": stem, "source": source, "tools": tools}
            (HERE / f"{stem}.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
            print(f"{stem}: {len(tools)} tools ({source})")


if __name__ == "__main__":
    anyio.run(_main, pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), backend="trio")
