"""The sharded store on real files: format, shards, journal, other processes, bad lines."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from memory_graph.errors import CorruptFileError
from memory_graph.graph import GraphService
from memory_graph.model import Entity, ObservationAddition, Relation
from memory_graph.storage import files_to_import
from tests.conftest import open_graph

ROOT = Path(__file__).resolve().parents[2]


def ent(name: str, *observations: str) -> Entity:
    return Entity(name=name, entityType="person", observations=list(observations))


def rel(source: str, target: str, relation_type: str = "knows") -> Relation:
    return Relation.model_validate({"from": source, "to": target, "relationType": relation_type})


def shard_files(folder: Path, stem: str = "memory") -> list[Path]:
    return sorted(folder.glob(f"{stem}*.json"))


def stored_lines(folder: Path, stem: str = "memory") -> list[str]:
    return [line for p in shard_files(folder, stem) for line in p.read_text(encoding="utf-8").splitlines()]


def snapshot(graph: GraphService) -> tuple[list[tuple], list[tuple]]:
    result = graph.read_graph()
    return (
        sorted((e.name, e.entityType, tuple(e.observations)) for e in result.entities),
        sorted((r.from_, r.to, r.relationType) for r in result.relations),
    )


def test_shards_never_exceed_the_limit_and_hold_each_record_once(graph: GraphService, tmp_path: Path) -> None:
    graph.create_entities([ent(f"E{i}") for i in range(10)])
    graph.create_relations([rel(f"E{i}", f"E{i + 1}") for i in range(9)])
    files = shard_files(tmp_path)
    assert {p.name for p in files} == {"memory.json"} | {f"memory-{i}.json" for i in range(1, 7)}
    assert all(len(p.read_text(encoding="utf-8").splitlines()) <= 3 for p in files)
    lines = stored_lines(tmp_path)
    assert len(lines) == len(set(lines)) == 19


def test_empty_shards_are_removed_and_deletes_stay_deleted(graph: GraphService, tmp_path: Path) -> None:
    graph.create_entities([ent(f"E{i}") for i in range(9)])
    assert len(shard_files(tmp_path)) == 3
    graph.delete_entities([f"E{i}" for i in range(3, 6)])
    assert len(shard_files(tmp_path)) == 2
    reopened = open_graph(tmp_path)
    assert sorted(e.name for e in reopened.read_graph().entities) == ["E0", "E1", "E2", "E6", "E7", "E8"]


def test_new_records_fill_free_space_before_new_shards(graph: GraphService, tmp_path: Path) -> None:
    graph.create_entities([ent(f"E{i}") for i in range(6)])
    graph.delete_entities(["E1"])
    graph.create_entities([ent("New")])
    assert len(shard_files(tmp_path)) == 2
    assert "New" in (tmp_path / "memory.json").read_text(encoding="utf-8")


def test_reads_an_official_memory_jsonl_as_is(tmp_path: Path) -> None:
    legacy = tmp_path / "memory.json"
    legacy.write_bytes(
        b'{"type":"entity","name":"Alice","entityType":"person","observations":["a"]}\r\n'
        b'{"name":"Bob","entityType":"person"}\n'
        b"\n"
        b'{"from":"Alice","to":"Bob","relationType":"knows"}\n'
        b'{"type":"entity","name":"Line\\u2028Sep","entityType":"x","observations":["\xe2\x80\xa8"]}'
    )
    graph = open_graph(tmp_path)
    assert snapshot(graph) == (
        [("Alice", "person", ("a",)), ("Bob", "person", ()), ("Line\u2028Sep", "x", ("\u2028",))],
        [("Alice", "Bob", "knows")],
    )
    graph.add_observations([ObservationAddition(entityName="Bob", contents=["now has some"])])
    assert open_graph(tmp_path).open_nodes(["Bob"]).entities[0].observations == ["now has some"]


def test_a_dated_copy_beside_a_memory_is_not_read_as_its_shard(tmp_path: Path) -> None:
    """`cp memory.json memory-20240101.json` is a backup: a first start (no manifest yet) read it as shard
    20240101, its deleted facts back in the memory, and its file written to from then on. Shards a folder really
    has, numbered from 1 with a gap here and there, are still read."""
    line = '{{"type":"entity","name":"{}","entityType":"person","observations":[]}}\n'
    (tmp_path / "memory.json").write_text(line.format("Ana"), encoding="utf-8")
    (tmp_path / "memory-1.json").write_text(line.format("Bea"), encoding="utf-8")
    (tmp_path / "memory-3.json").write_text(line.format("Cem"), encoding="utf-8")
    backup = tmp_path / "memory-20240101.json"
    backup.write_text(line.format("Deleted long ago"), encoding="utf-8")
    graph = open_graph(tmp_path)
    assert [e.name for e in graph.read_graph().entities] == ["Ana", "Bea", "Cem"]
    graph.create_entities([ent(f"New{i}") for i in range(5)])
    assert backup.read_text(encoding="utf-8") == line.format("Deleted long ago")
    imported = files_to_import([tmp_path / "memory.json"])
    assert backup not in imported and tmp_path / "memory-3.json" in imported


def test_an_oversized_legacy_file_is_split_when_written(tmp_path: Path) -> None:
    lines = [json.dumps({"type": "entity", "name": f"E{i}", "entityType": "t", "observations": []}) for i in range(8)]
    (tmp_path / "memory.json").write_text("\n".join(lines), encoding="utf-8")
    graph = open_graph(tmp_path)
    graph.create_entities([ent("New")])
    graph.add_observations([ObservationAddition(entityName="E0", contents=["x"])])
    assert all(len(p.read_text(encoding="utf-8").splitlines()) <= 3 for p in shard_files(tmp_path))
    assert len(open_graph(tmp_path).read_graph().entities) == 9


def test_the_shards_of_a_legacy_files_split_are_held_by_their_keys_and_read_back_when_written(
    tmp_path: Path,
) -> None:
    """The split of a large official file at its first write held every line it wrote (+190 MB at 100k entities
    until a restart): a commit that writes many shards holds them by their keys, as a load does."""
    lines = [json.dumps({"type": "entity", "name": f"E{i}", "entityType": "t", "observations": []}) for i in range(60)]
    (tmp_path / "memory.json").write_text("\n".join(lines), encoding="utf-8")
    graph = open_graph(tmp_path)  # 3 lines a shard
    graph.add_observations([ObservationAddition(entityName="E0", contents=["x"])])  # the file is split: 20 shards
    assert len(shard_files(tmp_path)) == 20
    collection = graph.store.collections["memory"]  # type: ignore[attr-defined]
    held_by_keys = [i for i, shard in collection.shards.items() if shard.unread_lines() is not None]
    assert len(held_by_keys) >= 19
    graph.add_observations([ObservationAddition(entityName="E40", contents=["y"])])  # a shard read back, rewritten
    graph.delete_entities(["E41"])
    other = open_graph(tmp_path)
    assert snapshot(other) == snapshot(graph) and len(other.read_graph().entities) == 59
    assert graph.open_nodes(["E40"]).entities[0].observations == ["y"]


def test_following_a_commit_that_spills_into_many_shards_here_holds_their_lines(tmp_path: Path) -> None:
    """Two processes with other shard limits on one official file (CRLF, so held by its lines): the one with the
    smaller limit replays the other's one-shard commit as a spill into many shards. Those are not its own writes,
    so it holds them by their lines, not by keys read back from files that hold other lines."""
    lines = [
        json.dumps({"type": "entity", "name": f"E{i}", "entityType": "t", "observations": [f"o{i}"]}) for i in range(30)
    ]
    (tmp_path / "memory.json").write_bytes(("\r\n".join(lines) + "\r\n").encode())
    small = open_graph(tmp_path, shard_lines=3)
    small.create_entities([ent("Z")])
    large = open_graph(tmp_path, shard_lines=1000)
    large.add_observations([ObservationAddition(entityName="E0", contents=["x"])])
    small.store._hand_edit_interval = 1e9  # type: ignore[attr-defined]  # (the look for hand edits not due)
    assert small.open_nodes(["E0"]).entities[0].observations == ["o0", "x"]
    assert snapshot(small) == snapshot(open_graph(tmp_path))


def test_a_fresh_load_of_many_shards_keeps_creation_order(tmp_path: Path) -> None:
    graph = open_graph(tmp_path, shard_lines=3)
    names = [f"E{i}" for i in range(10)]
    graph.create_entities([ent(n) for n in names[:7]])
    graph.create_relations([rel("E0", "E1"), rel("E6", "E0")])
    graph.create_entities([ent(n) for n in names[7:]])
    assert len(shard_files(tmp_path)) > 3
    reopened = open_graph(tmp_path, shard_lines=3).read_graph()
    assert [e.name for e in reopened.entities] == names
    assert [(r.from_, r.to) for r in reopened.relations] == [("E0", "E1"), ("E6", "E0")]


def test_a_one_entity_change_writes_bounded_bytes(tmp_path: Path) -> None:
    graph = open_graph(tmp_path, shard_lines=1000)
    for start in range(0, 5000, 500):
        graph.create_entities(
            [ent(f"Entity {i:05d}", f"note {i}", "member of the bench group") for i in range(start, start + 500)]
        )
    total = sum(p.stat().st_size for p in shard_files(tmp_path))
    assert len(shard_files(tmp_path)) == 5
    before = graph.store.bytes_written
    graph.add_observations([ObservationAddition(entityName="Entity 04321", contents=["one more"])])
    graph.create_entities([ent("Brand new")])
    written = graph.store.bytes_written - before
    assert written < total / 2  # two single-shard commits, not two rewrites of the whole graph
    biggest_shard = max(p.stat().st_size for p in shard_files(tmp_path))
    assert written <= 2 * (biggest_shard + 2000)


def test_a_bad_line_is_reported_by_file_and_line_and_never_overwritten(tmp_path: Path) -> None:
    graph = open_graph(tmp_path)
    graph.create_entities([ent(f"E{i}") for i in range(6)])
    first = tmp_path / "memory.json"
    text = first.read_text(encoding="utf-8").splitlines()
    text[1] = '{"type":"entity","name":"E1", BROKEN'
    first.write_text("\n".join(text) + "\n", encoding="utf-8")
    corrupted = first.read_bytes()

    reopened = open_graph(tmp_path)
    problems = reopened.store.problems()
    assert [(p.path, p.line_number) for p in problems] == [(first, 2)]
    assert sorted(e.name for e in reopened.read_graph().entities) == ["E0", "E2", "E3", "E4", "E5"]
    with pytest.raises(CorruptFileError) as caught:
        reopened.add_observations([ObservationAddition(entityName="E0", contents=["x"])])
    assert f"{first}:2" in str(caught.value) and "memory-graph repair" in str(caught.value)
    assert first.read_bytes() == corrupted
    reopened.create_entities([ent("Elsewhere")])  # other shards still take writes
    reopened.add_observations([ObservationAddition(entityName="E4", contents=["fine"])])
    assert first.read_bytes() == corrupted
    assert "Elsewhere" in {e.name for e in open_graph(tmp_path).read_graph().entities}


def test_a_duplicated_record_across_shards_is_deleted_everywhere(tmp_path: Path) -> None:
    graph = open_graph(tmp_path)
    graph.create_entities([ent(f"E{i}") for i in range(4)])
    extra = tmp_path / "memory-1.json"
    extra.write_text(extra.read_text(encoding="utf-8") + (tmp_path / "memory.json").read_text().splitlines()[0] + "\n")
    reopened = open_graph(tmp_path)
    assert [e.name for e in reopened.read_graph().entities].count("E0") == 1
    reopened.delete_entities(["E0"])
    assert "E0" not in {e.name for e in open_graph(tmp_path).read_graph().entities}
    assert not any('"E0"' in line for line in stored_lines(tmp_path))


def test_another_process_sees_each_commit(tmp_path: Path) -> None:
    first, second = open_graph(tmp_path), open_graph(tmp_path)
    first.create_entities([ent("Alice")])
    assert [e.name for e in second.read_graph().entities] == ["Alice"]
    second.add_observations([ObservationAddition(entityName="Alice", contents=["from the second"])])
    second.create_entities([ent(f"E{i}") for i in range(5)])
    assert first.open_nodes(["Alice"]).entities[0].observations == ["from the second"]
    first.delete_entities(["E3"])
    assert snapshot(first) == snapshot(second)
    assert len(second.read_graph().entities) == 5


def test_following_another_process_looks_only_at_the_shards_its_commit_changed_and_hand_edits_still_show(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = open_graph(tmp_path), open_graph(tmp_path)
    first.create_entities([ent(f"E{i}", "x") for i in range(60)])
    assert len(second.read_graph().entities) == 60
    assert len(shard_files(tmp_path)) > 10
    looked_at: list[str] = []
    real_stat, real_scandir = os.stat, os.scandir

    def counted_stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if str(path).endswith(".json"):
            looked_at.append(os.path.basename(str(path)))
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    def counted_scandir(path: object) -> object:
        looked_at.append("the folder")
        return real_scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", counted_stat)
    monkeypatch.setattr(os, "scandir", counted_scandir)
    first.add_observations([ObservationAddition(entityName="E30", contents=["new"])])
    looked_at.clear()
    assert second.open_nodes(["E30"]).entities[0].observations == ["x", "new"]
    # The rewritten shard and the history's newest at most, not every shard, and no scan of the folder.
    assert "the folder" not in looked_at and len(set(looked_at)) <= 3, looked_at
    monkeypatch.undo()

    untouched = next(p for p in shard_files(tmp_path) if '"E5"' in p.read_text(encoding="utf-8"))
    untouched.write_text(untouched.read_text(encoding="utf-8").replace('["x"]', '["by hand"]'), encoding="utf-8")
    time.sleep(1.1)  # the check for hand edits comes round (once a second)
    assert second.open_nodes(["E5"]).entities[0].observations == ["by hand"]


def test_a_write_after_another_process_committed_is_not_taken_for_a_hand_edit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other process's commit changed a shard's stat: that is followed narrowly, not taken for a hand edit
    that makes the writer stat every shard of the history."""
    first, second = open_graph(tmp_path), open_graph(tmp_path)
    for i in range(20):
        first.create_entities([ent(f"E{i}", "x")])
    assert len(second.read_graph().entities) == 20
    assert len(list(tmp_path.glob("history*.json"))) > 5
    first.add_observations([ObservationAddition(entityName="E3", contents=["new"])])
    history_stats: list[str] = []
    real_stat = os.stat

    def counted_stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if os.path.basename(str(path)).startswith("history"):
            history_stats.append(os.path.basename(str(path)))
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", counted_stat)
    second.add_observations([ObservationAddition(entityName="E4", contents=["mine"])])
    monkeypatch.undo()
    assert len(set(history_stats)) <= 3, history_stats
    assert snapshot(open_graph(tmp_path)) == snapshot(second) == snapshot(first)


