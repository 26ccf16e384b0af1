"""Retrieval quality on real error output (../shared/data/errors-dev.json): the bars stay met."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
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


def test_dev_set_in_process(corpus: dict) -> None:
    """errors-dev.json, 26 lessons. Issue-8 bar 0.99 / 0.97, not met since the confidence model was fitted on
    harvested errors: 0.972 / 0.953 (it abstains on weak right matches, while unrelated errors went from 26% / 52%
    answered to 2% / 4%); find 0.962 since the crowding clue (thirty-sixth session: one JSON error more abstained
    on here, three right answers more among the distractors). The floors guard those figures."""
    result = load_quality_module().evaluate(corpus)
    assert result["find_top1"] >= 0.96, result
    assert result["rec_top1"] >= 0.95, result
    assert result["find_mrr"] >= 0.96 and result["rec_mrr"] >= 0.95, result


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
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "MEMORY_SEMANTIC": "off"},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


# -- issue 8: the extended evaluation data (../shared/data/lessons) ------------------------------------------
LESSONS_DATA = ROOT.parent / "shared" / "data" / "lessons"
# (case, lesson files, query file, accepted suffix, (find top-1, rec top-1) floors, issue-8 bar). The floors are the
# figures measured when the confidence model landed (docs/benchmarks.md), a little rounded down: they guard against
# regressions. The bars are not all met yet; a floor is raised as the figure improves.
EXTENDED = [
    # (find 0.953 -> 0.962 when a type most lessons share stopped lifting them, thirty-seventh session)
    ("distractors", ["errors-dev.json", "distractors-dev.json"], "errors-dev.json", None, (0.96, 0.91), (0.97, 0.95)),
    (
        "authored",
        ["errors-dev-authored.json", "distractors-dev.json"],
        "errors-dev-authored.json",
        "__B",
        (0.93, 0.85),
        (0.92, 0.92),
    ),
    # Summaries are matched far less often than raw lines: their words are not the error's, and the confidence
    # reads how much of the error the lesson's prose explains (docs/benchmarks.md, "Lessons", twelfth session).
    (
        "authored-A",
        ["errors-dev-authored-A.json", "distractors-dev.json"],
        "errors-dev-authored-A.json",
        None,
        (0.50, 0.44),
        (0.80, 0.80),
    ),
    # (find 0.972 -> 0.962 with the crowding clue, thirty-sixth session: one JSON error more abstained on)
    ("querytypes", ["errors-dev-querytypes.json"], "errors-dev-querytypes.json", None, (0.96, 0.95), (0.98, 0.98)),
]


def data_file(name: str) -> Path:
    path = CORPUS if name == "errors-dev.json" else LESSONS_DATA / name
    needed(path.exists(), f"evaluation data is not at {path}")
    return path


def top1_rates(lesson_files: list[str], query_file: str, suffix: str | None) -> tuple[float, float, float, float]:
    """(find top-1, rec top-1, find answered, rec answered) in process; answered = any result at all."""
    from lessons.model import ErrorQuery, LessonInput
    from memory_graph.app import services_for_folder

    lessons = [lesson for name in lesson_files for lesson in json.loads(data_file(name).read_text())["lessons"]]
    queries = json.loads(data_file(query_file).read_text())["queries"]
    hits = [0, 0, 0, 0]
    with tempfile.TemporaryDirectory() as folder:
        service = services_for_folder(Path(folder)).lessons
        for lesson in lessons:
            service.create_lesson(LessonInput.model_validate(lesson))
        for query in queries:
            accepted = {query["expected"], f"{query['expected']}{suffix or ''}"} - {None}
            found = [
                m.name for m in service.find_similar_errors(ErrorQuery.model_validate(query["errorPattern"])).matches
            ]
            recs = [r.name for r in service.get_lesson_recommendations(query["log"]).recommendations]
            for i, names in enumerate((found, recs)):
                hits[i] += bool(names) and names[0] in accepted
                hits[i + 2] += bool(names)
    return tuple(h / len(queries) for h in hits)  # type: ignore[return-value]


@pytest.mark.slow
@pytest.mark.parametrize("case", EXTENDED, ids=[c[0] for c in EXTENDED])
def test_extended_sets_hold_their_measured_floors(case: tuple) -> None:
    _, lesson_files, query_file, suffix, (find_floor, rec_floor), _bar = case
    find, rec, _, _ = top1_rates(lesson_files, query_file, suffix)
    assert find >= find_floor and rec >= rec_floor, (find, rec)


@pytest.mark.slow
def test_uncovered_errors_are_answered_less_often_than_measured() -> None:
    """negatives-dev.json: issue-8 bar <= 0.10 for both tools. Measured with the confidence model fitted on harvested
    errors: 0.08 / 0.04 against the dev lessons and distractors (was 0.80 / 0.74), 0.06 / 0.10 against the 26 dev
    lessons alone (was 0.26 / 0.52). Both are within the bar. (Before the prose clues and the line weighting, twelfth
    session: 0.06 / 0.06 and 0.02 / 0.04; those changes answer a few more uncovered errors and far more summaries:
    recommendations on authored-A 0.075 -> 0.443. With the crowding clue, thirty-sixth session, against the
    distractors: 0.06 / 0.06. With a type's weight scaled by how few lessons share it, thirty-seventh session, against
    the 26 lessons: 0.04 / 0.10.)"""
    _, _, find, rec = top1_rates(["errors-dev.json", "distractors-dev.json"], "negatives-dev.json", None)
    assert find <= 0.06 and rec <= 0.06, (find, rec)
    _, _, find, rec = top1_rates(["errors-dev.json"], "negatives-dev.json", None)
    assert find <= 0.04 and rec <= 0.10, (find, rec)
