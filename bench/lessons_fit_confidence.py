"""Fit the lesson-match confidence model (ranking.FIND_CONFIDENCE / RECOMMEND_CONFIDENCE) and its cut.

    .venv/bin/python bench/harvest_negatives.py          # real errors no dev lesson covers
    .venv/bin/python bench/lessons_fit_confidence.py     # prints the weights and cuts to paste into ranking.py

Fitting data: the errors-dev.json queries against the dev lessons alone (26) and with distractors-dev.json
(1,011): label 1 when the top answer is right, 0 when it is wrong; and bench/data/harvested-negatives.json
against the same stores, label 0. negatives-dev.json is not used: it is kept for measuring.
Features of the top answer: its score, its margin over the runner-up, ln(store size). Model: logistic regression
by gradient descent (no numpy here). Cut: the lowest confidence any right fitting answer had, rounded down, so
abstention loses no fitted positive.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import lessons.ranking as ranking  # noqa: E402
import lessons.service as service  # noqa: E402
from lessons.model import ErrorQuery, LessonInput  # noqa: E402
from memory_graph.app import services_for_folder  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
HARVESTED = ROOT / "bench" / "data" / "harvested-negatives.json"
Row = tuple[list[float], float]


def top_features(matches: list[tuple[str, float]], expected: str | None, size: int) -> Row | None:
    if not matches:
        return None
    score = matches[0][1]
    margin = score - (matches[1][1] if len(matches) > 1 else 0.0)
    return [score, margin, math.log(size)], float(matches[0][0] == expected)


def collect(lessons: list[dict[str, Any]], queries: list[dict[str, Any]]) -> tuple[list[Row], list[Row]]:
    """(find rows, recommendation rows) with abstention switched off."""
    find: list[Row] = []
    rec: list[Row] = []
    with tempfile.TemporaryDirectory() as folder:
        svc = services_for_folder(Path(folder)).lessons
        for lesson in lessons:
            svc.create_lesson(LessonInput.model_validate(lesson))
        size = len(lessons)
        for query in queries:
            found = svc.find_similar_errors(ErrorQuery.model_validate(query["errorPattern"]), limit=2).matches
            recs = svc.get_lesson_recommendations(query["log"], limit=2).recommendations
            for rows, pairs in (
                (find, [(m.name, m.score) for m in found]),
                (rec, [(r.name, r.relevance) for r in recs]),
            ):
                row = top_features(pairs, query["expected"], size)
                if row is not None:
                    rows.append(row)
    return find, rec


def fit(rows: list[Row], steps: int = 20_000, rate: float = 0.5, l2: float = 1e-3) -> list[float]:
    weights = [0.0] * (len(rows[0][0]) + 1)
    for _ in range(steps):
        gradient = [0.0] * len(weights)
        for x, y in rows:
            error = predict(weights, x) - y
            for i, value in enumerate(x):
                gradient[i] += error * value
            gradient[-1] += error
        weights = [w - rate * (g / len(rows) + l2 * w) for w, g in zip(weights, gradient, strict=True)]
    return weights


def predict(weights: list[float], x: list[float]) -> float:
    return 1 / (1 + math.exp(-(weights[-1] + sum(w * v for w, v in zip(weights, x, strict=False)))))


def main() -> int:
    service.FIND_MIN_CONFIDENCE = service.RECOMMEND_MIN_CONFIDENCE = 0.0  # type: ignore[misc]
    service.FIND_THRESHOLD = service.RECOMMEND_THRESHOLD = 0.0  # type: ignore[misc]
    ranking.RELATIVE_CUTOFF = 0.0
    dev = json.loads((DATA / "errors-dev.json").read_text(encoding="utf-8"))
    distractors = json.loads((DATA / "lessons" / "distractors-dev.json").read_text(encoding="utf-8"))["lessons"]
    harvested = json.loads(HARVESTED.read_text(encoding="utf-8"))["queries"]
    find: list[Row] = []
    rec: list[Row] = []
    for store in (dev["lessons"], dev["lessons"] + distractors):
        for queries in (dev["queries"], harvested):
            more_find, more_rec = collect(store, queries)
            find += more_find
            rec += more_rec
    for tool, rows in (("find", find), ("recommend", rec)):
        weights = fit(rows)
        cut = math.floor(100 * min(predict(weights, x) for x, y in rows if y)) / 100
        print(f"{tool}: weights (score, margin, ln size, intercept) {[round(w, 3) for w in weights]}, cut {cut}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
