"""Fit the lesson-match confidence model (ranking.FIND_CONFIDENCE / RECOMMEND_CONFIDENCE), its cut and score floors.

    .venv/bin/python bench/harvest_lessons.py            # real errors of kinds the dev sets lack, three styles
    PYTHONHASHSEED=0 .venv/bin/python bench/lessons_fit_confidence.py   # the constants to paste into ranking.py
    PYTHONHASHSEED=0 .venv/bin/python bench/lessons_fit_confidence.py --evaluate  # the shipped ones, fit nothing
    PYTHONHASHSEED=0 .venv/bin/python bench/lessons_fit_confidence.py --cross-validate '' a b c  # out of fold

Fitting data, all harvested on this machine by really running tools (never the dev sets, which stay for
measuring): bench/data/harvested-lessons.json (classes of error with a lesson in three styles: the raw key line,
an assistant's summary `__A`, a generalized pattern `__B`; other occurrences of each as queries; errors no class
covers as negatives; distractor lessons `DIS_*`) and bench/data/harvested-negatives-2.json (142 more errors of kinds
none of those lessons covers, one per kind, from 22 tools). (bench/data/harvested-negatives.json, the earliest
negatives, is not used: some of its errors are kinds that harvested-lessons.json has classes for.)
Stores: the raw lessons alone, with the distractors, the summaries with the distractors, all three styles with
the distractors. Each query is asked with abstention off; the top answer is labelled 1 when right, 0 when wrong
or when the query is a negative.

The features are the ones the service computes (recorded from its own calls to ranking.confidence, so the fit sees
exactly what ships): score, margin over the best rival (a lesson that does not give the same fix), the clues
(ranking.clues: the share of the query's rarest words the lesson explains, whether it names the query's error class,
message coverage, query coverage, and the shares of the query and of its rarest words the lesson's prose explains),
ln(store size), how crowded the call's top is (ranking.crowding). Model: logistic regression by gradient descent
(no numpy in the default install), with the weight of ln(store size) kept at or below zero: more lessons are more
chances of a near miss, never a reason for more confidence (unconstrained, the four fitting stores' sizes, 50 to
450 lessons, gave it a positive weight, which made a 1,000-lesson store answer uncovered errors more often).
Cut: the confidence that maximises right answers minus WRONG_COST x wrong ones over the fitting rows, with the
negatives weighted to make up NEGATIVE_SHARE of the queries (the share harvested-lessons.json alone has), so that
harvesting more negatives makes the fit surer, not the cut stricter: a confident wrong lesson costs the user
more than an honest "nothing fits".
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import lessons.ranking as ranking  # noqa: E402
import lessons.service as service  # noqa: E402
from lessons.model import ErrorQuery  # noqa: E402
from memory_graph.app import services_for_folder  # noqa: E402
from memory_graph.graph import ImportSummary  # noqa: E402

DATA = ROOT / "bench" / "data"
WRONG_COST = 2.0
NEGATIVE_SHARE = 0.25
SIZE_FEATURE = 8  # ln(store size), in the order of ranking.confident's features
Row = tuple[list[float], float]
Labelled = tuple[Row, bool, str]  # a row, whether its query is a negative, its query's class
FOLDS = 5


def load(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def right(answer: str, expected: str | None) -> bool:
    """A hit on any style of the expected class (CLASS, CLASS__A, CLASS__B)."""
    return expected is not None and answer.split("__")[0] == expected.split("__")[0]


def stores(harvested: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    lessons = harvested["lessons"]
    distractors = [lesson for lesson in lessons if lesson["name"].startswith("DIS_")]
    raw = [x for x in lessons if not x["name"].startswith("DIS_") and "__" not in x["name"]]
    summaries = [x for x in lessons if x["name"].endswith("__A")]
    styled = [x for x in lessons if not x["name"].startswith("DIS_")]
    return {
        "raw": raw,
        "raw + distractors": raw + distractors,
        "summaries + distractors": summaries + distractors,
        "all styles + distractors": styled + distractors,
    }


class Recorder:
    """Stands in for ranking.confidence during a call: keeps every candidate's features, accepts every one."""

    def __init__(self) -> None:
        self.features: list[tuple[float, ...]] = []

    def __call__(self, weights: tuple[float, ...], features: tuple[float, ...]) -> float:
        self.features.append(features)
        return 1.0

    def top(self) -> list[float] | None:
        """The features of the best-scoring candidate of the last call."""
        found = max(self.features, key=lambda f: f[0], default=None)
        self.features = []
        return list(found) if found is not None else None


def group_of(query: dict[str, Any]) -> str:
    """The query's class (its lesson's name without a style), or the query itself when it is a negative: the unit
    cross-validation keeps together, so no fold learns a class it is tested on."""
    return query["expected"].split("__")[0] if query["expected"] else f"negative {query['id']}"


