"""How far abstention can go with the confidence's features: a diagnostic on the dev sets, never a source of constants.

    .venv/bin/python bench/lessons_separability.py

For every issue-8 condition, in process, each query is asked with abstention off and the top answer's features are
recorded (the ones ranking.confident sees: score, margin over the best rival, the three clues, query coverage,
ln store size). It prints, per condition and tool:
- rank: top-1 with abstention off (what ranking alone finds);
- shipped: top-1 with the shipped confidence model and cuts, and the share of negatives answered;
- ceiling: the best top-1 any rule of the form `score + a x margin + b x message coverage + c x rarest >= t` reaches
  while answering at most 10% of the negatives of both negative sets, with a, b, c and t chosen ON THE DEV SETS.

The ceiling is tuned on the data it is measured on, so it is an upper bound of what these features can separate,
not a result: when it is under a bar, no refit of the model can meet that bar, and the features (not the fit) are
what must change. The shipped constants come from bench/lessons_fit_confidence.py, on harvested data only.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lessons_bars import DATA, LESSONS  # noqa: E402  (the dev sets' paths, one place)

import lessons.ranking as ranking  # noqa: E402
import lessons.service as service  # noqa: E402
from lessons.model import ErrorQuery, LessonInput  # noqa: E402
from memory_graph.app import services_for_folder  # noqa: E402

DEV = DATA / "errors-dev.json"
DISTRACTORS = LESSONS / "distractors-dev.json"
# name -> (lesson files, query file, accepted suffix)
CONDITIONS: dict[str, tuple[list[Path], Path, str | None]] = {
    "errors-dev": ([DEV], DEV, None),
    "+ distractors": ([DEV, DISTRACTORS], DEV, None),
    "authored A+B + distractors": ([LESSONS / "errors-dev-authored.json", DISTRACTORS], DEV, "__B"),
    "authored A + distractors": ([LESSONS / "errors-dev-authored-A.json", DISTRACTORS], DEV, None),
    "query types": ([LESSONS / "errors-dev-querytypes.json"], LESSONS / "errors-dev-querytypes.json", None),
    "negatives (26 lessons)": ([DEV], LESSONS / "negatives-dev.json", None),
    "negatives (+ distractors)": ([DEV, DISTRACTORS], LESSONS / "negatives-dev.json", None),
}
MAX_FALSE_POSITIVES = 0.10
# (top answer's features or None, right, answered with the shipped constants)
Row = tuple[tuple[float, ...] | None, bool, bool]


def ask_all(lesson_files: list[Path], query_file: Path, suffix: str | None) -> tuple[list[Row], list[Row]]:
    """(find rows, recommendation rows) for every query."""
    seen: list[tuple[float, ...]] = []
    original: Callable[..., float] = ranking.confidence

    def recording(weights: tuple[float, ...], features: tuple[float, ...]) -> float:
        seen.append(features)
        return original(weights, features)

    def top_features() -> tuple[float, ...] | None:
        found = max(seen, key=lambda features: features[0], default=None)
        seen.clear()
        return found

    cuts = {name: getattr(service, name) for name in ("FIND_MIN_CONFIDENCE", "RECOMMEND_MIN_CONFIDENCE")}
    floors = {name: getattr(service, name) for name in ("FIND_THRESHOLD", "RECOMMEND_THRESHOLD")}
    find: list[Row] = []
    rec: list[Row] = []
    with tempfile.TemporaryDirectory() as folder:
        lessons = services_for_folder(Path(folder)).lessons
        for path in lesson_files:
            for lesson in json.loads(path.read_text(encoding="utf-8"))["lessons"]:
                lessons.create_lesson(LessonInput.model_validate(lesson))
        ranking.confidence = recording  # type: ignore[assignment]
        for name in [*cuts, *floors]:
            setattr(service, name, 0.0)
        try:
            for query in json.loads(query_file.read_text(encoding="utf-8"))["queries"]:
                expected = query["expected"]

                def right(name: str | None, expected: Any = expected) -> bool:
                    return expected is not None and name in (expected, f"{expected}{suffix or ''}")

                found = lessons.find_similar_errors(ErrorQuery.model_validate(query["errorPattern"]), limit=1)
                features = top_features()
                top = found.matches[0] if found.matches else None
                shipped = top is not None and top.confidence >= cuts["FIND_MIN_CONFIDENCE"]
                shipped = shipped and top is not None and top.score >= floors["FIND_THRESHOLD"]
                find.append((features, right(top.name if top else None), shipped))
                recs = lessons.get_lesson_recommendations(query["log"], limit=1).recommendations
                features = top_features()
                best = recs[0] if recs else None
                shipped = best is not None and best.confidence >= cuts["RECOMMEND_MIN_CONFIDENCE"]
                shipped = shipped and best is not None and best.relevance >= floors["RECOMMEND_THRESHOLD"]
                rec.append((features, right(best.name if best else None), shipped))
        finally:
            ranking.confidence = original  # type: ignore[assignment]
            for name, value in {**cuts, **floors}.items():
                setattr(service, name, value)
    return find, rec


def rule_value(features: tuple[float, ...], a: float, b: float, c: float) -> float:
    score, margin, rarest, _, message_coverage = features[:5]
    return score + a * margin + b * message_coverage + c * rarest


def ceiling(rows: dict[str, list[Row]]) -> tuple[dict[str, float], tuple[float, ...]]:
    """The best rule's top-1 per positive condition, and the rule (a, b, c, t)."""
    negatives = [name for name in rows if name.startswith("negatives")]
    positives = [name for name in rows if name not in negatives]
    best: tuple[float, dict[str, float], tuple[float, ...]] = (-math.inf, {}, ())
    for a, b, c in itertools.product((0, 0.5, 1, 2, 3), (0, 0.25, 0.5, 1), (0, 0.25, 0.5)):
        # The lowest t that answers at most MAX_FALSE_POSITIVES of each negative set.
        t = 0.0
        for name in negatives:
            values = sorted((rule_value(f, a, b, c) for f, _, _ in rows[name] if f), reverse=True)
            allowed = int(MAX_FALSE_POSITIVES * len(rows[name]))
            if allowed < len(values):
                t = max(t, values[allowed] + 1e-9)
        kept = {
            name: sum(1 for f, ok, _ in rows[name] if ok and f and rule_value(f, a, b, c) >= t) / len(rows[name])
            for name in positives
        }
        if sum(kept.values()) > best[0]:
            best = (sum(kept.values()), kept, (a, b, c, round(t, 3)))
    return best[1], best[2]


def main() -> int:
    by_tool: dict[str, dict[str, list[Row]]] = {"find": {}, "rec": {}}
    for name, (lesson_files, query_file, suffix) in CONDITIONS.items():
        by_tool["find"][name], by_tool["rec"][name] = ask_all(lesson_files, query_file, suffix)
    for tool, rows in by_tool.items():
        top, rule = ceiling(rows)
        print(f"== {tool}: ceiling rule (a, b, c, t) = {rule}")
        print(f"{'condition':30}{'rank':>8}{'shipped':>9}{'ceiling':>9}")
        for name, condition_rows in rows.items():
            count = len(condition_rows)
            if name.startswith("negatives"):
                answered = sum(1 for _, _, shipped in condition_rows if shipped) / count
                print(f"{name:30}{'':>8}{answered:>9.0%}{MAX_FALSE_POSITIVES:>9.0%}  (negatives answered)")
                continue
            ranked = sum(1 for _, ok, _ in condition_rows if ok) / count
            shipped = sum(1 for _, ok, kept in condition_rows if ok and kept) / count
            print(f"{name:30}{ranked:>8.3f}{shipped:>9.3f}{top[name]:>9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
