"""Retrieval quality on real error output (../shared/data/errors-dev.json): the bars stay met."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import needed

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "data" / "errors-dev.json"
EVAL = ROOT.parent / "shared" / "tools" / "lessons_eval.py"


def load_quality_module():
    spec = importlib.util.spec_from_file_location("lessons_quality", ROOT / "bench" / "lessons_quality.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def corpus() -> dict:
    needed(CORPUS.exists(), f"the dev corpus is not at {CORPUS}")
    return json.loads(CORPUS.read_text(encoding="utf-8"))


def test_dev_set_bars_in_process(corpus: dict) -> None:
    result = load_quality_module().evaluate(corpus)
    assert result["find_top1"] >= 0.99, result
    assert result["rec_top1"] >= 0.97, result
    assert result["find_mrr"] >= 0.99 and result["rec_mrr"] >= 0.98, result


@pytest.mark.slow
def test_dev_set_bars_over_stdio_with_the_shared_evaluator(corpus: dict, tmp_path: Path) -> None:
    needed(EVAL.exists(), f"the shared evaluator is not at {EVAL}")
    run = subprocess.run(
        [
            sys.executable,
            str(EVAL),
            str(CORPUS),
            "--server",
            f"{sys.executable} -m memory_graph",
            "--min-find",
            "0.95",
            "--min-rec",
            "0.90",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
