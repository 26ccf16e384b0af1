#!/usr/bin/env sh
# Claude Code: register memory-graph (installed on PATH) as the "memory" server for your user.
claude mcp add memory --scope user --env MEMORY_FILE_PATH="$HOME/.local/share/memory-graph/memory.json" -- memory-graph
