"""Property: any sequence of lesson operations, reloaded from the files at a tiny shard size, gives the same
lessons (fields, observations, outcome counts), and find_similar_errors answers the same."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lessons.model import ErrorQuery, LessonInput, SuccessReport
from lessons.service import LessonService
from memory_graph.errors import MemoryGraphError
from memory_graph.graph import LESSONS, MEMORY, GraphService
from memory_graph.model import ObservationAddition
from memory_graph.storage import Store

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


def open_service(folder: Path) -> LessonService:
    store = Store({MEMORY: folder / "memory.json", LESSONS: folder / "lesson.json"}, shard_lines=2)
    return LessonService(store, GraphService(store, 80_000))


def lessons_of(service: LessonService) -> list[tuple]:
    found = service.find_similar_errors(ErrorQuery(message="KeyError: 'y'"), limit=50)
    records = sorted(
        (name, tuple(r["observations"]), r["metadata"]["frequency"], r["metadata"]["successCount"])
        for name, r in service.graph.state.entities.items()
    )
    return [records, [(m.name, m.score) for m in found.matches]]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(operation, max_size=20))
def test_lessons_reload_to_the_same_state(ops: list) -> None:
    with tempfile.TemporaryDirectory() as folder:
        service = open_service(Path(folder))
        for op in ops:
            with contextlib.suppress(MemoryGraphError):  # refused calls change nothing: checked below
                if op[0] == "create":
                    service.create_lesson(
                        LessonInput(
                            name=op[1],
                            errorPattern={"type": "runtime", "message": op[2]},
                            metadata={"frequency": op[3], "successRate": 0.5 if op[3] else 0.0},
                        )
                    )
                elif op[0] == "outcome":
                    service.update_lesson_success(SuccessReport(lessonName=op[1], success=op[2]))
                elif op[0] == "observe":
                    service.graph.add_observations([ObservationAddition(entityName=op[1], contents=[op[2]])])
                else:
                    service.graph.delete_entities([op[1]])
        expected = lessons_of(service)
        assert lessons_of(open_service(Path(folder))) == expected
        for shard in Path(folder).glob("lesson*.json"):
            assert shard.read_text(encoding="utf-8").count("\n") <= 2
