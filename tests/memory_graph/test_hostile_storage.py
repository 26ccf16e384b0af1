"""Issue 14's storage cases, one regression test each: files that are not ours, shared files, crafted and
copied journals, full disks, odd paths and bad bytes (numbers follow the issue)."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from lessons.model import LessonInput
from memory_graph.app import services_for_folder
from memory_graph.cli import main
from memory_graph.errors import StorageError
from memory_graph.model import Entity, ObservationAddition
from memory_graph.storage import Store
from tests.conftest import open_graph, open_services

ROOT = Path(__file__).resolve().parents[2]
CHILD_ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "MEMORY_SEMANTIC": "off"}


def ent(name: str, *observations: str) -> Entity:
    return Entity(name=name, entityType="person", observations=list(observations))


def names_in(folder: Path, **kwargs: int) -> list[str]:
    return sorted(e.name for e in open_graph(folder, **kwargs).read_graph().entities)


# 1 ---------------------------------------------------------------------------------------------------------
def test_another_memorys_file_named_like_a_shard_is_never_read_or_written(tmp_path: Path) -> None:
    other = Store({"memory": tmp_path / "memory-2.json", "lesson": tmp_path / "other-lesson.json"})
    with other.transaction() as tx:
        tx.upsert("memory", {"type": "entity", "name": "Bob", "entityType": "person", "observations": ["B's"]})
    before = (tmp_path / "memory-2.json").read_bytes()
    graph = open_graph(tmp_path, shard_lines=2)
    graph.create_entities([ent(f"A{i}") for i in range(9)])  # five shards' worth: index 2 must be skipped
    graph.delete_entities(["Bob"])
    assert "Bob" not in {e.name for e in graph.read_graph().entities}
    assert (tmp_path / "memory-2.json").read_bytes() == before
    assert names_in(tmp_path, shard_lines=2) == sorted(f"A{i}" for i in range(9))


def test_a_legacy_store_without_a_stamp_still_adopts_its_shards_but_not_another_memorys_main_file(
    tmp_path: Path,
) -> None:
    line = '{{"type":"entity","name":"{}","entityType":"t","observations":[]}}\n'
    (tmp_path / "memory.json").write_text(line.format("A"), encoding="utf-8")
    (tmp_path / "memory-1.json").write_text(line.format("B"), encoding="utf-8")  # the old fork's split
    (tmp_path / "memory-2.json").write_text(line.format("C"), encoding="utf-8")  # another memory's main file
    (tmp_path / "memory-2.json.stamp").write_text("{}", encoding="utf-8")
    assert names_in(tmp_path) == ["A", "B"]


# 2 ---------------------------------------------------------------------------------------------------------
WORKER = """
import sys
from pathlib import Path
from lessons.model import SuccessReport
from memory_graph.app import services_for_folder
from memory_graph.config import Settings
memory, lesson, count = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
from memory_graph.app import build_services
services = build_services(Settings(memory_file=memory, lesson_file=lesson))
for _ in range(count):
    services.lessons.update_lesson_success(SuccessReport(lessonName="SHARED", success=True))