def collect(store: list[dict[str, Any]], queries: list[dict[str, Any]]) -> tuple[list[Labelled], list[Labelled]]:
    """(find rows, recommendation rows): the top answer's features and whether it is right, whether the query is a
    negative, and its class (`group_of`)."""
    find: list[Labelled] = []
    rec: list[Labelled] = []
    recorder = Recorder()
    with tempfile.TemporaryDirectory() as folder:
        svc = services_for_folder(Path(folder)).lessons
        svc.import_lessons([{"type": "entity", "entityType": "lesson", **x} for x in store], ImportSummary())
        original: Callable[..., float] = ranking.confidence
        ranking.confidence = recorder  # type: ignore[assignment]
        try:
            for query in queries:
                found = svc.find_similar_errors(ErrorQuery.model_validate(query["errorPattern"]), limit=1).matches
                features = recorder.top()
                negative = query["expected"] is None
                if found and features is not None:
                    find.append(((features, float(right(found[0].name, query["expected"]))), negative, group_of(query)))
                recs = svc.get_lesson_recommendations(query["log"], limit=1).recommendations
                features = recorder.top()
                if recs and features is not None:
                    rec.append(((features, float(right(recs[0].name, query["expected"]))), negative, group_of(query)))
        finally:
            ranking.confidence = original  # type: ignore[assignment]
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
        weights[SIZE_FEATURE] = min(weights[SIZE_FEATURE], 0.0)
    return weights


def predict(weights: list[float], x: list[float]) -> float:
    return ranking.confidence(tuple(weights), tuple(x))


def objective(
    weights: list[float], rows: list[tuple[Row, bool]], negative_weight: float, cut: float, floor: float = 0.0
) -> float:
    """Right answers kept minus WRONG_COST x wrong ones, an answer to a negative query counting `negative_weight`:
    what the cut maximises, and what tells two methods apart on the fitting data."""
    kept = [
        (y, negative_weight if negative else 1.0)
        for (x, y), negative in rows
        if predict(weights, x) >= cut and x[0] >= floor
    ]
    return sum(weight * (y - WRONG_COST * (1 - y)) for y, weight in kept)


def best_cut(weights: list[float], rows: list[tuple[Row, bool]], negative_weight: float, floor: float = 0.0) -> float:
    """The confidence cut (two decimals) maximising right - WRONG_COST x wrong answers kept (scoring at least
    `floor`), an answer to a negative query counting `negative_weight`."""
    best, best_value = 0.0, -math.inf
    for step in range(100):
        value = objective(weights, rows, negative_weight, step / 100, floor)
        if value > best_value:
            best, best_value = step / 100, value
    return best


def score_floor(rows: list[Row]) -> float:
    """The score floor: the lowest score a right answer had, rounded down to 0.05 (the model is not trusted below)."""
    return math.floor(20 * min(x[0] for x, y in rows if y)) / 20


def fit_newton(rows: list[Row], l2: float = 1e-3, iterations: int = 30) -> list[float]:
    """The same model as `fit` (logistic, the same l2, the weight of ln size at or below zero), by Newton's method:
    a few seconds instead of minutes, for cross-validation's many fits."""
    size = len(rows[0][0]) + 1
    weights, free = [0.0] * size, [True] * size
    for _ in range(iterations):
        gradient, hessian = [0.0] * size, [[0.0] * size for _ in range(size)]
        for x, y in rows:
            values = [*x, 1.0]
            p = predict(weights, x)
            for i in range(size):
                gradient[i] += (p - y) * values[i]
                for j in range(i, size):
                    hessian[i][j] += p * (1 - p) * values[i] * values[j]
        # A weight held at zero is let go again when the loss would fall as it went negative (else it stays pinned
        # at its first step past zero, short of the constrained optimum).
        pinned_falls = not free[SIZE_FEATURE] and gradient[SIZE_FEATURE] / len(rows) + l2 * weights[SIZE_FEATURE] > 0
        if pinned_falls:
            free[SIZE_FEATURE] = True
        kept = [i for i in range(size) if free[i]]
        # The system (H / n + l2) step = g / n + l2 w, for the weights still free, by Gauss-Jordan elimination.
        system = [
            [hessian[min(i, j)][max(i, j)] / len(rows) + (l2 if i == j else 0.0) for j in kept]
            + [gradient[i] / len(rows) + l2 * weights[i]]
            for i in kept
        ]
        for column in range(len(kept)):
            pivot = max(range(column, len(kept)), key=lambda r: abs(system[r][column]))
            system[column], system[pivot] = system[pivot], system[column]
            for r in range(len(kept)):
                if r != column:
                    factor = system[r][column] / system[column][column]
                    system[r] = [a - factor * b for a, b in zip(system[r], system[column], strict=True)]
        steps = {i: system[k][-1] / system[k][k] for k, i in enumerate(kept)}
        for i, step in steps.items():
            weights[i] -= step
        if weights[SIZE_FEATURE] > 0:
            weights[SIZE_FEATURE], free[SIZE_FEATURE] = 0.0, False
        if max(map(abs, steps.values())) < 1e-6 and not pinned_falls:
            break
    return weights


