"""A server on the JSON Lines files answers open_nodes and search_nodes from the files' bytes while its load is
still under way (issue 13: a first start on a large memory parsed every line before its first answer, 45 s at a
million entities). The load is held once it holds the folder's lock, so the reads below provably did not wait
for it; their answers are compared with a server that loaded the same files."""

from __future__ import annotations

import importlib
import json
import random
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_graph.app import Services, services_for_folder
from memory_graph.model import Entity, KnowledgeGraph
from memory_graph.storage import Store
from tests.memory_graph.loading import (
    QUERIES,
    fill,
    names,
    relation,
    relations,
    searches_like_a_loaded_server,
    substring_tier,
)

WAIT = 10.0  # seconds a test waits for something that should happen at once
# (storage/scan.py's and store.py's constants, set by name: nothing outside storage imports its modules)
SCAN = "memory_graph.storage.scan"
NAME_NEEDLES = 16  # scan.NAME_NEEDLES: up to it, names are found by their bytes, past it by every record's names
JOURNAL_FORMAT = "memory-graph-journal/2"


class HeldLoad:
    """A second server on the same files whose load stops, once it holds their lock, until released."""

    def __init__(
        self,
        folder: Path,
        monkeypatch: pytest.MonkeyPatch,
        max_response_chars: int = 80_000,
        before: Callable[[Services], None] = lambda services: None,
    ) -> None:
        monkeypatch.setattr("memory_graph.storage.store.SCAN_MIN_BYTES", 0)  # (small files: loaded at once otherwise)
        self.reached, self.release = threading.Event(), threading.Event()
        original = Store._catch_up

        def held(store: Store, startup: bool = False, full: bool = True) -> None:
            if startup and not self.reached.is_set():
                self.reached.set()
                assert self.release.wait(WAIT * 3), "the test never released the load"
            original(store, startup, full)

        monkeypatch.setattr(Store, "_catch_up", held)
        self.services = services_for_folder(folder, shard_lines=3, max_response_chars=max_response_chars)
        before(self.services)
        self.services.store.opening()
        self.loader = threading.Thread(target=self.services.store.open, daemon=True)
        self.loader.start()
        assert self.reached.wait(WAIT), "the load never started"
        assert self.services.store.reads_while_loading() is not None

    def finish(self) -> None:
        self.release.set()
        self.loader.join(WAIT)
        assert not self.loader.is_alive()
        assert self.services.store.reads_while_loading() is None


def loaded_services(folder: Path, max_response_chars: int = 80_000) -> Services:
    services = services_for_folder(folder, shard_lines=3, max_response_chars=max_response_chars)
    services.store.open()
    return services


@pytest.fixture
def held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Services, HeldLoad]]:
    fill(loaded_services(tmp_path), escaped=True)
    loaded = loaded_services(tmp_path)
    load = HeldLoad(tmp_path, monkeypatch)
    try:
        yield loaded, load
    finally:
        load.release.set()
        load.loader.join(WAIT)


@pytest.mark.parametrize("needles", [NAME_NEEDLES, 0])  # each name's bytes; or every record's names
def test_reads_while_the_files_load_are_answered_from_them_like_a_loaded_server(
    held: tuple[Services, HeldLoad], monkeypatch: pytest.MonkeyPatch, needles: int
) -> None:
    monkeypatch.setattr(f"{SCAN}.NAME_NEEDLES", needles)
    loaded, load = held
    early = load.services.graph
    searches_like_a_loaded_server(early, loaded)
    for wanted in (["Teapot", "Alice", "missing", "PORT_IN_USE", "Alice"], ["Zoë"], ["Bob", "Deploy tool"]):
        assert early.open_nodes(wanted) == loaded.graph.open_nodes(wanted), wanted
    assert load.loader.is_alive()  # all of it answered while the load was held
    load.finish()
    for query in QUERIES:
        assert early.search_nodes(query) == loaded.graph.search_nodes(query), query


