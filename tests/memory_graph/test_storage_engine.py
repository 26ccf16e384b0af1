"""The storage engine on its own (no graph service): placement, reload diffs, check and repair, record rules,
aborted transactions and a crash in the middle of a repair, on real files with a listener that records calls."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memory_graph.errors import CorruptFileError, StaleShardError, StorageError
from memory_graph.storage import Key, Store, entity_key, parse_slices, read_shard_file, read_split

Record = dict[str, Any]
Call = tuple[str, list[Key], list[Record]]


class Recorder:
    """A ChangeListener that keeps every notification."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    def records_changed(self, collection: str, removed: list[Key], upserted: list[Record]) -> None:
        self.calls.append((collection, list(removed), [dict(r) for r in upserted]))

    def loaded(self) -> list[tuple[str, Record]]:
        """What a first load told, (collection, record) in the order heard: it tells records only, shard by shard."""
        assert all(not removed for _, removed, _ in self.calls)
        return [(name, record) for name, _, upserted in self.calls for record in upserted]


def ent(name: str, *observations: str, entity_type: str = "person", **extra: Any) -> Record:
    return {"type": "entity", "name": name, "entityType": entity_type, "observations": list(observations), **extra}


def line(record: Record) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def open_store(folder: Path, **options: Any) -> tuple[Store, Recorder]:
    store = Store({"memory": folder / "memory.json", "lesson": folder / "lesson.json"}, shard_lines=3, **options)
    recorder = Recorder()
    store.add_listener(recorder)
    store.open()
    return store, recorder


def upsert_all(store: Store, records: list[Record], collection: str = "memory") -> None:
    with store.transaction() as tx:
        for record in records:
            tx.upsert(collection, record)


def write_shard(path: Path, *lines: bytes) -> None:
    path.write_bytes(b"".join(item + b"\n" for item in lines))


def names_in(path: Path) -> list[str]:
    return [json.loads(raw)["name"] for raw in path.read_text(encoding="utf-8").splitlines()]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file in the folder, byte for byte."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def data_files(folder: Path) -> dict[str, bytes]:
    """Only the shards (no side files, lock, stamp or journal)."""
    return {n: b for n, b in snapshot(folder).items() if n.endswith(".json") and not n.startswith(".")}


def stats(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.glob("memory*.json")}


def test_placement_fills_lowest_shard_with_room_keeps_replacements_in_place_and_removes_empty_shards(
    tmp_path: Path,
) -> None:
    store, _ = open_store(tmp_path)
    upsert_all(store, [ent(f"E{i}") for i in range(7)])
    assert [names_in(tmp_path / n) for n in ("memory.json", "memory-1.json", "memory-2.json")] == [
        ["E0", "E1", "E2"],
        ["E3", "E4", "E5"],
        ["E6"],
    ]
    with store.transaction() as tx:
        for i in range(3):
            tx.delete("memory", entity_key(f"E{i}"))
    assert not (tmp_path / "memory.json").exists()
    upsert_all(store, [ent("N1")])  # the lowest existing shard with room, not a recreated memory.json
    assert names_in(tmp_path / "memory-2.json") == ["E6", "N1"]
    upsert_all(store, [ent("N2"), ent("N3")])  # memory-2.json fills up; then the free index 0 is reused
    assert names_in(tmp_path / "memory-2.json") == ["E6", "N1", "N2"]
    assert names_in(tmp_path / "memory.json") == ["N3"]

    before, written = stats(tmp_path), store.bytes_written
    upsert_all(store, [ent("E4", "changed")])
    after = stats(tmp_path)
    assert [n for n in after if after[n] != before[n]] == ["memory-1.json"]
    assert names_in(tmp_path / "memory-1.json") == ["E3", "E4", "E5"]
    assert json.loads((tmp_path / "memory-1.json").read_text(encoding="utf-8").splitlines()[1]) == ent("E4", "changed")
    stamp = tmp_path / "memory.json.stamp"
    assert store.bytes_written - written == len((tmp_path / "memory-1.json").read_bytes()) + len(stamp.read_bytes())


