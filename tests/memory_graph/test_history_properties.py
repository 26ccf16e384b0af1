"""Property: after any sequence of operations (the nine, the edits, restores, lessons), replaying the history from
empty gives exactly the records the files hold; refused calls add no event."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lessons.model import LessonInput
from memory_graph.app import Services
from memory_graph.errors import MemoryGraphError
from memory_graph.graph import LESSONS, MEMORY
from memory_graph.history import ObservationUpdate, replay_history
from tests.conftest import open_services
from tests.memory_graph.test_properties import NAMES, TEXT, operation

edit = st.one_of(
    st.tuples(
        st.just("update_observations"),
        st.lists(
            st.builds(lambda n, o, w: ObservationUpdate(entityName=n, old=o, new=w or "n"), NAMES, TEXT, TEXT),
            max_size=2,
        ),
    ),
    st.tuples(st.just("rename_entity"), st.tuples(NAMES, NAMES)),
    st.tuples(st.just("merge_entities"), st.tuples(st.lists(NAMES, min_size=1, max_size=3), NAMES)),
    st.tuples(st.just("restore_entity"), NAMES),
    st.tuples(st.just("create_lesson"), NAMES),
)


def run(services: Services, name: str, argument: Any) -> None:
    if name == "restore_entity":
        services.history.restore_entity(argument)
    elif name == "create_lesson":
        lesson = {"name": argument, "errorPattern": {"type": "build", "message": "boom", "context": "ci"}}
        services.lessons.create_lesson(LessonInput.model_validate(lesson))
    elif isinstance(argument, tuple):
        getattr(services.graph, name)(*argument)
    else:
        getattr(services.graph, name)(argument)


def stored(services: Services) -> dict[str, dict[tuple[str, ...], dict[str, Any]]]:
    store = services.store
    with store.reading():
        return {
            name: {key: store.collections[name].record(key) for key in store.collections[name].locations}
            for name in (MEMORY, LESSONS)
        }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(operation, edit), max_size=14))
def test_replaying_the_history_gives_the_current_records(ops: list[tuple[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        services = open_services(Path(folder))
        for name, argument in ops:
            events = len(services.store.events())
            files = {p.name: p.read_bytes() for p in Path(folder).iterdir() if p.suffix == ".json"}
            try:
                run(services, name, argument)
            except MemoryGraphError:
                assert len(services.store.events()) == events
                assert files == {p.name: p.read_bytes() for p in Path(folder).iterdir() if p.suffix == ".json"}
        replayed = replay_history(services.store)
        assert {n: replayed[n] for n in (MEMORY, LESSONS)} == stored(services)
        reopened = open_services(Path(folder))
        assert {n: replay_history(reopened.store)[n] for n in (MEMORY, LESSONS)} == stored(reopened) == stored(services)
