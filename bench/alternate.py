"""Time this checkout and another one (`--code`, a `git worktree`) alternately in one run, each in a fresh process
with its own code first on the path, so drift on a shared machine hits both (bench/follow_bench.py,
bench/search_bench.py)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=2, help="alternations of the checkouts")
    parser.add_argument("--code", help="another checkout of the code, timed alternately with this one")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)


def run_alternately(script: str, arguments: list[str], args: argparse.Namespace) -> dict[str, list[Any]]:
    """Each checkout's results, one per run: what `script --child *arguments` printed last, as JSON."""
    codes = {"this code": ROOT, **({"--code": Path(args.code).resolve()} if args.code else {})}
    results: dict[str, list[Any]] = {label: [] for label in codes}
    for _ in range(args.runs):
        for label, code in codes.items():
            env = {**os.environ, "PYTHONPATH": str(code), "MEMORY_SEMANTIC": "off"}
            command = [sys.executable, script, "--child", *arguments]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True, cwd=code)
            results[label].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return results