def test_a_cut_answer_while_the_files_load_counts_what_a_loaded_server_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("memory_graph.graph.LOADING_LEADING", 30)
    filler = loaded_services(tmp_path, max_response_chars=2_000)
    many = [Entity(name=f"Service {i}", entityType="service", observations=[f"port {8000 + i}"]) for i in range(60)]
    filler.graph.create_entities(many)
    filler.graph.create_relations([relation(f"Service {i}", f"Service {i + 1}", "calls") for i in range(59)])
    loaded = loaded_services(tmp_path, max_response_chars=2_000)
    load = HeldLoad(tmp_path, monkeypatch, max_response_chars=2_000)
    try:
        for query in ["service", "service port", "Service 5"]:
            answer, expected = load.services.graph.search_nodes(query), loaded.graph.search_nodes(query)
            tier = set(substring_tier(loaded, query))
            assert answer.truncated is not None and expected.truncated is not None, query
            assert answer.truncated.totalEntities == len(tier) <= expected.truncated.totalEntities, query
            with loaded.store.reading():
                every_relation = set(loaded.graph.state.relations)
            touching = {r for r in every_relation if r[0] in tier or r[1] in tier}
            assert answer.truncated.totalRelations == len(touching), query
            assert names(answer) == names(expected), query
            assert answer.relations == expected.relations, query
        assert load.loader.is_alive()
    finally:
        load.finish()


def spellings(record: dict[str, Any], rng: random.Random) -> str:
    """One line for a record, as some writer might have written it: keys in another order, spaces, non-ASCII
    escaped, the solidus escaped, no `type` (the reader takes a complete record without one), a CRLF ending."""
    items = list(record.items())
    if rng.random() < 0.2:
        rng.shuffle(items)
    if rng.random() < 0.1:
        items = [(k, v) for k, v in items if k != "type"]
    separators = (", ", ": ") if rng.random() < 0.2 else (",", ":")
    line = json.dumps(dict(items), ensure_ascii=rng.random() < 0.3, separators=separators)
    if rng.random() < 0.1:
        line = line.replace("/", "\\/")
    if rng.random() < 0.05:
        line = " " + line
    return line + ("\r" if rng.random() < 0.05 else "")


NAMES = ["Alice", "Bob", "Zoë", "a/b", 'say "hi"', "back\\slash", "tab\there", "日本", "relation", "entity", "x"]


def hostile_memory(path: Path, seed: int) -> list[str]:
    """A memory file written by several hands: every spelling above, records written twice (merged by a load),
    blank and unreadable lines, a byte order mark, objects inside observations that look like records."""
    rng = random.Random(seed)
    lines: list[str] = []
    for name in NAMES:
        observations = [rng.choice(["plain", "see " + rng.choice(NAMES), '{"type":"relation","from":"Bob"}'])]
        record = {"type": "entity", "name": name, "entityType": rng.choice(["person", "entity"]), "observations": []}
        record["observations"] = observations
        lines.append(spellings(record, rng))
        if rng.random() < 0.3:  # written again, with another observation: the load merges the two
            lines.append(spellings({**record, "observations": ["again " + name]}, rng))
    for _ in range(25):
        start, end = rng.choice(NAMES), rng.choice(NAMES)
        kind = rng.choice(["knows", "relation", "works with"])
        lines.append(spellings({"type": "relation", "from": start, "to": end, "relationType": kind}, rng))
    lines.insert(rng.randrange(len(lines)), "")
    lines.insert(rng.randrange(len(lines)), '{"type":"entity","name":"broken"')
    lines.insert(
        rng.randrange(len(lines)),
        json.dumps({"type": "entity", "name": "Nested", "entityType": "t", "observations": [], "meta": {}})[:-1]
        + ',"x":{"type":"relation","from":"Alice","to":"Bob","relationType":"r"}}',
    )
    path.write_text("\ufeff" + "\n".join(lines) + "\n", encoding="utf-8")
    return NAMES


@pytest.mark.parametrize("seed", range(12))
def test_reads_while_loading_read_every_spelling_of_a_record_as_the_load_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    every = hostile_memory(tmp_path / "memory.json", seed)
    loaded = loaded_services(tmp_path)
    monkeypatch.setattr(f"{SCAN}.NAME_NEEDLES", seed % 3 * 8)  # 0 and 8: both ways of finding names
    load = HeldLoad(tmp_path, monkeypatch)
    rng = random.Random(seed)
    try:
        for wanted in ([name] for name in [*every, "Nested", "missing"]):
            assert load.services.graph.open_nodes(wanted) == loaded.graph.open_nodes(wanted), wanted
        for _ in range(5):
            wanted = rng.sample(every, rng.randrange(2, len(every)))
            assert load.services.graph.open_nodes(wanted) == loaded.graph.open_nodes(wanted), wanted
        for query in ["see", "PLAIN", "again", "say", "person", "Bob", "slash"]:
            assert sorted(names(load.services.graph.search_nodes(query))) == sorted(substring_tier(loaded, query))
        reads = load.services.store.reads_while_loading()
        assert reads is not None
        with reads.answering():
            for wanted in [every, *(rng.sample(every, rng.randrange(1, len(every))) for _ in range(5))]:
                with loaded.store.reading():
                    expected = loaded.graph.state.count_relations_touching(wanted)
                assert reads.count_relations_touching(wanted) == expected, wanted
        assert load.loader.is_alive()
    finally:
        load.finish()


