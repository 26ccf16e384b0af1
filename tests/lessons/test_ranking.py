"""Ranking pieces: the success statistic, error-line extraction, and identifier-sensitive matching."""

from __future__ import annotations

from lessons.ranking import (
    RECENCY_DECAY,
    LessonIndex,
    combined_score,
    error_lines,
    query_of,
    same_type,
    success_statistic,
    type_key,
)


def test_a_lucky_one_for_one_does_not_beat_a_proven_record() -> None:
    lucky, proven, new = success_statistic(1, 1), success_statistic(95, 100), success_statistic(0, 0)
    assert new == 0.5
    assert lucky < proven
    assert combined_score(0.9, lucky) < combined_score(0.9, proven)
    # a new lesson that matches exactly is not buried by a proven but weakly related one
    assert combined_score(1.0, new) > combined_score(0.6, success_statistic(100, 100))


def test_recent_outcomes_weigh_more() -> None:
    successes = attempts = 0.0
    for outcome in [True] * 20 + [False] * 5:
        successes = successes * RECENCY_DECAY + outcome
        attempts = attempts * RECENCY_DECAY + 1
    assert success_statistic(successes, attempts) < success_statistic(20, 25)


def test_error_lines_skip_ci_wrappers_and_keep_the_error() -> None:
    log = "\n".join(
        [
            "$ python3 job.py",
            "Traceback (most recent call last):",
            '  File "/srv/app/job.py", line 3, in <module>',
            "KeyError: 'region'",
            "Error: Process completed with exit code 1.",
        ]
    )
    lines = error_lines(log)
    assert "KeyError: 'region'" in lines
    assert not any("exit code" in line for line in lines)


def test_error_lines_leave_out_the_commands_that_were_run() -> None:
    """A command echoed by a prompt, `set -x`, a CI step or npm is input, not output: matched as an error line, a
    lesson mentioning the same tool explained all of it."""
    commands = [
        "$ bash build.sh",
        "dev@laptop:~/site$ npm run build",
        "+ bash build.sh",
        "Run bash build.sh",
        "Step 3/8 : RUN bash build.sh",
        "> site@1.0.0 build",
    ]
    for command in commands:
        log = f"{command}\nbuild.sh: line 3: popd: directory stack empty\nbuilt\n"
        lines = error_lines(log)
        assert "build.sh: line 3: popd: directory stack empty" in lines, (command, lines)
        assert not any(command in line for line in lines), (command, lines)
    # A line that merely starts like one is kept.
    assert error_lines("$HOME is not set") == ["$HOME is not set"]


def test_a_bare_npm_error_line_is_a_wrapper() -> None:
    lines = error_lines('npm error Missing script: "dev"\nnpm error\nnpm error To see a list of scripts, run:')
    assert 'npm error Missing script: "dev"' in lines
    assert "npm error" not in lines


def lesson(name: str, message: str, observations: list[str]) -> dict:
    return {
        "type": "entity",
        "name": name,
        "entityType": "lesson",
        "observations": observations,
        "errorPattern": {"type": "runtime", "message": message, "context": ""},
        "verificationSteps": [],
    }


def test_a_quoted_builtin_the_lesson_explains_is_evidence_but_a_user_name_is_not() -> None:
    index = LessonIndex()
    index.put(lesson("TYPO", "NameError: name 'recieve' is not defined", ["A misspelled variable or function."]))
    index.put(
        lesson(
            "PY2_PRINT",
            "NameError: name 'unicode' is not defined",
            ["Python 2 code run on Python 3: unicode was renamed to str."],
        )
    )

    def best(message: str) -> str:
        query = index.prepare(query_of(message))
        return max(index.lessons.values(), key=lambda item: index.match(query, item, "runtime")).name

    assert best("NameError: name 'unicode' is not defined") == "PY2_PRINT"
    assert best("NameError: name 'totl' is not defined") == "TYPO"


def test_error_types_compare_by_stem() -> None:
    alike = [
        ("dependency", "dependencies"),
        ("build", "Build-Error"),
        ("network", "Network errors"),
        ("process", "processes"),
    ]
    unlike = [("data", "database"), ("runtime", "network"), ("vcs", "vc")]
    assert all(same_type(type_key(a), type_key(b)) for a, b in alike)
    assert not any(same_type(type_key(a), type_key(b)) for a, b in unlike)