print("done")
"""


@pytest.mark.slow
def test_two_memories_sharing_one_lesson_file_lose_no_update(tmp_path: Path) -> None:
    lesson = tmp_path / "lesson.json"
    seed = open_services(tmp_path, shard_lines=1000)
    seed.lessons.create_lesson(LessonInput(name="SHARED", errorPattern={"type": "x", "message": "boom"}))
    count = 120
    children = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tmp_path / memory), str(lesson), str(count)],
            cwd=ROOT,
            env=CHILD_ENV,
            stdout=subprocess.PIPE,
            text=True,
        )
        for memory in ("work.json", "personal.json")
    ]
    for child in children:
        out, _ = child.communicate(timeout=300)
        assert child.returncode == 0 and out.strip() == "done"
    fresh = services_for_folder(tmp_path)
    fresh.store.open()
    assert fresh.lessons.records["SHARED"]["metadata"]["frequency"] == 2 * count


# 3 ---------------------------------------------------------------------------------------------------------
def test_no_lock_file_exists_to_be_deleted_and_a_timeout_never_advises_deleting_one(tmp_path: Path) -> None:
    graph = open_graph(tmp_path)
    graph.create_entities([ent("A")])
    assert not list(tmp_path.glob("*.lock"))
    held = os.open(tmp_path, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        store = Store({"memory": tmp_path / "memory.json"}, lock_timeout_seconds=0.1)
        with pytest.raises(StorageError) as refused, store.transaction():
            pass
        assert "delete" not in str(refused.value) and "retry" in str(refused.value)
    finally:
        os.close(held)


def test_a_writer_waiting_for_the_lock_gets_it_when_it_is_released_and_one_given_up_on_leaves_it_free(
    tmp_path: Path,
) -> None:
    graph = open_graph(tmp_path)
    graph.create_entities([ent("A")])
    held = os.open(tmp_path, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)
    released = threading.Timer(0.3, os.close, [held])
    released.start()
    waiting = Store({"memory": tmp_path / "memory.json"}, lock_timeout_seconds=60)
    with waiting.transaction() as tx:  # blocks until the holder lets go, then writes
        tx.upsert("memory", {"type": "entity", "name": "B", "entityType": "t", "observations": []})
    released.join()
    assert {e.name for e in open_graph(tmp_path).read_graph().entities} == {"A", "B"}

    held = os.open(tmp_path, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)
    impatient = Store({"memory": tmp_path / "memory.json"}, lock_timeout_seconds=0.1)
    with pytest.raises(StorageError, match="another process has held the lock"), impatient.transaction():
        pass
    os.close(held)
    # The waiter given up on takes the lock when it comes free and lets go of it at once: nobody is locked out.
    probe = os.open(tmp_path, os.O_RDONLY)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, "the abandoned waiter kept the lock"
                time.sleep(0.01)
    finally:
        os.close(probe)
    graph.create_entities([ent("C")])
    assert "C" in {e.name for e in open_graph(tmp_path).read_graph().entities}


# 4 ---------------------------------------------------------------------------------------------------------
def test_a_write_that_fails_on_a_full_disk_never_lands_and_reads_keep_working(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = open_graph(tmp_path)
    graph.create_entities([ent(f"E{i}", "x") for i in range(7)])  # three shards
    before = {p.name: p.read_bytes() for p in tmp_path.glob("memory*.json")}
    real_open = os.open

    def full_disk(path: object, flags: int, *args: object) -> int:
        if str(path).endswith(".tmp"):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", full_disk)
    with pytest.raises(StorageError, match="Nothing was changed"):
        graph.add_observations([ObservationAddition(entityName=f"E{i}", contents=["y"]) for i in range(7)])
    assert not (tmp_path / "memory.json.journal").exists()
    assert names_in(tmp_path) == [f"E{i}" for i in range(7)]  # a fresh process reads, on the full disk
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in tmp_path.glob("memory*.json")} == before
    assert all(e.observations == ["x"] for e in open_graph(tmp_path).read_graph().entities)


# 5 ---------------------------------------------------------------------------------------------------------
def leave_a_journal(folder: Path) -> None:
    """A commit over three shards that dies right after its journal is on disk."""
    graph = open_graph(folder)
    graph.create_entities([ent(f"E{i}", "x") for i in range(7)])
    real_replace = os.replace

    def die_after_journal(source: str, target: str) -> None:
        real_replace(source, target)
        if str(target).endswith(".journal"):
            raise KeyboardInterrupt  # the process dies here

    os.replace = die_after_journal  # type: ignore[assignment]
    try:
        with pytest.raises(KeyboardInterrupt):
            graph.add_observations([ObservationAddition(entityName=f"E{i}", contents=["y"]) for i in range(7)])
    finally:
        os.replace = real_replace


def test_a_copied_folder_with_a_leftover_journal_rolls_forward_into_the_copy_only(tmp_path: Path) -> None:
    original, copy = tmp_path / "original", tmp_path / "copy"
    leave_a_journal(original)
    shutil.copytree(original, copy)
    before = {p.name: p.read_bytes() for p in original.iterdir()}
    entities = open_graph(copy).read_graph().entities
    assert [e.observations for e in entities] == [["x", "y"]] * 7
    assert {p.name: p.read_bytes() for p in original.iterdir()} == before  # untouched, journal still there


def test_a_leftover_journal_never_puts_a_damaged_new_shard_in_place(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A folder copied or synced mid-commit may hold a temp cut short: put in place, it replaced a shard with part
    of itself and its last records were gone without a word (`check` said ok). The temp is checked against the
    journal's digest; that shard stays as it was, and the skip is said."""
    leave_a_journal(tmp_path)
    temps = sorted(tmp_path.glob(".memory*.tmp"))
    assert len(temps) >= 2
    damaged = temps[0]
    target = tmp_path / damaged.name[1:].rsplit(".", 2)[0]
    before = target.read_bytes()
    damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])
    entities = open_graph(tmp_path).read_graph().entities
    assert target.read_bytes() == before and f"{target} (its new content in {damaged} was damaged" in caplog.text
    assert sorted(e.name for e in entities) == [f"E{i}" for i in range(7)]  # no record lost