def cross_validate(labelled: list[Labelled], negative_weight: float, salt: str) -> str:
    """Out-of-fold figures: the queries split in FOLDS by class (`group_of`, salted), each fold answered by a model,
    cut and floor fitted on the others. A method is kept when it wins here, not only on the rows it was fitted on
    (more features always fit those better)."""
    total, right_kept, wrong_kept, negatives_kept = 0.0, 0, 0, 0
    for fold in range(FOLDS):
        held = [zlib.crc32((salt + group).encode()) % FOLDS == fold for _, _, group in labelled]
        train = [(row, negative) for (row, negative, _), out in zip(labelled, held, strict=True) if not out]
        test = [(row, negative) for (row, negative, _), out in zip(labelled, held, strict=True) if out]
        weights = fit_newton([row for row, _ in train])
        floor = score_floor([row for row, _ in train])
        cut = best_cut(weights, train, negative_weight, floor)
        total += objective(weights, test, negative_weight, cut, floor)
        for (x, y), negative in test:
            if predict(weights, x) >= cut and x[0] >= floor:
                negatives_kept += negative
                right_kept += bool(y) and not negative
                wrong_kept += not y and not negative
    return f"objective {total:.1f}: right {right_kept}, wrong {wrong_kept}, negatives answered {negatives_kept}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--evaluate",
        action="store_true",
        help="fit nothing: print what the shipped constants do on the harvested stores (to choose between methods "
        "on our own data; the dev sets only measure)",
    )
    parser.add_argument(
        "--cross-validate",
        metavar="SALT",
        nargs="*",
        help="fit nothing to paste: print out-of-fold figures for the method as it is, once per salt of the folds",
    )
    args = parser.parse_args()
    shipped = {
        "FIND": (ranking.FIND_CONFIDENCE, service.FIND_MIN_CONFIDENCE, service.FIND_THRESHOLD),
        "RECOMMEND": (ranking.RECOMMEND_CONFIDENCE, service.RECOMMEND_MIN_CONFIDENCE, service.RECOMMEND_THRESHOLD),
    }
    for name in ("FIND_MIN_CONFIDENCE", "RECOMMEND_MIN_CONFIDENCE", "FIND_THRESHOLD", "RECOMMEND_THRESHOLD"):
        setattr(service, name, 0.0)
    ranking.RELATIVE_CUTOFF = 0.0
    harvested = load("harvested-lessons.json")
    queries = harvested["queries"] + load("harvested-negatives-2.json")["queries"]
    positives = sum(1 for q in queries if q["expected"])
    negatives = len(queries) - positives
    negative_weight = NEGATIVE_SHARE / (1 - NEGATIVE_SHARE) * positives / negatives
    labelled = {label: collect(store, queries) for label, store in stores(harvested).items()}
    if args.cross_validate is not None:
        for index, tool in enumerate(("FIND", "RECOMMEND")):
            every = [row for pair in labelled.values() for row in pair[index]]
            for salt in args.cross_validate or [""]:
                print(f"{tool}, folds salted {salt!r}: {cross_validate(every, negative_weight, salt)}")
        return 0
    collected = {
        label: tuple([(row, negative) for row, negative, _ in rows] for rows in pair)
        for label, pair in labelled.items()
    }
    for index, tool in enumerate(("FIND", "RECOMMEND")):
        rows = [row for pair in collected.values() for row, _ in pair[index]]
        if args.evaluate:
            constants, cut, floor = shipped[tool]
            weights = list(constants)
            print(f"{tool}: the shipped constants")
        else:
            weights = fit(rows)
            cut = best_cut(weights, [row for pair in collected.values() for row in pair[index]], negative_weight)
            floor = score_floor(rows)
            print(f"{tool}_CONFIDENCE = {tuple(round(w, 3) for w in weights)}")
            print(f"{tool}_MIN_CONFIDENCE = {cut}")
            print(f"{tool}_THRESHOLD = {floor}")
        every = [row for pair in collected.values() for row in pair[index]]
        print(
            f"  objective (right - {WRONG_COST:g} x wrong kept, negatives weighted): "
            f"{objective(weights, every, negative_weight, cut, floor):.1f}"
        )
        for label, pair in collected.items():
            kept = [(y, negative) for (x, y), negative in pair[index] if predict(weights, x) >= cut and x[0] >= floor]
            right_before = sum(y for (_, y), _ in pair[index])
            print(
                f"  {label:26} top-1 {right_before / positives:.3f} without abstention, "
                f"{sum(y for y, _ in kept) / positives:.3f} with; negatives answered "
                f"{sum(negative for _, negative in kept) / negatives:.0%}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