def test_a_new_record_upserted_twice_in_one_transaction_is_stored_once_even_at_a_shard_boundary(tmp_path: Path) -> None:
    store, _ = open_store(tmp_path)
    upsert_all(store, [ent("A"), ent("B")])
    upsert_all(store, [ent("N", "v1"), ent("N", "v2")])  # v1 would fill memory.json, v2 would open memory-1.json
    assert store.check().problems == []
    assert names_in(tmp_path / "memory.json") == ["A", "B", "N"]
    assert not (tmp_path / "memory-1.json").exists()
    _, heard = open_store(tmp_path)
    assert heard.calls == [("memory", [], [ent("A"), ent("B"), ent("N", "v2")])]


def test_other_store_sees_a_commit_as_exactly_the_removed_keys_and_upserted_records(tmp_path: Path) -> None:
    writer, writer_heard = open_store(tmp_path)
    upsert_all(writer, [ent(f"E{i}") for i in range(7)])
    reader, heard = open_store(tmp_path)
    assert len(heard.calls) == 3  # a first load, heard shard by shard as each is read, in file order
    assert heard.loaded() == [("memory", ent(f"E{i}")) for i in range(7)]
    heard.calls.clear()

    with writer.transaction() as tx:
        tx.upsert("memory", ent("E7", "new"))
        tx.upsert("memory", ent("E1", "changed"))
        tx.delete("memory", entity_key("E5"))
    assert writer_heard.calls[-1] == ("memory", [entity_key("E5")], [ent("E7", "new"), ent("E1", "changed")])
    with reader.reading():
        pass
    assert heard.calls == [("memory", [entity_key("E5")], [ent("E1", "changed"), ent("E7", "new")])]
    reader.poll()
    assert len(heard.calls) == 1


def test_a_hand_edited_line_is_noticed_on_the_next_read_as_one_upsert(tmp_path: Path) -> None:
    writer, _ = open_store(tmp_path)
    upsert_all(writer, [ent(f"E{i}") for i in range(5)])
    watcher, heard = open_store(tmp_path, hand_edit_check_seconds=0)
    heard.calls.clear()
    shard = tmp_path / "memory-1.json"
    write_shard(shard, line(ent("E3", "edited by hand")), line(ent("E4")))
    watcher.poll()
    assert heard.calls == [("memory", [], [ent("E3", "edited by hand")])]
    watcher.poll()
    assert len(heard.calls) == 1


def test_check_reports_every_kind_of_damage_and_repair_keeps_every_removed_byte(tmp_path: Path) -> None:
    nested = b"[" * 100_000 + b"]" * 100_000
    bad_utf8 = b'{"type":"entity","name":"Bad\xff","entityType":"person","observations":[]}'
    write_shard(tmp_path / "memory.json", line(ent("E0", "x")), b"{not json", nested)
    write_shard(tmp_path / "memory-1.json", bad_utf8, line(ent("E1", "a")), line(ent("E1", "b")))
    write_shard(tmp_path / "memory-2.json", line(ent("E0", "other")), line(ent("Shared", "m")))
    write_shard(tmp_path / "lesson.json", line(ent("Shared", "l")))
    (tmp_path / "memory.json.journal").write_text("{not json", encoding="utf-8")
    store = Store({"memory": tmp_path / "memory.json", "lesson": tmp_path / "lesson.json"}, shard_lines=3)

    found = store.check()
    text = "\n".join(found.problems)
    assert "memory.json.journal is unreadable" in text
    assert f"{tmp_path / 'memory.json'}:2: not valid JSON" in text
    assert f"{tmp_path / 'memory.json'}:3: JSON nested too deeply to read" in text
    assert f"{tmp_path / 'memory-1.json'}:1: not UTF-8 text" in text
    assert 'memory: entity "E1" is stored 2 times' in text
    assert 'memory: entity "E0" is stored 2 times' in text
    assert 'entity "Shared" is in both memory and lesson' in text
    assert len(found.problems) == 7

    fixed = store.check(fix=True)
    assert fixed.repaired and fixed.ok
    assert store.check().problems == []
    assert not (tmp_path / "memory.json.journal").exists()
    assert len(list(tmp_path.glob("memory.json.journal.unreadable-*"))) == 1

    def side(shard: str) -> bytes:
        (found_side,) = tmp_path.glob(f"{shard}.rejected-*")
        return found_side.read_bytes()

    assert side("memory.json") == b"{not json\n" + nested + b"\n"
    assert side("memory-1.json") == bad_utf8 + b"\n" + line(ent("E1", "b")) + b"\n"
    assert side("memory-2.json") == line(ent("E0", "other")) + b"\n"
    assert side("lesson.json") == line(ent("Shared", "l")) + b"\n"
    assert not (tmp_path / "lesson.json").exists()

    repaired = [ent("E0", "x", "other"), ent("E1", "a", "b"), ent("Shared", "m", "l")]
    fresh, heard = open_store(tmp_path)
    assert heard.loaded() == [("memory", record) for record in repaired]
    assert fresh.problems() == []


