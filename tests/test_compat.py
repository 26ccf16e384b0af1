"""Side by side with the official server: the same random calls give the same answers (differ.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import engine_env, needed

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
        },
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "0 divergences" in run.stdout
