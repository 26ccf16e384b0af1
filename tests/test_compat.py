"""Side by side with the official server: the same random calls give the same answers (differ.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import engine_env, needed, shared_pids

ROOT = Path(__file__).resolve().parents[1]
DIFFER = ROOT.parent / "shared" / "tools" / "differ.py"
REFERENCE = (
    ROOT / ".ci" / "reference" / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
)


@pytest.mark.slow
@pytest.mark.usefixtures("each_engine")
@pytest.mark.parametrize("seed", [11, 12])
def test_random_call_sequences_match_the_reference(seed: int, tmp_path: Path) -> None:
    """On the files and on PostgreSQL (MEMORY_DATABASE_URL, which the reference ignores)."""
    differ_agrees(seed, tmp_path, {})


@pytest.mark.slow
@pytest.mark.usefixtures("each_engine")
@pytest.mark.skipif(sys.platform == "win32", reason="Unix sockets")
def test_random_call_sequences_match_the_reference_through_the_shared_server(
    tmp_path: Path, shared_runtime: Path
) -> None:
    """MEMORY_SHARED_SERVER=on: each of the differ's restarts is a new start relayed to the one shared server."""
    shared = {"MEMORY_SHARED_SERVER": "on", "XDG_RUNTIME_DIR": str(shared_runtime)}
    differ_agrees(13, tmp_path, shared)
    assert len(shared_pids(shared_runtime)) == 1


def differ_agrees(seed: int, tmp_path: Path, extra_env: dict[str, str]) -> None:
    needed(DIFFER.exists(), f"the shared differ is not at {DIFFER}")
    needed(
        REFERENCE.exists() and shutil.which("node") is not None,
        "the reference server is not installed (.ci/run installs it with npm)",
    )
    ours = f"{sys.executable} -m memory_graph"
    run = subprocess.run(
        [
            sys.executable,
            str(DIFFER),
            "--a",
            f"node {REFERENCE}",
            "--b",
            ours,
            "--profile",
            "improved",
            "--restart-every",
            "40",
            "--steps",
            "250",
            "--seed",
            str(seed),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={
            "PATH": "/usr/bin:/bin",
            "MEMORY_TOOLS": "graph",
            "PYTHONPATH": str(ROOT),
            "MEMORY_SEMANTIC": "off",
            **engine_env(tmp_path),
            **extra_env,
        },
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "0 divergences" in run.stdout