def usual_memory(path: Path, seed: int) -> None:
    """A memory at `path` (its folder) as this code writes it, relations between random ends (a search's shown
    matches hold one end of some, both ends of others)."""
    rng = random.Random(seed)
    filler = loaded_services(path.parent)
    every = [f"{rng.choice(['see', 'plain'])} {i}" for i in range(15)]
    filler.graph.create_entities([Entity(name=name, entityType="person", observations=["again"]) for name in every])
    filler.graph.create_relations(
        [relation(rng.choice(every), rng.choice(every), rng.choice(["knows", "works with"])) for _ in range(40)]
    )


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("write", [hostile_memory, usual_memory])
def test_a_cut_search_beside_the_load_reads_and_counts_relations_of_every_spelling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, write: Callable[[Path, int], Any]
) -> None:
    """A broad search whose answer is cut takes the relations of the matches it shows and the count of those of all
    its matches in one pass over the relations (scan.ShardScan._touching_counted): both as a loaded server has them,
    for lines written by other hands and for lines written the usual way (counted without parsing)."""
    write(tmp_path / "memory.json", seed)
    loaded = loaded_services(tmp_path)
    monkeypatch.setattr("memory_graph.graph.LOADING_LEADING", 2)
    load = HeldLoad(tmp_path, monkeypatch)
    with loaded.store.reading():
        every_relation = set(loaded.graph.state.relations)
    cut = 0
    try:
        for query in ["see", "again", "person", "plain"]:
            answer = load.services.graph.search_nodes(query)
            shown, tier = set(names(answer)), set(substring_tier(loaded, query))
            assert shown <= tier, query
            assert relations(answer) == {r for r in every_relation if r[0] in shown or r[1] in shown}, query
            if len(tier) > 2:
                cut += 1
                assert answer.truncated is not None, query
                assert answer.truncated.totalEntities == len(tier), query
                touching = {r for r in every_relation if r[0] in tier or r[1] in tier}
                assert answer.truncated.totalRelations == len(touching), query
        assert cut, "no search was cut"
        assert load.loader.is_alive()
    finally:
        load.finish()


