"""Property: any sequence of graph operations, saved and reloaded, gives the graph the service held."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_graph.errors import NotFoundError
from memory_graph.model import Entity, ObservationAddition, ObservationDeletion, Relation
from memory_graph.storage import SplitText
from tests.conftest import open_graph

NAMES = st.sampled_from(["Alice", "alice", "Bob", "Zoë", "北京", "Acme Corp", "a\nb", "x" * 40])
TEXT = st.text(max_size=12)

entity = st.builds(
    lambda n, t, o: Entity(name=n, entityType=t, observations=o), NAMES, TEXT, st.lists(TEXT, max_size=3)
)
relation = st.builds(
    lambda f, t, r: Relation.model_validate({"from": f, "to": t, "relationType": r}),
    NAMES,
    NAMES,
    st.sampled_from(["knows", "works_at", "KNOWS"]),
)
operation = st.one_of(
    st.tuples(st.just("create_entities"), st.lists(entity, max_size=3)),
    st.tuples(st.just("create_relations"), st.lists(relation, max_size=3)),
    st.tuples(
        st.just("add_observations"),
        st.lists(
            st.builds(lambda n, c: ObservationAddition(entityName=n, contents=c), NAMES, st.lists(TEXT, max_size=3)),
            max_size=2,
        ),
    ),
    st.tuples(
        st.just("delete_observations"),
        st.lists(
            st.builds(
                lambda n, o: ObservationDeletion(entityName=n, observations=o),
                NAMES,
                st.lists(TEXT, max_size=3),
            ),
            max_size=2,
        ),
    ),
    st.tuples(st.just("delete_entities"), st.lists(NAMES, max_size=2)),
    st.tuples(st.just("delete_relations"), st.lists(relation, max_size=2)),
)


def state(graph) -> tuple:
    result = graph.read_graph()
    return (
        sorted((e.name, e.entityType, tuple(e.observations)) for e in result.entities),
        sorted((r.from_, r.to, r.relationType) for r in result.relations),
    )


def placement(graph) -> tuple:
    memory = graph.store.collections["memory"]
    return memory.locations, {index: list(shard.held_keys()) for index, shard in memory.shards.items()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(operation, max_size=25), shard_lines=st.sampled_from([1, 2, 3, 1000]))
def test_reload_equals_memory(ops: list, shard_lines: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        graph = open_graph(Path(folder), shard_lines=shard_lines)
        follower = open_graph(Path(folder), shard_lines=shard_lines)  # another process, following each commit
        for name, argument in ops:
            with contextlib.suppress(NotFoundError):  # refused calls must change nothing; checked below
                getattr(graph, name)(argument)
            follower.read_graph()
        expected = state(graph)
        reloaded = open_graph(Path(folder), shard_lines=shard_lines)
        assert state(reloaded) == expected == state(follower)
        # Where each record is held (kept up by every commit and every commit followed) is where a load finds it.
        loaded = placement(reloaded)
        assert placement(graph) == loaded and placement(follower) == loaded
        entity_names = {e[0] for e in expected[0]}
        assert all(f in entity_names and t in entity_names for f, t, _ in expected[1])
        for shard in Path(folder).glob("memory*.json"):
            assert shard.read_text(encoding="utf-8").count("\n") <= shard_lines


NAMES = st.sampled_from(["a", "b", "c", "d", "e", "f"])


@settings(max_examples=300, deadline=None)
@given(
    relations=st.lists(st.tuples(NAMES, NAMES, st.sampled_from(["knows", "owns"])), max_size=30),
    chosen=st.lists(NAMES, max_size=8),
    others=st.integers(min_value=0, max_value=40),
)
def test_relations_touching_are_counted_as_they_are_collected(relations: list, chosen: list, others: int) -> None:
    """A cut response reports how many relations touch its matches (for many names, counted in one pass over the
    relations; `others`, unrelated entities, moves the point where that starts)."""
    from memory_graph.graph import GraphState

    state = GraphState()
    entities = [{"type": "entity", "name": f"other {i}", "entityType": "t", "observations": []} for i in range(others)]
    state.records_changed(
        "memory",
        [],
        [*entities, *({"type": "relation", "from": f, "to": t, "relationType": r} for f, t, r in relations)],
    )
    touching = {key for key in set(relations) if key[0] in chosen or key[1] in chosen}
    assert state.count_relations_touching(chosen) == len(touching) == len(state.relations_touching(chosen))


def _split_as_one_pass(text: str) -> tuple[list[tuple[int, str]], int, bool]:
    """How the parse read a shard's text before SplitText: the numbered non-blank lines ("\\r" endings removed),
    the file's line count and whether no line ends in "\\r", all in one pass over the text held whole."""
    count = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    numbered = [
        (number, line)
        for number, line in enumerate((raw.removesuffix("\r") for raw in text.split("\n")), start=1)
        if line.strip()
    ]
    return numbered, count, "\r" not in text


@given(st.lists(st.sampled_from(["", " ", "\t", "\r", "a", "{}", "x\r", " y ", "\u2028", "é"]), max_size=12))
@settings(max_examples=3000, deadline=None)
def test_a_shard_split_into_lines_numbers_them_as_one_pass_over_the_text_did(parts: list[str]) -> None:
    text = "\n".join(parts) + ("\n" if len(parts) % 2 else "")
    split = SplitText.of(text)
    numbered, count, as_written = _split_as_one_pass(text)
    assert (list(split.numbered()), split.lines_in_file, split.lines_as_written) == (numbered, count, as_written)


PIECES = ["", " ", "\r", "a", "{}", "x\r", "\u2028", "é", "日本", "\\ud83d", '"\\u00e9"']


@given(st.lists(st.sampled_from(PIECES), max_size=16), st.integers(min_value=0, max_value=9))
@settings(max_examples=1000, deadline=None)
def test_a_file_decoded_and_split_in_pieces_is_split_as_its_whole_text(parts: list[str], piece_bytes: int) -> None:
    # The load decodes a file a piece at a time (storage/codec.py, DECODE_PIECE_BYTES: 1 MB), so a call answered
    # beside it is not held up for seconds by one long call; pieces of a few bytes cut it at every line.
    text = "\n".join(parts) + ("\n" if len(parts) % 2 else "")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("memory_graph.storage.codec.DECODE_PIECE_BYTES", piece_bytes)
        assert SplitText.of_bytes(text.encode()) == SplitText.of(text)
