"""Spawn -> first find_similar_errors with many lessons, with and without the lesson signature cache, in one run.

    .venv/bin/python bench/lessons_startup_bench.py --lessons 10000 --runs 3

Stores the dev lessons and the distractors, copied with variations up to about N lessons, through the service
(which writes `lesson.signatures.jsonl` beside `lesson.json`); then spawns the server on copies of that folder
with and without the cache file, alternating, and times spawn to the first find_similar_errors answer.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.startup_bench import cold_start  # noqa: E402
from lessons.model import LessonInput  # noqa: E402
from memory_graph.app import services_for_folder  # noqa: E402
from memory_graph.graph import ImportSummary  # noqa: E402

DATA = ROOT.parent / "shared" / "data"


def store_lessons(folder: Path, count: int) -> int:
    base = json.loads((DATA / "errors-dev.json").read_text(encoding="utf-8"))["lessons"]
    base += json.loads((DATA / "lessons" / "distractors-dev.json").read_text(encoding="utf-8"))["lessons"]
    records = []
    for i in range(max(1, -(-count // len(base)))):
        for lesson in base:
            pattern = {**lesson["errorPattern"], "message": f"{lesson['errorPattern']['message']} v{i}"}
            made = LessonInput.model_validate({**lesson, "name": f"{lesson['name']}_{i}", "errorPattern": pattern})
            records.append({**made.model_dump(), "type": "entity"})
    services = services_for_folder(folder)
    services.lessons.import_lessons(records, ImportSummary())
    services.lessons.save_signatures()
    return len(records)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lessons", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "source"
        stored = store_lessons(source, args.lessons)
        results: dict[str, list[float]] = {"without the cache": [], "with the cache": []}
        for run in range(args.runs):
            for label, times in results.items():
                folder = Path(scratch) / f"{run}-{label.replace(' ', '-')}"
                shutil.copytree(source, folder)
                if label == "without the cache":
                    (folder / "lesson.signatures.jsonl").unlink()
                query = {"errorPattern": {"message": "KeyError: 'x'"}}
                _, answered, _, _ = cold_start(
                    [sys.executable, "-m", "memory_graph"],
                    folder / "memory.json",
                    "find_similar_errors",
                    query,
                    {"MEMORY_SEMANTIC": "off"},
                )
                times.append(answered)
        print(f"{stored} lessons: spawn -> first find_similar_errors (median of {args.runs})")
        for label, times in results.items():
            print(f"  {label:20} {statistics.median(times):.2f} s   {[round(t, 2) for t in times]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