def lesson_rule(record: Record) -> str | None:
    return None if "errorPattern" in record else "a lesson needs an errorPattern"


def test_a_record_rule_makes_a_bad_record_a_problem_and_its_shard_read_only_until_repaired(tmp_path: Path) -> None:
    good = ent("L1", entity_type="lesson", errorPattern="E1")
    write_shard(tmp_path / "lesson.json", line(good), line(ent("L2", entity_type="lesson")))
    store, heard = open_store(tmp_path, record_checks={"lesson": lesson_rule})
    problem = f"{tmp_path / 'lesson.json'}:2: a lesson needs an errorPattern"
    assert [str(p) for p in store.problems()] == [problem]
    assert store.check().problems == [problem]
    assert heard.calls == [("lesson", [], [good])]

    before = snapshot(tmp_path)
    for change in (
        lambda tx: tx.upsert("lesson", {**good, "observations": ["x"]}),
        lambda tx: tx.delete("lesson", entity_key("L1")),
    ):
        with pytest.raises(CorruptFileError) as refused, store.transaction() as tx:
            change(tx)
        assert [str(p) for p in refused.value.problems] == [problem]
    assert snapshot(tmp_path) == before
    assert len(heard.calls) == 1

    new = ent("L3", entity_type="lesson", errorPattern="E3")
    upsert_all(store, [new], "lesson")
    upsert_all(store, [ent("M1")])
    assert names_in(tmp_path / "lesson-1.json") == ["L3"]
    assert names_in(tmp_path / "memory.json") == ["M1"]

    assert store.check(fix=True).ok
    assert store.problems() == []
    upsert_all(store, [{**good, "observations": ["x"]}], "lesson")
    assert names_in(tmp_path / "lesson.json") == ["L1"]


def test_a_transaction_whose_block_raises_writes_nothing_and_tells_no_listener(tmp_path: Path) -> None:
    store, heard = open_store(tmp_path)
    upsert_all(store, [ent(f"E{i}") for i in range(4)])
    before, calls = snapshot(tmp_path), len(heard.calls)
    with pytest.raises(RuntimeError, match="abort"), store.transaction() as tx:
        tx.upsert("memory", ent("E0", "changed"))
        tx.upsert("memory", ent("New"))
        tx.delete("memory", entity_key("E3"))
        tx.upsert("lesson", ent("L", entity_type="lesson"))
        raise RuntimeError("abort")
    assert snapshot(tmp_path) == before
    assert len(heard.calls) == calls
    _, fresh_heard = open_store(tmp_path)
    assert fresh_heard.loaded() == [("memory", ent(f"E{i}")) for i in range(4)]