def test_a_hand_edit_is_picked_up_before_the_next_write(tmp_path: Path) -> None:
    graph = open_graph(tmp_path)
    graph.create_entities([ent("Alice")])
    (tmp_path / "memory.json").write_text(
        '{"type":"entity","name":"Alice","entityType":"person","observations":["hand"]}\n', encoding="utf-8"
    )
    graph.create_entities([ent("Bob")])
    assert graph.open_nodes(["Alice"]).entities[0].observations == ["hand"]
    assert snapshot(open_graph(tmp_path)) == snapshot(graph)


def test_a_crash_during_a_multi_shard_commit_is_finished_on_reopen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = open_graph(tmp_path)
    graph.create_entities([ent(f"E{i}") for i in range(9)])
    graph.create_relations([rel("E0", "E8")])

    class Crash(Exception):
        pass

    real_replace = os.replace
    calls = {"after_journal": -1}

    def dying_replace(src: str, dst: str) -> None:
        if str(dst).endswith(".journal"):
            calls["after_journal"] = 0
        elif calls["after_journal"] >= 0:
            calls["after_journal"] += 1
            if calls["after_journal"] == 2:  # the journal and one shard are in place; the process dies here
                raise Crash
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", dying_replace)
    with pytest.raises(Crash):
        graph.delete_entities(["E0", "E4", "E8"])
    monkeypatch.setattr(os, "replace", real_replace)
    assert (tmp_path / "memory.json.journal").exists()
    reopened = open_graph(tmp_path)
    assert sorted(e.name for e in reopened.read_graph().entities) == ["E1", "E2", "E3", "E5", "E6", "E7"]
    assert reopened.read_graph().relations == []
    assert not (tmp_path / "memory.json.journal").exists()
    assert not list(tmp_path.glob(".*.tmp"))