def test_a_crafted_journal_naming_files_outside_the_store_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    open_graph(data).create_entities([ent("A")])
    victim = tmp_path / "victim.txt"
    victim.write_text("precious", encoding="utf-8")
    journal = {
        "format": "memory-graph-journal/2",
        "writes": [{"target": "../victim.txt", "temp": None, "before": None, "after": None}],
    }
    (data / "memory.json.journal").write_text(json.dumps(journal), encoding="utf-8")
    with pytest.raises(StorageError, match="not one of this store's files"):
        open_graph(data)
    assert victim.read_text(encoding="utf-8") == "precious"
    assert "not one of this store's files" in Store({"memory": data / "memory.json"}).check().problems[0]


# 6 ---------------------------------------------------------------------------------------------------------
def test_import_racing_a_server_keeps_both_sides(tmp_path: Path) -> None:
    source = tmp_path / "big.jsonl"
    lines = [{"type": "entity", "name": f"I{i}", "entityType": "t", "observations": ["imported"]} for i in range(4000)]
    lines.append({"type": "entity", "name": "X", "entityType": "t", "observations": ["from the import"]})
    source.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    env = {**CHILD_ENV, "MEMORY_FILE_PATH": str(tmp_path / "store" / "memory.json")}
    child = subprocess.Popen([sys.executable, "-m", "memory_graph", "import", str(source)], cwd=ROOT, env=env)
    while child.poll() is None and not (tmp_path / "store" / "memory.json").exists():
        time.sleep(0.01)  # the import has begun committing batches
    server = open_graph(tmp_path / "store", shard_lines=1000)
    if not server.create_entities([ent("X", "from the server")]).entities:
        server.add_observations([ObservationAddition(entityName="X", contents=["from the server"])])
    assert child.wait(timeout=300) == 0
    after = open_graph(tmp_path / "store", shard_lines=1000)
    assert set(after.open_nodes(["X"]).entities[0].observations) == {"from the import", "from the server"}
    assert len(after.state.entities) == 4001


# 8 ---------------------------------------------------------------------------------------------------------
def test_a_symlinked_memory_file_stays_a_link_and_its_target_is_updated(tmp_path: Path) -> None:
    real = tmp_path / "real" / "memory.json"
    real.parent.mkdir()
    link = tmp_path / "memory.json"
    link.symlink_to(real)
    graph = open_graph(tmp_path)
    graph.create_entities([ent("A", "x")])
    graph.add_observations([ObservationAddition(entityName="A", contents=["y"])])
    assert link.is_symlink() and '"observations":["x","y"]' in real.read_text(encoding="utf-8")


@pytest.mark.parametrize("kind", ["fifo", "device", "folder-stamp"])
def test_data_paths_that_are_not_plain_files_are_refused_at_start(tmp_path: Path, kind: str) -> None:
    memory = tmp_path / "memory.json"
    if kind == "fifo":
        os.mkfifo(memory)
    elif kind == "device":
        memory = Path("/dev/null")
    else:
        (tmp_path / "memory.json.stamp").mkdir()
    store = Store({"memory": memory, "lesson": tmp_path / "lesson.json"})
    with pytest.raises(StorageError, match="not a regular file"):
        store.open()


@pytest.mark.parametrize("lesson_name", ["memory-1.json", "memory.json.stamp", "memory.json.journal"])
def test_a_lesson_file_that_is_one_of_the_memorys_own_files_is_refused(tmp_path: Path, lesson_name: str) -> None:
    with pytest.raises(StorageError, match="one of the memory file's own files"):
        Store({"memory": tmp_path / "memory.json", "lesson": tmp_path / lesson_name})


# 9, 12, 13 -------------------------------------------------------------------------------------------------
def test_a_bom_a_lone_surrogate_and_bad_values_are_read_or_reported_by_line(tmp_path: Path) -> None:
    good = '{"type":"entity","name":"A","entityType":"t","observations":["half \\ud83d emoji"]}'
    empty_end = '{"type":"relation","from":"","to":"A","relationType":"r"}'
    huge = '{"type":"entity","name":"B","entityType":"t","observations":[],"n":' + "9" * 5000 + "}"
    (tmp_path / "memory.json").write_bytes(b"\xef\xbb\xbf" + f"{good}\n{empty_end}\n".encode())
    (tmp_path / "memory-1.json").write_text(huge + "\n", encoding="utf-8")
    graph = open_graph(tmp_path, shard_lines=1000)
    shown = graph.read_graph().model_dump_json()  # encodes as UTF-8: no lone surrogate survives
    assert "half \ufffd emoji" in graph.read_graph().entities[0].observations[0] and "A" in shown
    problems = [(p.path.name, p.line_number) for p in graph.store.problems()]
    assert problems == [("memory.json", 2), ("memory-1.json", 1)]
    assert graph.search_nodes("emoji").entities[0].name == "A"


