"""Property: any sequence of lesson operations, reloaded from the files at a tiny shard size, gives the same
lessons (fields, observations, outcome counts), and find_similar_errors answers the same."""

from __future__ import annotations

import heapq
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lessons import signature
from lessons.model import ErrorQuery, LessonInput, SuccessReport
from lessons.ranking import ERROR_HINT, ERROR_HINTS, by_first_letter, heaviest, query_of
from memory_graph.app import Services
from memory_graph.errors import MemoryGraphError
from memory_graph.model import ObservationAddition
from tests.conftest import open_services

NAMES = st.sampled_from(["L1", "L2", "L3", "L4"])
MESSAGES = st.sampled_from(
    ["KeyError: 'x'", "Error: listen EADDRINUSE :::3000", "make: *** No rule to make target 'a.o'.  Stop."]
)

operation = st.one_of(
    st.tuples(st.just("create"), NAMES, MESSAGES, st.integers(0, 5)),
    st.tuples(st.just("outcome"), NAMES, st.booleans()),
    st.tuples(st.just("observe"), NAMES, st.sampled_from(["cause", "fix", "note"])),
    st.tuples(st.just("delete"), NAMES),
)


def open_service(folder: Path) -> Services:
    return open_services(folder, shard_lines=2)


def lessons_of(services: Services) -> list[Any]:
    found = services.lessons.find_similar_errors(ErrorQuery(message="KeyError: 'y'"), limit=50)
    records = sorted(
        (name, tuple(r["observations"]), r["metadata"]["frequency"], r["metadata"]["successCount"])
        for name, r in services.lessons.records.items()
    )
    return [records, [(m.name, m.score) for m in found.matches]]


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.json"))}


def apply(services: Services, op: tuple[Any, ...]) -> None:
    if op[0] == "create":
        services.lessons.create_lesson(
            LessonInput(
                name=op[1],
                errorPattern={"type": "runtime", "message": op[2]},
                metadata={"frequency": op[3], "successCount": op[3] // 2},
            )
        )
    elif op[0] == "outcome":
        services.lessons.update_lesson_success(SuccessReport(lessonName=op[1], success=op[2]))
    elif op[0] == "observe":
        services.graph.add_observations([ObservationAddition(entityName=op[1], contents=[op[2]])])
    else:
        services.graph.delete_entities([op[1]])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(operation, max_size=20))
def test_lessons_reload_to_the_same_state(ops: list) -> None:
    with tempfile.TemporaryDirectory() as folder:
        service = open_service(Path(folder))
        for op in ops:
            before = (files_of(Path(folder)), lessons_of(service))
            try:
                apply(service, op)
            except MemoryGraphError:
                assert (files_of(Path(folder)), lessons_of(service)) == before, f"refused {op} changed something"
        expected = lessons_of(service)
        assert lessons_of(open_service(Path(folder))) == expected
        for shard in Path(folder).glob("lesson*.json"):
            assert shard.read_text(encoding="utf-8").count("\n") <= 2


# -- the recommendation's shortcuts give what the plain computation gives ---------------------------------------


@given(
    weights=st.dictionaries(st.text("abcd", min_size=1, max_size=3), st.sampled_from([0.5, 1.0, 1.5, 2.25])),
    count=st.integers(0, 8),
)
def test_the_heaviest_names_are_the_largest_by_weight_then_name(weights: dict[str, float], count: int) -> None:
    expected = heapq.nlargest(count, weights, key=lambda name: (weights[name], name))
    assert heaviest(weights, count) == expected


LINES = [
    "KeyError: 'user_id'",
    "Error: listen EADDRINUSE: address already in use :::3000",
    "make: *** No rule to make target 'a.o', needed by 'app'.  Stop.",
    "ModuleNotFoundError: No module named 'requests'",
    'npm error Missing script: "start"',
    "fatal: not a git repository (or any of the parent directories): .git",
    "Traceback (most recent call last):",
    '  File "app.py", line 3, in <module>',
    "done",
    "error: could not compile `demo` due to 2 previous errors",
]