def odd_relations_memory(path: Path, seed: int) -> list[str]:
    """A memory whose every line begins as this code and the official server write a record, among them relation
    lines the load leaves out (a raw tab, a byte that is not UTF-8) or reads otherwise than their bytes (an escaped
    name), and an empty relation type, a CRLF ending, a relation written twice."""
    rng = random.Random(seed)
    every = [f"node {i}" for i in range(8)]

    def plain(start: str, end: str, kind: str) -> bytes:
        return line({"type": "relation", "from": start, "to": end, "relationType": kind}).encode()

    lines = [entity_line(name, "t", ["seen"]).encode() for name in every]
    lines += [plain(rng.choice(every), rng.choice(every), rng.choice(["knows", "calls"])) for _ in range(30)]
    odd = [
        plain("node 1", "node 2", ""),
        plain("node 1", "node 2", "has\ttab").replace(b"\\t", b"\t"),
        plain("node 1", "node 3", "not UTF-8").replace(b"UTF", b"\xffUTF"),
        plain("node 2", "node 3", "escaped").replace(b'"node 3"', b'"\\u006eode 3"'),
        plain("node 4", "node 5", "crlf") + b"\r",
        plain("node 5", "node 6", "twice"),
        plain("node 5", "node 6", "twice"),
    ]
    for odd_line in odd:
        lines.insert(rng.randrange(len(every), len(lines) + 1), odd_line)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return every


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("chunk_bytes", [8 << 20, 90, 400])  # (scan.CHUNK_BYTES; a window of a line or two, or a few)
def test_relations_counted_from_their_bytes_are_the_relations_the_load_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, chunk_bytes: int
) -> None:
    """Relation lines written the usual way are counted from their values, without a parse (a window of them alone:
    from one pattern's finds): a line the load leaves out is not counted, one it reads otherwise is counted as it
    reads it, and a relation written twice once."""
    every = odd_relations_memory(tmp_path / "memory.json", seed)
    loaded = loaded_services(tmp_path)
    with loaded.store.reading():
        every_relation = set(loaded.graph.state.relations)
    assert {("node 2", "node 3", "escaped"), ("node 4", "node 5", "crlf"), ("node 1", "node 2", "")} <= every_relation
    monkeypatch.setattr(f"{SCAN}.CHUNK_BYTES", chunk_bytes)
    monkeypatch.setattr(f"{SCAN}.NAME_NEEDLES", 0)  # (every count a pass over every relation)
    monkeypatch.setattr("memory_graph.graph.LOADING_LEADING", 2)
    load = HeldLoad(tmp_path, monkeypatch)
    rng = random.Random(seed)
    try:
        reads = load.services.store.reads_while_loading()
        assert reads is not None
        with reads.answering(), loaded.store.reading():
            for wanted in [every, *(rng.sample(every, rng.randrange(1, len(every))) for _ in range(6))]:
                expected = loaded.graph.state.count_relations_touching(wanted)
                assert reads.count_relations_touching(wanted) == expected, wanted
        for query in ["node", "seen"]:
            answer = load.services.graph.search_nodes(query)
            shown, tier = set(names(answer)), set(substring_tier(loaded, query))
            assert relations(answer) == {r for r in every_relation if r[0] in shown or r[1] in shown}, query
            assert answer.truncated is not None, query
            touching = {r for r in every_relation if r[0] in tier or r[1] in tier}
            assert answer.truncated.totalRelations == len(touching), query
        assert load.loader.is_alive()
    finally:
        load.finish()


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])  # (a file a hand saved with a byte order mark)
@pytest.mark.parametrize("chunk_bytes", [150, 700])  # (scan.CHUNK_BYTES: windows of one kind, and one of both)
def test_a_pass_for_one_kind_reads_only_the_windows_that_may_hold_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bom: bytes, chunk_bytes: int
) -> None:
    """As the official server writes a memory: its entities, then its relations. Once a file has been read whole, a
    pass over one kind of record reads only the windows that may hold that kind (about half of such a file), and
    the reads beside the load still answer as a loaded server does."""
    every = [f"node {i}" for i in range(30)]
    lines = [entity_line(name, "t", ["seen", f"fact {i}"]) for i, name in enumerate(every)]
    lines += [
        line({"type": "relation", "from": every[i % 30], "to": every[i * 7 % 30], "relationType": "knows"})
        for i in range(60)
    ]
    # Among each kind's lines, one of the other kind whose type is written with an escape (a window that holds it
    # may hold a record of any kind).
    lines.insert(45, line({"type": "entity", "name": "hidden", "entityType": "t", "observations": ["seen"]}))
    lines.insert(10, line({"type": "relation", "from": "hidden", "to": "node 3", "relationType": "knows"}))
    lines[46] = lines[46].replace('"entity"', '"\\u0065ntity"')
    lines[10] = lines[10].replace('"relation"', '"\\u0072elation"')
    every.append("hidden")
    path = tmp_path / "memory.json"
    path.write_bytes(bom + "\n".join(lines).encode() + b"\n")
    loaded = loaded_services(tmp_path)
    with loaded.store.reading():
        every_relation = set(loaded.graph.state.relations)
    assert ("hidden", "node 3", "knows") in every_relation and "hidden" in substring_tier(loaded, "seen")
    assert path.read_bytes().startswith(bom + b'{"type":"entity"')  # (the file as written: not rewritten by a load)
    monkeypatch.setattr(f"{SCAN}.CHUNK_BYTES", chunk_bytes)
    monkeypatch.setattr("memory_graph.graph.LOADING_LEADING", 2)
    read_alone: list[int] = []  # the bytes of each pass that read some windows alone
    scan = importlib.import_module(SCAN)
    original = scan._windows_at

    def counted(file: str, spans: list[tuple[int, int]]) -> Iterator[Any]:
        read_alone.append(sum(length for _, length in spans))
        return original(file, spans)

    monkeypatch.setattr(scan, "_windows_at", counted)
    load = HeldLoad(tmp_path, monkeypatch)
    try:
        for query in ["seen", "fact 1", "node 2", "hidden"]:
            answer = load.services.graph.search_nodes(query)
            shown, tier = set(names(answer)), set(substring_tier(loaded, query))
            assert shown <= tier and shown, query
            assert relations(answer) == {r for r in every_relation if r[0] in shown or r[1] in shown}, query
            if answer.truncated is not None:
                touching = {r for r in every_relation if r[0] in tier or r[1] in tier}
                assert answer.truncated.totalRelations == len(touching), query
                assert answer.truncated.totalEntities == len(tier), query
        for wanted in (["node 3"], ["node 4", "node 29", "missing"], ["hidden"], every):
            assert load.services.graph.open_nodes(wanted) == loaded.graph.open_nodes(wanted), wanted
        assert load.loader.is_alive()
    finally:
        load.finish()
    assert read_alone, "no pass read windows alone"
    # (each at most its kind's part and a window holding both kinds: never the whole file)
    assert max(read_alone) < len(path.read_bytes()) - len(bom) - chunk_bytes, read_alone