# The repair's os.replace calls: the stamps, then the journal, then the shards. Dying at the journal leaves the
# original; dying at the first or second shard, once the journal exists, is finished on the next open.
@pytest.mark.parametrize(("shards_before_crash", "outcome"), [(-1, "original"), (0, "repaired"), (1, "repaired")])
def test_a_crash_in_the_middle_of_a_multi_shard_repair_is_finished_or_undone_on_the_next_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards_before_crash: int, outcome: str
) -> None:
    folder, twin = tmp_path / "a", tmp_path / "b"
    folder.mkdir()
    write_shard(folder / "memory.json", line(ent("E0", "x")), b"{not json", line(ent("E1")))
    write_shard(folder / "memory-1.json", line(ent("E0", "y")), line(ent("E2")))
    write_shard(folder / "lesson.json", line(ent("E2", "lesson copy")))
    shutil.copytree(folder, twin)
    original = data_files(folder)
    Store({"memory": twin / "memory.json", "lesson": twin / "lesson.json"}, shard_lines=3).check(fix=True)
    repaired = data_files(twin)
    assert repaired != original

    real_replace: Callable[..., None] = os.replace
    shards: list[object] = []

    def crashing_replace(source: Any, target: Any) -> None:
        name = Path(target).name
        if name.endswith(".journal") and shards_before_crash < 0:
            raise OSError("simulated crash")
        if name.endswith(".json"):
            shards.append(target)
            if len(shards) > shards_before_crash:
                raise OSError("simulated crash")
        real_replace(source, target)

    monkeypatch.setattr("memory_graph.storage.files.os.replace", crashing_replace)
    crashed = Store({"memory": folder / "memory.json", "lesson": folder / "lesson.json"}, shard_lines=3)
    with pytest.raises(StorageError, match="simulated crash"):
        crashed.check(fix=True)
    monkeypatch.undo()

    fresh, heard = open_store(folder)
    state = data_files(folder)
    assert state in (original, repaired)  # never a mix
    assert state == (repaired if outcome == "repaired" else original)
    assert not list(folder.glob(".*.tmp"))
    if outcome == "repaired":
        assert fresh.check().ok
        assert heard.loaded() == [
            ("memory", ent("E0", "x", "y")),
            ("memory", ent("E1")),
            ("memory", ent("E2", "lesson copy")),
        ]
    else:
        assert not fresh.check().ok


def test_a_load_is_heard_in_slices_in_file_order(tmp_path: Path) -> None:
    """A first load's records reach the listeners `notify_slice` at a time, in file order, every one once (each
    slice can then be let go once heard: a large load's parsed records no longer all live until the last)."""
    records = [ent(f"E{i}", f"fact {i}") for i in range(10)]
    relation = {"type": "relation", "from": "E0", "to": "E9", "relationType": "knows"}
    write_shard(tmp_path / "memory.json", *(line(r) for r in [*records, relation]))
    store = Store({"memory": tmp_path / "memory.json", "lesson": tmp_path / "lesson.json"}, shard_lines=100)
    store.notify_slice = 4
    heard = Recorder()
    store.add_listener(heard)
    store.open()
    memory_calls = [upserted for collection, removed, upserted in heard.calls if collection == "memory"]
    assert [len(call) for call in memory_calls] == [4, 4, 3]
    assert [record for call in memory_calls for record in call] == [*records, relation]


def held_state(store: Store) -> dict[str, Any]:
    """What a store's collections hold: shards (keys in order, lines, problems), locations. A shard held by its keys
    has its lines read back from its file here, and the hash it keeps of each must be that line's."""
    state: dict[str, Any] = {}
    for name, collection in store.collections.items():
        shards = {}
        for index, shard in sorted(collection.shards.items()):
            digests = shard.line_digests()
            lines = dict(shard.lines)
            assert digests is None or digests == {key: hash(line) for key, line in lines.items()}
            shards[index] = (list(shard.held_keys()), lines, shard.problems, shard.line_count)
        state[name] = (shards, dict(collection.locations))
    return state


def final_records(calls: list[Call]) -> list[Record]:
    """The records a listener holds after hearing only upserts: each key's last record, at its first place."""
    held: dict[Key, Record] = {}
    for _, removed, upserted in calls:
        assert not removed
        for record in upserted:
            held[entity_key(record["name"]) if record["type"] == "entity" else tuple(record.values())] = record
    return list(held.values())


def read_whole(folder: Path) -> tuple[Store, list[Record]]:
    """The memory collection read as before a first load was heard slice by slice: each shard parsed whole, the
    records told all at once (`Collection.reload` with no `hear`)."""
    store = Store({"memory": folder / "memory.json", "lesson": folder / "lesson.json"}, shard_lines=3)
    return store, store.collections["memory"].reload().upserted