def test_missing_parent_folders_are_created(tmp_path: Path) -> None:
    graph = open_graph(tmp_path / "a" / "b")
    graph.create_entities([ent("Alice")])
    assert (tmp_path / "a" / "b" / "memory.json").exists()


def test_duplicate_entities_are_merged_not_dropped(tmp_path: Path) -> None:
    """The official server stores `Alice` twice when one call names her twice; the fork duplicated records
    when it split files. Both copies' observations survive, in the order they were written."""
    (tmp_path / "memory.json").write_text(
        '{"type":"entity","name":"Alice","entityType":"person","observations":["a","b"]}\n'
        '{"type":"entity","name":"Alice","entityType":"person","observations":["b","c"]}\n',
        encoding="utf-8",
    )
    (tmp_path / "memory-1.json").write_text(
        '{"type":"entity","name":"Alice","entityType":"person","observations":["d"]}\n', encoding="utf-8"
    )
    graph = open_graph(tmp_path)
    assert graph.open_nodes(["Alice"]).entities[0].observations == ["a", "b", "c", "d"]
    graph.add_observations([ObservationAddition(entityName="Alice", contents=["e"])])
    assert stored_lines(tmp_path) == [
        '{"type":"entity","name":"Alice","entityType":"person","observations":["a","b","c","d","e"]}'
    ]
    assert open_graph(tmp_path).open_nodes(["Alice"]).entities[0].observations == ["a", "b", "c", "d", "e"]