# Records the load types by their keys (no type, a null one) or by another type's value (a lesson is an entity).
UNTYPED = {
    "no type": (
        '{"name":"A","entityType":"t","observations":["seen"]}',
        '{"from":"A","to":"node 1","relationType":"r"}',
    ),
    "type null": (
        '{"type":null,"name":"A","entityType":"t","observations":["seen"]}',
        '{"type":null,"from":"A","to":"node 1","relationType":"r"}',
    ),
    "lesson": (
        '{"type":"lesson","name":"A","observations":["seen"]}',  # (its entityType: "lesson")
        '{"type":"relation","from":"A","to":"node 1","relationType":"r"}',
    ),
}


@pytest.mark.parametrize("case", list(UNTYPED))
@pytest.mark.parametrize("chunk_bytes", [8 << 20, 120, 400])
def test_a_record_typed_by_its_keys_is_read_in_a_window_of_the_other_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, chunk_bytes: int
) -> None:
    """A window is left out of a pass only when it cannot hold a record of the pass's kind: an entity line without
    a type (or with a null one, or a lesson's) among relation lines, and such a relation among entity lines, are
    read beside the load as the load reads them."""
    entity, relation_line = UNTYPED[case]
    every = [f"node {i}" for i in range(12)]
    entities = [entity_line(name, "t", ["other"]) for name in every]
    relations_ = [
        line({"type": "relation", "from": every[i % 12], "to": every[i * 5 % 12], "relationType": "knows"})
        for i in range(24)
    ]
    lines = [*entities[:6], relation_line, *entities[6:], *relations_[:12], entity, *relations_[12:]]
    (tmp_path / "memory.json").write_text("\n".join(lines) + "\n")
    loaded = loaded_services(tmp_path)
    assert names(loaded.graph.open_nodes(["A"])) == ["A"]
    monkeypatch.setattr(f"{SCAN}.CHUNK_BYTES", chunk_bytes)
    load = HeldLoad(tmp_path, monkeypatch)
    try:
        for wanted in (["A"], ["node 1"], ["A", "node 1", "node 2"]):
            assert load.services.graph.open_nodes(wanted) == loaded.graph.open_nodes(wanted), wanted
        for query in ["seen", "other", "node"]:
            assert sorted(names(load.services.graph.search_nodes(query))) == sorted(substring_tier(loaded, query))
        reads = load.services.store.reads_while_loading()
        assert reads is not None
        with reads.answering(), loaded.store.reading():
            for wanted in (["A"], ["node 1"], every):
                expected = loaded.graph.state.count_relations_touching(wanted)
                assert reads.count_relations_touching(wanted) == expected, wanted
        assert load.loader.is_alive()
    finally:
        load.finish()


def waits_for_the_load(load: HeldLoad, read: Callable[[], Any]) -> Any:
    """The read's answer, which must not come before the held load is released."""
    done: list[Any] = []
    waiting = threading.Thread(target=lambda: done.append(read()), daemon=True)
    waiting.start()
    waiting.join(0.5)
    assert waiting.is_alive() and not done, "the read was answered before the load"
    load.finish()
    waiting.join(WAIT)
    return done[0]