@pytest.mark.parametrize("slice_lines", [3, 2_000])
def test_a_first_load_heard_slice_by_slice_holds_and_tells_what_a_whole_read_does(
    slice_lines: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first load parses each shard a slice at a time and lets each slice go once heard (the load's peak); what
    it holds and what its listeners end up holding are what reading each shard whole gives: a file the official
    server wrote (a BOM, blank lines, a record written twice in other slices, a relation twice) and an old fork's
    split (a record in two shards)."""
    monkeypatch.setattr("memory_graph.storage.codec.PARSE_SLICE", slice_lines)
    relation = {"type": "relation", "from": "E1", "to": "E2", "relationType": "knows"}
    main = [line(ent(f"E{i}", f"o{i}")) for i in range(12)]
    main[3:3] = [b"", line(relation)]
    main[9:9] = [line(ent("E1", "later")), b"  ", line(relation)]
    main.append(line(ent("E4", "o4", "last")))
    (tmp_path / "memory.json").write_bytes(b"\xef\xbb\xbf" + b"\n".join(main) + b"\n")
    write_shard(tmp_path / "memory-1.json", line(ent("E5", "split copy")), line(ent("E20")))
    streamed, heard = open_store(tmp_path)
    assert len(heard.calls) >= (6 if slice_lines == 3 else 2)  # (memory.json in slices, then memory-1.json)
    whole, told = read_whole(tmp_path)
    assert final_records(heard.calls) == final_records([("memory", [], told)])
    assert held_state(streamed)["memory"] == held_state(whole)["memory"]
    held = {r["name"]: r for r in final_records(heard.calls) if r["type"] == "entity"}
    assert held["E1"]["observations"] == ["o1", "later"] and held["E5"]["observations"] == ["o5", "split copy"]
    assert held["E4"]["observations"] == ["o4", "last"]
    # It goes on as any load: a write reads the held lines back exactly, and the next first load agrees.
    upsert_all(streamed, [ent("E1", "o1", "later", "new")])
    again, again_heard = open_store(tmp_path)
    whole, told = read_whole(tmp_path)
    assert final_records(again_heard.calls) == final_records([("memory", [], told)])
    assert held_state(again)["memory"] == held_state(whole)["memory"]


def test_parsing_in_slices_gives_what_parsing_whole_does_and_can_let_each_slice_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("memory_graph.storage.codec.PARSE_SLICE", 4)
    lines = [line(ent(f"E{i}", f"o{i}")) for i in range(10)]
    lines[2:2] = [b"", b"{not json", line({"type": "entity", "name": ""})]
    path = tmp_path / "memory.json"
    write_shard(path, *lines)
    whole = read_shard_file(path)
    split, stat = read_split(path) or pytest.fail("not read")
    parts = list(parse_slices(path, split, let_go=True))
    assert len(parts) == 3  # (12 lines that are not blank)
    assert [r for part in parts for r in part.records] == whole.records
    assert [n for part in parts for n in part.record_lines] == whole.record_lines
    assert [p for part in parts for p in part.problems] == whole.problems != []
    assert stat == whole.stat and split.lines == [""] * 12


def test_a_record_split_across_shards_is_told_as_a_load_reads_it(tmp_path: Path) -> None:
    """An old fork's split left a record in two shards, in lines an old writer left without "type" and with half
    an emoji (a lone surrogate escape): the first load tells it merged and made canonical, as a whole read does."""
    (tmp_path / "memory.json").write_text(
        '{"name":"E5","entityType":"person","observations":["a"]}\n'
        '{"type":"entity","name":"S","entityType":"p","observations":["x\\ud83d"]}\n',
        encoding="utf-8",
    )
    (tmp_path / "memory-1.json").write_text(
        '{"name":"E5","entityType":"person","observations":["b"]}\n'
        '{"type":"entity","name":"S","entityType":"p","observations":["y"]}\n',
        encoding="utf-8",
    )
    _, heard = open_store(tmp_path)
    _, told = read_whole(tmp_path)
    assert final_records(heard.calls) == final_records([("memory", [], told)])
    assert final_records(heard.calls) == [ent("E5", "a", "b"), ent("S", "x\ufffd", "y", entity_type="p")]


def test_a_first_load_that_fails_part_way_is_let_go_and_the_next_call_loads_again(tmp_path: Path) -> None:
    """A file edited by hand while a first load reads it (after its records were heard, before its copies of a
    record were merged): the load fails with a message to retry, lets go of what it held, and the next call loads
    the files as they are now."""
    (tmp_path / "memory.json").write_bytes(
        b"\n".join([line(ent("A", "1")), line(ent("B")), line(ent("A", "2"))]) + b"\n"
    )
    write_shard(tmp_path / "memory-1.json", line(ent("C")), line(ent("D")))

    class EditingOnce(Recorder):
        def records_changed(self, collection: str, removed: list[Key], upserted: list[Record]) -> None:
            super().records_changed(collection, removed, upserted)
            if len(self.calls) == 1:
                with open(tmp_path / "memory.json", "ab") as handle:
                    handle.write(line(ent("E")) + b"\n")

    store = Store({"memory": tmp_path / "memory.json", "lesson": tmp_path / "lesson.json"}, shard_lines=3)
    store.add_listener(EditingOnce())
    with pytest.raises(StaleShardError, match="retry the call"):
        store.open()
    assert not store.collections["memory"].shards and not store.collections["memory"].locations
    store.open()
    whole, _ = read_whole(tmp_path)
    assert held_state(store)["memory"] == held_state(whole)["memory"]
    upsert_all(store, [ent("F")])
    assert sorted(r["name"] for r in read_whole(tmp_path)[1]) == ["A", "B", "C", "D", "E", "F"]


def test_a_first_load_keeps_a_merged_line_only_where_the_file_does_not_hold_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard holding records twice is still held by its keys; of the merged lines, only those that are not the
    key's last line in the file are kept beside the keys (as a whole read keeps them): a restore of a shard with
    none takes its keys as they are, and each kept line costs every restart."""
    monkeypatch.setattr("memory_graph.storage.codec.PARSE_SLICE", 2)
    relation = {"type": "relation", "from": "E1", "to": "E2", "relationType": "knows"}
    write_shard(
        tmp_path / "memory.json",
        line(ent("E1", "o1")),
        line(relation),
        line(ent("E4", "o4")),
        line(ent("E1", "later")),
        line(relation),
        line(ent("E4", "o4", "last")),
    )
    streamed, _ = open_store(tmp_path)
    unread = streamed.collections["memory"].shards[0].unread_lines()
    assert unread is not None and unread.merged == {entity_key("E1"): line(ent("E1", "o1", "later")).decode()}
    whole, _ = read_whole(tmp_path)
    assert held_state(streamed)["memory"] == held_state(whole)["memory"]


def test_a_record_in_an_earlier_shard_and_twice_in_a_later_one_is_told_merged_from_all_its_copies(
    tmp_path: Path,
) -> None:
    """An old fork's split and an old writer's duplicates together: the later shard's own merged copy, told alone,
    replaced what the earlier shard had told (its alias lost)."""
    write_shard(tmp_path / "memory.json", line(ent("E1", "o0", "o2", aliases=["a2"])), line(ent("E2")))
    write_shard(tmp_path / "memory-1.json", line(ent("E1", "o0")), line(ent("E3")), line(ent("E1", "o2", "o0")))
    _, heard = open_store(tmp_path)
    _, told = read_whole(tmp_path)
    assert final_records(heard.calls) == final_records([("memory", [], told)])
    assert final_records(heard.calls)[0] == ent("E1", "o0", "o2", aliases=["a2"])


def test_a_shard_that_is_not_utf8_tells_its_copy_of_a_split_record_as_a_load_reads_it(tmp_path: Path) -> None:
    """A shard with bytes that are not UTF-8 is read whole (each bad line a problem); its copy of a record an
    earlier shard holds with half an emoji is merged with that copy made canonical (the surrogate replaced)."""
    (tmp_path / "memory.json").write_bytes(
        b'{"type":"entity","name":"E2","entityType":"p","observations":["\\ud83d"]}\n'
    )
    (tmp_path / "memory-1.json").write_bytes(line(ent("E2", "o1", entity_type="p")) + b"\n\xc3(\n")
    _, heard = open_store(tmp_path)
    _, told = read_whole(tmp_path)
    assert final_records(heard.calls) == final_records([("memory", [], told)])
    assert final_records(heard.calls) == [ent("E2", "\ufffd", "o1", entity_type="p")]