# 15 --------------------------------------------------------------------------------------------------------
def test_an_unreadable_parent_folder_is_a_clear_error(tmp_path: Path) -> None:
    folder = Path(tempfile.mkdtemp(prefix="memory-graph-locked-", dir="/tmp"))
    try:
        (folder / "inner").mkdir()
        folder.chmod(0o700)
        user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
        if not user:
            folder.chmod(0o000)
        run = subprocess.run(
            [*user, sys.executable, "-m", "memory_graph", "stats"],
            cwd="/",
            env={**CHILD_ENV, "MEMORY_FILE_PATH": str(folder / "inner" / "memory.json")},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode != 0 and "Traceback" not in run.stderr
        assert "MEMORY_FILE_PATH" in run.stderr or "cannot" in run.stderr
    finally:
        folder.chmod(0o700)
        shutil.rmtree(folder, ignore_errors=True)


# 16 --------------------------------------------------------------------------------------------------------
def test_private_files_stay_private_and_new_ones_are_created_private(tmp_path: Path) -> None:
    data = tmp_path / "new-folder"
    graph = open_graph(data)
    graph.create_entities([ent("A")])
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE((data / "memory.json").stat().st_mode) == 0o600
    (data / "memory.json").chmod(0o640)
    graph.add_observations([ObservationAddition(entityName="A", contents=["x"])])
    assert stat.S_IMODE((data / "memory.json").stat().st_mode) == 0o640


# 17 --------------------------------------------------------------------------------------------------------
def test_import_of_a_folder_does_not_follow_a_registry_out_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "elsewhere" / "secret.json"
    outside.parent.mkdir()
    outside.write_text('{"type":"entity","name":"Secret","entityType":"t","observations":[]}\n', encoding="utf-8")
    fork = tmp_path / "fork"
    fork.mkdir()
    (fork / "memory.json").write_text('{"type":"entity","name":"A","entityType":"t","observations":[]}\n', "utf-8")
    (fork / "file_registry.json").write_text(json.dumps({"memory": ["memory.json", str(outside)]}), "utf-8")
    monkeypatch.setenv("MEMORY_FILE_PATH", str(tmp_path / "store" / "memory.json"))
    assert main(["import", str(fork)]) == 0
    capsys.readouterr()
    assert names_in(tmp_path / "store") == ["A"]
    assert main(["import", str(outside)]) == 0  # named on the command line: imported
    assert names_in(tmp_path / "store") == ["A", "Secret"]


# and the unclear answers ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "journal",
    [b"\xff\xfe not utf-8", b'{"format": "memory-graph-journal/2", "writes": [{"target": 5}]}', b"[1, 2]"],
)
def test_a_broken_journal_is_reported_and_set_aside_without_a_traceback(tmp_path: Path, journal: bytes) -> None:
    open_graph(tmp_path).create_entities([ent("A")])
    (tmp_path / "memory.json.journal").write_bytes(journal)
    store = Store({"memory": tmp_path / "memory.json", "lesson": tmp_path / "lesson.json"})
    assert "journal" in store.check().problems[0]
    repaired = store.check(fix=True)
    assert repaired.ok and "moved the unreadable journal" in repaired.repaired[0]
    assert names_in(tmp_path) == ["A"]


FILE_SIZE_LIMITED_WRITE = """
import resource, sys
from pathlib import Path
from memory_graph.app import services_for_folder
from memory_graph.errors import StorageError
from memory_graph.model import ObservationAddition
services = services_for_folder(Path(sys.argv[1]), shard_lines=3)
services.store.open()
resource.setrlimit(resource.RLIMIT_FSIZE, (12 * 1024, resource.RLIM_INFINITY))  # no file over 12 KB from here
try:
    services.graph.add_observations([ObservationAddition(entityName="X1", contents=["tiny"])])
except StorageError as exc:
    print(exc)
"""


def test_a_write_refused_for_lack_of_room_never_lands_later(tmp_path: Path) -> None:
    """A commit of one graph shard and one history shard wrote the events (its redo log) in place first: when the
    graph shard could not be written (a full disk, a file size limit), the call said nothing was changed, and the
    next open finished it from the events. Every content is now written before anything is replaced."""
    first = services_for_folder(tmp_path, shard_lines=3)
    big = "x" * 5000
    first.graph.create_entities([Entity(name=f"X{i}", entityType="t", observations=[big]) for i in (1, 2, 3)])
    first.store.close()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MEMORY_SEMANTIC": "off"}
    ran = subprocess.run(
        [sys.executable, "-c", FILE_SIZE_LIMITED_WRITE, str(tmp_path)], env=env, capture_output=True, text=True
    )
    assert "Nothing was changed" in ran.stdout, ran.stdout + ran.stderr
    again = services_for_folder(tmp_path, shard_lines=3)
    assert again.graph.open_nodes(["X1"]).entities[0].observations == [big]
    assert "tiny" not in json.dumps([e["observations"] for e in again.store.collections["memory"].all_records()])
