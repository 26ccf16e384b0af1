"""A real client no one here wrote: the MCP Inspector CLI (npm) lists tools, reads a prompt, calls a tool."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

INSPECTOR = "@modelcontextprotocol/inspector@0.15.0"
SERVER = str(Path(sys.executable).parent / "memory-graph")

pytestmark = pytest.mark.slow


def inspect(tmp_path: Path, *args: str) -> dict:
    if shutil.which("npx") is None:
        pytest.skip("npx is not installed, so the MCP Inspector cannot run")
    memory = tmp_path / "memory.json"
    command = ["npx", "-y", INSPECTOR, "--cli", "-e", f"MEMORY_FILE_PATH={memory}", SERVER, *args]
    run = subprocess.run(
        command, capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**os.environ, "CI": "1"}
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return json.loads(run.stdout)


def test_the_inspector_lists_tools_reads_the_prompt_and_calls_a_tool(tmp_path: Path) -> None:
    tools = {t["name"] for t in inspect(tmp_path, "--method", "tools/list")["tools"]}
    assert {"create_entities", "search_nodes", "find_similar_errors", "get_lesson_recommendations"} <= tools
    prompt = inspect(tmp_path, "--method", "prompts/get", "--prompt-name", "personalization")
    assert "Remembering..." in prompt["messages"][0]["content"]["text"]
    entities = json.dumps([{"name": "Alice", "entityType": "person", "observations": ["likes tea"]}])
    created = inspect(
        tmp_path, "--method", "tools/call", "--tool-name", "create_entities", "--tool-arg", f"entities={entities}"
    )
    assert created["structuredContent"]["entities"][0]["name"] == "Alice"
    assert json.loads((tmp_path / "memory.json").read_text(encoding="utf-8"))["name"] == "Alice"