def test_a_read_that_would_parse_too_many_lines_waits_for_the_load(
    held: tuple[Services, HeldLoad], monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded, load = held
    monkeypatch.setattr(f"{SCAN}.SCAN_LINE_LIMIT", 2)
    answer = waits_for_the_load(load, lambda: load.services.graph.open_nodes(["Alice"]))
    assert answer == loaded.graph.open_nodes(["Alice"])


def test_files_a_crash_left_half_committed_are_not_read_until_the_load_finished_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(loaded_services(tmp_path), escaped=True)
    loaded = loaded_services(tmp_path)
    journal = loaded.store.journal  # type: ignore[attr-defined]
    # A decided commit with nothing left to put in place: its being there says the files may be half written.
    journal.write_text(json.dumps({"format": JOURNAL_FORMAT, "writes": []}))
    load = HeldLoad(tmp_path, monkeypatch)
    answer = waits_for_the_load(load, lambda: load.services.graph.open_nodes(["Alice"]))
    assert answer == loaded.graph.open_nodes(["Alice"])
    assert not journal.exists()


def test_the_load_gives_way_to_a_read_while_it_decodes_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A million entities' file took one call of 1-3 s to decode and split, which held the interpreter: a read beside
    # the load waited for it. The text is now decoded a piece at a time, the load giving way between pieces.
    fill(loaded_services(tmp_path), escaped=True)
    monkeypatch.setattr("memory_graph.storage.store.SCAN_MIN_BYTES", 0)
    monkeypatch.setattr("memory_graph.storage.codec.DECODE_PIECE_BYTES", 16)
    services = services_for_folder(tmp_path, shard_lines=3)
    reads_beside = type(services.store.reads_beside)  # type: ignore[attr-defined]
    original = reads_beside.give_way
    reading = threading.Event()
    decoding_when_given_way: list[bool] = []

    def give_way(beside: Any, *args: Any) -> None:
        assert reading.wait(WAIT)  # (the read below is under way)
        decoding_when_given_way.append(any(frame.name == "_decoded_pieces" for frame in traceback.extract_stack()))
        original(beside, *args)

    monkeypatch.setattr(reads_beside, "give_way", give_way)
    services.store.opening()
    reads = services.store.reads_while_loading()
    assert reads is not None
    loader = threading.Thread(target=services.store.open, daemon=True)
    loader.start()
    with reads.answering():
        reading.set()
        deadline = time.monotonic() + WAIT
        while not decoding_when_given_way and time.monotonic() < deadline:
            time.sleep(0.01)
    loader.join(WAIT)
    assert decoding_when_given_way[:1] == [True]


def test_a_small_memory_is_loaded_before_any_read(tmp_path: Path) -> None:
    # Below SCAN_MIN_BYTES the load is over sooner than a read could make up for what it leaves out (the ranked
    # entities of a search): reads wait for it.
    fill(loaded_services(tmp_path), escaped=True)
    services = services_for_folder(tmp_path)
    services.store.opening()
    assert services.store.reads_while_loading() is not None  # a load is expected ...
    services.store.open()
    assert services.store.reads_while_loading() is None  # ... and, once over, no read is answered beside it
    assert not services.store.reads_beside.expected  # type: ignore[attr-defined]


def test_the_load_keeps_the_lock_until_the_reads_beside_it_have_ended(
    held: tuple[Services, HeldLoad], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A read still in the files when the load ends: the load lets the lock go (and another process may write)
    # only once the read is done.
    loaded, load = held
    in_the_files, go_on = threading.Event(), threading.Event()
    shard_scan = type(load.services.store._scan)  # type: ignore[attr-defined]
    original = shard_scan._records

    def slow(scan: Any, lines: Any) -> Any:
        in_the_files.set()
        assert go_on.wait(WAIT * 3)
        return original(scan, lines)

    monkeypatch.setattr(shard_scan, "_records", slow)
    done: list[KnowledgeGraph] = []
    reader = threading.Thread(target=lambda: done.append(load.services.graph.open_nodes(["Bob"])), daemon=True)
    reader.start()
    assert in_the_files.wait(WAIT)
    load.release.set()
    load.loader.join(0.5)
    assert load.loader.is_alive(), "the load let the files go while a read was in them"
    go_on.set()
    reader.join(WAIT)
    load.loader.join(WAIT)
    assert not load.loader.is_alive()
    assert done == [loaded.graph.open_nodes(["Bob"])]


def test_a_read_arriving_before_the_load_holds_the_files_waits_for_it_then_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(loaded_services(tmp_path), escaped=True)
    loaded = loaded_services(tmp_path)
    monkeypatch.setattr("memory_graph.storage.store.SCAN_MIN_BYTES", 0)
    services = services_for_folder(tmp_path, shard_lines=3)
    services.store.opening()  # said before the load's thread starts, as the server says it
    done: list[KnowledgeGraph] = []
    reader = threading.Thread(target=lambda: done.append(services.graph.open_nodes(["Teapot"])), daemon=True)
    reader.start()
    reader.join(0.2)
    assert reader.is_alive()  # waiting for the load to take the lock
    services.store.open()
    reader.join(WAIT)
    assert done == [loaded.graph.open_nodes(["Teapot"])]


@pytest.mark.parametrize("needles", [NAME_NEEDLES, 0])
def test_names_this_code_writes_with_escapes_are_read_beside_the_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, needles: int
) -> None:
    # This code's own lines, where a name with a quote, a backslash or a tab is written with an escape: a window
    # holding one is read line by line, the others by their pattern.
    filler = loaded_services(tmp_path)
    filler.graph.create_entities([Entity(name=name, entityType="person", observations=["seen"]) for name in NAMES])
    rng = random.Random(7)
    filler.graph.create_relations(
        [relation(rng.choice(NAMES), rng.choice(NAMES), rng.choice(["knows", "relation"])) for _ in range(40)]
    )
    loaded = loaded_services(tmp_path)
    monkeypatch.setattr(f"{SCAN}.NAME_NEEDLES", needles)
    load = HeldLoad(tmp_path, monkeypatch)
    try:
        for wanted in [NAMES, *([name] for name in NAMES), *(rng.sample(NAMES, 4) for _ in range(5))]:
            assert load.services.graph.open_nodes(wanted) == loaded.graph.open_nodes(wanted), wanted
            reads = load.services.store.reads_while_loading()
            assert reads is not None
            with reads.answering(), loaded.store.reading():
                assert reads.count_relations_touching(wanted) == loaded.graph.state.count_relations_touching(wanted)
        assert load.loader.is_alive()
    finally:
        load.finish()


def line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def entity_line(name: str, kind: str, observations: list[str]) -> str:
    return line({"type": "entity", "name": name, "entityType": kind, "observations": observations})


def test_a_record_written_twice_is_searched_as_the_load_merges_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The official server writes an entity again when one call names it twice: the load merges the copies (the
    # first's fields, every observation), so a search judges the merged record, whichever copy holds the words.
    (tmp_path / "memory.json").write_text(
        entity_line("Alice", "person", ["likes tea"])
        + "\n"
        + entity_line("Bob", "person", ["drinks tea too"])
        + "\n"
        + entity_line("Alice", "robot", ["works on deploy"])
        + "\n"
    )
    loaded = loaded_services(tmp_path)
    load = HeldLoad(tmp_path, monkeypatch)
    try:
        alice = loaded.graph.open_nodes(["Alice"]).entities
        for query in ["deploy", "tea deploy", "tea"]:
            answer = load.services.graph.search_nodes(query)
            assert names(answer) == substring_tier(loaded, query), query
            assert [e for e in answer.entities if e.name == "Alice"] == alice, query
        assert names(load.services.graph.search_nodes("tea deploy")) == ["Alice"]
        assert load.services.graph.search_nodes("deploy").entities[0].entityType == "person"
        assert load.loader.is_alive()
    finally:
        load.finish()
    # "robot" is no entity's type once merged: no substring match, so the search waited for the load.
    assert loaded.graph.search_nodes("robot").entities == []


def test_a_shared_lesson_this_project_hides_is_hidden_in_a_search_beside_the_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lesson = {"type": "entity", "name": "Alice", "entityType": "lesson", "observations": ["a lesson"]}
    lesson["errorPattern"] = {"type": "network", "message": "EADDRINUSE address in use", "context": ""}
    (tmp_path / "memory.json").write_text(
        entity_line("Alice", "person", ["the project's own, in use"])
        + "\n"
        + entity_line("Bob", "person", ["keeps an address book"])
        + "\n"
    )
    (tmp_path / "lesson.json").write_text(line(lesson) + "\n")
    loaded = loaded_services(tmp_path)
    load = HeldLoad(tmp_path, monkeypatch)
    try:
        for query in ["in use", "alice", "address"]:  # (the last: held by the hidden lesson, not by this Alice)
            answer = load.services.graph.search_nodes(query)
            assert names(answer) == substring_tier(loaded, query), query
            assert {e.entityType for e in answer.entities} == {"person"}, query
        assert names(load.services.graph.search_nodes("address")) == ["Bob"]
        assert load.loader.is_alive()
    finally:
        load.finish()


def test_hand_written_oddities_read_beside_the_load_as_the_load_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    others = [entity_line(f"other {i}", "t", []) for i in range(NAME_NEEDLES)]
    (tmp_path / "memory.json").write_text(
        "\n".join(
            [
                entity_line("C", "t", ["abc\x7fdef"]),  # DEL, which this code writes as it is
                *others,
                '{"type":"relation","from":"A","to":"B","relationType":"r","to":"C"}',  # a key twice: the last wins
                '{"type":"entity","name":"D","entityType":"t","observations":[],"type":"relation","from":"C","to":"X",'
                '"relationType":"s"}',  # an entity's beginning, a relation once read
                '{"type":"entity","name":"lone \\ud83d","entityType":"t","observations":[]}',  # read as U+FFFD
            ]
        )
        + "\n"
    )
    loaded = loaded_services(tmp_path)
    load = HeldLoad(tmp_path, monkeypatch)
    many = ["C", "D", "lone \ufffd", *[f"other {i}" for i in range(NAME_NEEDLES)]]
    try:
        for wanted in (["C"], many, ["x\ud83d"], ["lone \ud83d"], ["lone \ufffd"]):
            assert load.services.graph.open_nodes(wanted) == loaded.graph.open_nodes(wanted), wanted
        assert relations(load.services.graph.open_nodes(many)) == {("A", "C", "r"), ("C", "X", "s")}
        assert names(load.services.graph.search_nodes("abc\x7fdef")) == ["C"]
        assert load.loader.is_alive()
    finally:
        load.finish()


def test_two_broken_lines_are_two_problems_not_two_records(tmp_path: Path) -> None:
    # Parsed a slice at a time as one JSON array, a line left open was once closed by the next: two unreadable
    # lines read as two records, and neither was reported.
    (tmp_path / "memory.json").write_text(
        '{"type":"entity","name":"Joined","entityType":"t","observations":["o"\n'
        '"p"]}, {"type":"entity","name":"Second","entityType":"t","observations":[]}\n'
        + entity_line("Fine", "t", [])
        + "\n"
    )
    loaded = loaded_services(tmp_path)
    assert names(loaded.graph.read_graph()) == ["Fine"]
    assert [problem.line_number for problem in loaded.store.problems()] == [1, 2]  # type: ignore[attr-defined]


def test_beside_a_restore_a_read_over_every_record_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A restore takes a tenth of a first load's time: a read passing over every record (here: more names than are
    # searched one by one) is not worth it beside one, while one looking for a few names still is.
    fill(loaded_services(tmp_path), escaped=True)
    loaded = loaded_services(tmp_path)
    monkeypatch.setattr(f"{SCAN}.NAME_NEEDLES", 2)

    def snapshot_there(services: Services) -> None:
        snapshot = tmp_path / "start.snapshot"
        snapshot.write_bytes(b"not a snapshot")  # (unusable: the restore reads the files; it was tried all the same)
        services.store.keep_snapshot(snapshot)

    load = HeldLoad(tmp_path, monkeypatch, before=snapshot_there)
    assert load.services.graph.open_nodes(["Bob"]) == loaded.graph.open_nodes(["Bob"])
    assert load.loader.is_alive()
    assert names(load.services.graph.search_nodes("Teapot")) == ["Teapot"]  # (one line holds the word)
    monkeypatch.setattr(f"{SCAN}.NAME_NEEDLES", 0)  # (so "person": a word more than a few lines hold)
    assert waits_for_the_load(load, lambda: load.services.graph.search_nodes("person")) == loaded.graph.search_nodes(
        "person"
    )