def test_lines_that_are_valid_json_but_not_one_record_are_reported_by_line(tmp_path: Path) -> None:
    (tmp_path / "memory.json").write_text(
        '{"type":"entity","name":"Alice","entityType":"person","observations":[]}\n'
        '{"type":"entity","name":"Bob","entityType":"person","observations":[]}, {"x": 1}\n'
        "42\n"
        '{"type":"mystery"}\n'
        '{"type":"relation","from":"Alice","to":"Alice","relationType":"self"}\n',
        encoding="utf-8",
    )
    graph = open_graph(tmp_path)
    assert [(p.line_number, p.reason.split(" (")[0]) for p in graph.store.problems()] == [
        (2, "not valid JSON"),
        (3, "not a JSON object"),
        (4, 'unknown record type "mystery"'),
    ]
    assert snapshot(graph) == ([("Alice", "person", ())], [("Alice", "Alice", "self")])


def test_a_read_only_data_folder_serves_reads_and_refuses_writes_with_the_reason() -> None:
    """Run as an unprivileged user (root ignores permissions): no lock file can be created there."""
    folder = Path(tempfile.mkdtemp(prefix="memory-graph-readonly-", dir="/tmp"))
    try:
        data = folder / "data"
        open_graph(data).create_entities([ent("Alice", "person", "x")])
        for lock in data.glob("*.lock"):
            lock.unlink()
        before = sorted(p.name for p in data.iterdir())
        for path in (folder, data):
            path.chmod(0o755)
        for path in data.iterdir():
            path.chmod(0o644)
        script = (
            "import sys\n"
            "from pathlib import Path\n"
            "from tests.conftest import open_graph\n"
            "from memory_graph.errors import StorageError\n"
            "from memory_graph.model import Entity\n"
            f"graph = open_graph(Path({str(data)!r}))\n"
            "print([e.name for e in graph.read_graph().entities])\n"
            "try:\n"
            "    graph.create_entities([Entity(name='Bob', entityType='person', observations=[])])\n"
            "except StorageError as exc:\n"
            "    print(exc)\n"
        )
        user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
        if not user:
            data.chmod(0o555)
        run = subprocess.run(
            [*user, sys.executable, "-c", script],
            cwd=ROOT,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "MEMORY_SEMANTIC": "off"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        shown, refusal = run.stdout.splitlines()
        assert shown == "['Alice']"
        assert "cannot change the memory" in refusal and "Reads still work" in refusal
        assert sorted(p.name for p in data.iterdir()) == before  # no lock file could be made
    finally:
        folder.chmod(0o700)
        shutil.rmtree(folder, ignore_errors=True)