@pytest.fixture(scope="module")
def small_index(tmp_path_factory: pytest.TempPathFactory) -> Any:
    services = open_services(tmp_path_factory.mktemp("lessons"))
    for i, line in enumerate(LINES[:6]):
        services.lessons.create_lesson(
            LessonInput(
                name=f"L{i}",
                errorPattern={"type": "runtime", "message": line},
                observations=[f"cause and fix of {line.split(':')[0]}"],
            )
        )
    return services.lessons.index


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(
        st.tuples(st.sampled_from(LINES), st.sampled_from([0.05, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])),
        min_size=1,
        max_size=8,
    ),
    lesson=st.integers(0, 5),
)
# A heavy line that scores fairly (a traceback's frame line against the lesson naming its module) and a lighter
# line that is the lesson's message: the lighter one wins, and a bound too tight would never read it.
@example(lines=[(LINES[7], 1.0), (LINES[3], 0.6)], lesson=3)
def test_the_best_match_is_the_best_of_every_query(small_index: Any, lines: list, lesson: int) -> None:
    """best_match skips queries and partial alignments by bounds: its score is still the best weighted score of
    all the queries, and the winner is one that scores it."""
    queries = [small_index.prepare(query_of(text, weight=weight)) for text, weight in lines]
    indexed = small_index.lessons[f"L{lesson}"]
    best, winner = small_index.best_match(queries, indexed)
    scores = [small_index.match(query, indexed) * query.weight for query in queries]
    assert best == pytest.approx(max(scores), rel=1e-12, abs=1e-12)
    if winner is not None:
        assert small_index.match(winner, indexed) * winner.weight == pytest.approx(max(scores), rel=1e-12)
    else:
        assert max(scores) == 0


# Pieces that the place patterns (signature.py) read: times, addresses, hex, paths and drive letters, URLs, quotes.
PLACE_PIECES = [
    *"a0f9Ab/.:\\-@+_~C x\n'\"`",
    "deadbeef1",
    "0x1f",
    "http://",
    "::",
    "1.2.3.4",
    ".py",
    ".c",
    "12:30:45",
    "2024-01-02 ",
    "--",
    "C:",
    "e3b0c442",
    "://a",
    "[::1]:80",
    "v1.2@",
    "~/",
    "./",
]


@settings(max_examples=3000, deadline=None)
@given(text=st.lists(st.sampled_from(PLACE_PIECES), max_size=30).map("".join))
# A drive letter starts a path inside a word: HEX must not run again after PATH cut the folders off.
@example(text="-.pyb::deadbeef19C:C//0~/")
def test_evidence_places_are_replaced_as_one_pattern_after_another(text: str) -> None:
    """The one-pass replacement of places in evidence text gives what each pattern over the whole text in turn
    gives."""
    expected = text
    for pattern in (signature.TIMESTAMP, signature.UUID, signature.URL, signature.ADDRESS, signature.HEX):
        expected = signature._replace(pattern, expected, " ")
    expected = signature._replace(signature.PATH, expected, signature._file_name)
    assert signature._without_evidence_places(text) == expected


# Pieces of the error hints (ranking.ERROR_HINTS) and what surrounds them: whole hints, their parts, near misses.
HINT_PIECES = ["err", "or", "error", "e", "x", "not ", "a ", "found", "time", "d", "out", "c", "an't", "***", "*"]
HINT_PIECES += ["e1234", "z99", " ", "b", "ad ", "n", "o", "such", "t", "k", "illed", "s", "egmentation", "-", "1"]


@settings(max_examples=3000, deadline=None)
@given(line=st.lists(st.sampled_from(HINT_PIECES), max_size=14).map("".join))
def test_the_grouped_error_hints_find_a_hint_where_the_plain_alternation_does(line: str) -> None:
    plain = re.compile("|".join(ERROR_HINTS.split("|")))
    assert (ERROR_HINT.search(line) is None) == (plain.search(line) is None)


def test_grouping_by_first_letter_leaves_an_alternative_with_a_quantified_first_letter_alone() -> None:
    grouped = re.compile(by_first_letter(["a?b", "ab", "x"]))
    assert grouped.search("b") and grouped.search("ab") and grouped.search("x") and not grouped.search("a")


# The place patterns as first written, each starting with `\b` (signature.word_start writes them to be skipped
# through faster): what they match must not change.
WORD_BOUNDARY_FORMS = {
    "UUID": r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
    "TIMESTAMP": r"\b\d{4}-\d{2}-\d{2}[T _]\d{2}[:_]\d{2}(?:[:_]\d{2}(?:[.,_]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b"
    r"|\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b",
    "HEX": r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{7,40}\b",
}
BOUNDARY_PIECES = [*"0123456789abcdefABCDEFxXgG-_ :T.,Z+é٣", "0x", "deadbeef", "-4b7e-", "2024-01-02", "12:30:45"]


@settings(max_examples=3000, deadline=None)
@given(text=st.lists(st.sampled_from(BOUNDARY_PIECES), max_size=30).map("".join))
def test_the_place_patterns_match_what_their_word_boundary_forms_match(text: str) -> None:
    for name, plain in WORD_BOUNDARY_FORMS.items():
        pattern = getattr(signature, name)
        assert [m.span() for m in pattern.finditer(text)] == [m.span() for m in re.finditer(plain, text)], name
