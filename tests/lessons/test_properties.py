"""Property: any sequence of lesson operations, reloaded from the files at a tiny shard size, gives the same
lessons (fields, observations, outcome counts), and find_similar_errors answers the same."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lessons.model import ErrorQuery, LessonInput, SuccessReport
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
                metadata={"frequency": op[3], "successRate": 0.5 if op[3] else 0.0},
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
