"""The admin CLI as a user runs it: import, export, stats, check, repair; in process (`main(argv)`), and a few
through a real subprocess."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from memory_graph.cli import main
from memory_graph.errors import StorageError
from memory_graph.model import Entity, ObservationAddition
from memory_graph.storage import Store
from tests.conftest import needed, open_services

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., Ran]:
    """`memory-graph ARGS` in this process, on `<folder>/store/memory.json` at a 3-line shard size."""

    def invoke(folder: Path, *args: str) -> Ran:
        monkeypatch.setenv("MEMORY_FILE_PATH", str(folder / "store" / "memory.json"))
        monkeypatch.setenv("MEMORY_SHARD_LINES", "3")
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return Ran(code, out, err)

    return invoke


def run_process(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMORY_FILE_PATH": str(folder / "store" / "memory.json"), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "memory_graph", *args], env=env, capture_output=True, text=True, timeout=120
    )


def official_file(folder: Path) -> Path:
    path = folder / "old" / "memory.jsonl"
    path.parent.mkdir(parents=True)
    lines = [
        {"type": "entity", "name": "Alice", "entityType": "person", "observations": ["likes tea"]},
        {"type": "entity", "name": "Acme", "entityType": "organization", "observations": []},
        {"type": "entity", "name": "Alice", "entityType": "person", "observations": ["dupe"]},
        {"type": "relation", "from": "Alice", "to": "Acme", "relationType": "works_at"},
        {"type": "relation", "from": "Alice", "to": "Ghost", "relationType": "knows"},
    ]
    path.write_text(
        "\n".join(json.dumps(x) for x in lines), encoding="utf-8"
    )  # no trailing newline, like the reference
    return path


def fork_files(folder: Path) -> Path:
    fork = folder / "fork"
    fork.mkdir()
    (fork / "memory.json").write_text(
        json.dumps({"type": "entity", "name": "Bob", "entityType": "person", "observations": ["from the fork"]}) + "\n",
        encoding="utf-8",
    )
    (fork / "memory-1.json").write_text(
        json.dumps({"type": "entity", "name": "Carol", "entityType": "person", "observations": []})
        + "\n"
        + json.dumps({"type": "relation", "from": "Bob", "to": "Carol", "relationType": "knows"})
        + "\n",
        encoding="utf-8",
    )
    lesson = {
        "type": "lesson",
        "name": "PORT_IN_USE",
        "entityType": "lesson",
        "observations": ["kill the old server"],
        "errorPattern": {"type": "network", "message": "Error: listen EADDRINUSE :::3000", "context": "dev"},
        "verificationSteps": [],
        "metadata": {"severity": "high", "frequency": 4, "successRate": 0.75},
    }
    (fork / "lesson.json").write_text(json.dumps(lesson) + "\n", encoding="utf-8")
    (fork / "file_registry.json").write_text(
        json.dumps({"memory": ["memory.json", "memory-1.json"], "lesson": ["lesson.json"]}), encoding="utf-8"
    )
    return fork


def test_import_merges_official_and_fork_files_and_skips_duplicates(tmp_path: Path, run: Callable[..., Ran]) -> None:
    official = official_file(tmp_path)
    fork = fork_files(tmp_path)
    first = run(tmp_path, "import", str(official), str(fork / "memory.json"))
    assert first.returncode == 0, first.stderr
    assert "imported 4 entities, 2 relations, 1 lessons" in first.stdout
    assert "merged 1 into names already there" in first.stdout  # Alice twice: one entity, both observations
    assert "skipped 0 duplicates and 1 relations whose ends do not exist" in first.stdout
    assert "'Ghost'" in first.stderr
    again = run(tmp_path, "import", str(official), str(fork))
    assert "imported 0 entities, 0 relations, 0 lessons" in again.stdout
    assert "merged 0 into names already there" in again.stdout  # the lesson again, unchanged: a duplicate
    stats = json.loads(run(tmp_path, "stats").stdout)
    assert stats["memory"]["entities"] == 4 and stats["memory"]["relations"] == 2
    assert stats["lesson"]["entities"] == 1
    assert all(s["lines"] <= 3 for s in stats["memory"]["shards"])
    exported = run(tmp_path, "export", "--format", "json").stdout
    lessons = json.loads(exported)["lessons"]
    assert lessons[0]["metadata"]["frequency"] == 4 and lessons[0]["metadata"]["successCount"] == 3
    assert run(tmp_path, "check").returncode == 0


def test_export_formats(tmp_path: Path, run: Callable[..., Ran]) -> None:
    run(tmp_path, "import", str(official_file(tmp_path)), str(fork_files(tmp_path)))
    jsonl = run(tmp_path, "export").stdout.splitlines()
    records = [json.loads(line) for line in jsonl]
    assert [r["type"] for r in records].count("relation") == 2
    assert {r["name"] for r in records if r["type"] == "entity"} == {"Alice", "Acme", "Bob", "Carol", "PORT_IN_USE"}
    mermaid = run(tmp_path, "export", "--format", "mermaid").stdout
    assert mermaid.startswith("graph LR") and "works_at" in mermaid and "class " in mermaid and "lesson" in mermaid
    dot = run(tmp_path, "export", "--format", "dot").stdout
    assert dot.startswith("digraph memory {") and "shape=note" in dot and '"knows"' in dot
    out = tmp_path / "graph.dot"
    assert run(tmp_path, "export", "--format", "dot", "--output", str(out)).returncode == 0
    assert out.read_text(encoding="utf-8") == dot


def test_check_finds_each_kind_of_problem_and_repair_keeps_every_byte(tmp_path: Path, run: Callable[..., Ran]) -> None:
    run(tmp_path, "import", str(official_file(tmp_path)), str(fork_files(tmp_path)))
    store = tmp_path / "store"
    first = store / "memory.json"
    lines = first.read_bytes().split(b"\n")
    bad = b'{"type":"entity","name":"Broken", \xff'
    lines.insert(1, bad)
    first.write_bytes(b"\n".join(lines))
    second = store / "memory-1.json"
    original = first.read_bytes().split(b"\n")[0]
    copy = json.loads(original)
    copy["observations"] = [*copy["observations"], "only in the copy"]
    duplicate = json.dumps(copy).encode()
    second.write_bytes(second.read_bytes() + duplicate + b"\n")
    (store / "memory.json.journal").write_text("{not json", encoding="utf-8")

    checked = run(tmp_path, "check")
    assert checked.returncode == 1
    assert f"{first}:2:" in checked.stdout
    assert "is stored 2 times" in checked.stdout
    assert "journal" in checked.stdout

    repaired = run(tmp_path, "repair")
    assert repaired.returncode == 0, repaired.stderr
    side_files = list(store.glob("memory.json.rejected-*")) + list(store.glob("memory-1.json.rejected-*"))
    kept = b"".join(p.read_bytes() for p in side_files)
    assert bad in kept and duplicate in kept
    assert list(store.glob("memory.json.journal.unreadable-*"))
    assert run(tmp_path, "check").returncode == 0
    exported = [json.loads(line) for line in run(tmp_path, "export").stdout.splitlines()]
    entities = {r["name"]: r for r in exported if r["type"] == "entity"}
    assert set(entities) == {"Alice", "Acme", "Bob", "Carol", "PORT_IN_USE"}
    assert entities[copy["name"]]["observations"] == copy["observations"]  # the copies were merged


def test_import_of_a_missing_path_says_so(tmp_path: Path, run: Callable[..., Ran]) -> None:
    result = run(tmp_path, "import", str(tmp_path / "nope.jsonl"))
    assert result.returncode == 1 and "nothing to import" in result.stderr


@pytest.mark.slow
def test_the_official_server_reads_our_export(tmp_path: Path, run: Callable[..., Ran]) -> None:
    reference = ROOT / ".ci" / "reference" / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist"
    needed((reference / "index.js").exists(), "the reference server is not installed (.ci/run installs it with npm)")
    run(tmp_path, "import", str(official_file(tmp_path)), str(fork_files(tmp_path)))
    exported = tmp_path / "exported.jsonl"
    run(tmp_path, "export", "--output", str(exported))
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_graph", "arguments": {}}},
    ]
    result = subprocess.run(
        ["node", str(reference / "index.js")],
        input="".join(json.dumps(r) + "\n" for r in requests),
        env={**os.environ, "MEMORY_FILE_PATH": str(exported)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    answers = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    graph = next(a for a in answers if a.get("id") == 2)["result"]["structuredContent"]
    assert {e["name"] for e in graph["entities"]} == {"Alice", "Acme", "Bob", "Carol", "PORT_IN_USE"}
    assert len(graph["relations"]) == 2


def test_version_and_help(tmp_path: Path) -> None:
    assert run_process(tmp_path, "--version").stdout.startswith("memory-graph ")
    helped = run_process(tmp_path, "--help").stdout
    assert all(command in helped for command in ("serve", "import", "export", "stats", "check", "repair"))


# -- issue 7's defects -----------------------------------------------------------------------------------------
def test_import_of_two_files_naming_one_entity_keeps_every_observation_once(
    tmp_path: Path, run: Callable[..., Ran]
) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    alice = {"type": "entity", "name": "Alice", "entityType": "person"}
    first.write_text(json.dumps({**alice, "observations": ["likes tea", "likes tea"]}) + "\n", encoding="utf-8")
    second.write_text(json.dumps({**alice, "observations": ["likes tea", "lives in Lisbon"]}) + "\n", encoding="utf-8")
    assert run(tmp_path, "import", str(first), str(second)).returncode == 0
    assert run(tmp_path, "import", str(second)).returncode == 0  # again: nothing new
    records = [json.loads(line) for line in run(tmp_path, "export").stdout.splitlines()]
    assert records == [{**alice, "observations": ["likes tea", "lives in Lisbon"]}]


def test_a_deeply_nested_line_is_checked_and_repaired_by_the_same_parser(
    tmp_path: Path, run: Callable[..., Ran]
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    good = json.dumps({"type": "entity", "name": "Alice", "entityType": "person", "observations": []})
    nested = "[" * 100_000 + "]" * 100_000
    (store / "memory.json").write_text(f"{good}\n{nested}\n", encoding="utf-8")
    checked = run(tmp_path, "check")
    assert checked.returncode == 1 and f"{store / 'memory.json'}:2: JSON nested too deeply" in checked.stdout
    repaired = run(tmp_path, "repair")
    assert repaired.returncode == 0 and "moved 1 line(s)" in repaired.stdout, repaired.stderr
    assert run(tmp_path, "check").stdout.strip() == "ok"
    assert nested in next(store.glob("memory.json.rejected-*")).read_text(encoding="utf-8")
    assert [json.loads(line)["name"] for line in run(tmp_path, "export").stdout.splitlines()] == ["Alice"]


def test_repair_waits_for_the_store_lock_and_says_so_when_it_cannot_have_it(tmp_path: Path) -> None:
    """Repair is a store operation: it takes the store's own lock (a held lock is a clear error, not a
    traceback), and renews the stamp so a running server sees the repair at its next call."""
    folder = tmp_path / "store"
    running = open_services(folder)
    running.graph.create_entities([Entity(name="Alice", entityType="person", observations=["x"])])
    shard = folder / "memory.json"
    shard.write_bytes(shard.read_bytes() + b"not json\n")
    repairer = Store({"memory": shard, "lesson": folder / "lesson.json"}, lock_timeout_seconds=0.2)
    held = os.open(folder, os.O_RDONLY)  # another process's lock: flock on the data folder, as the store takes it
    fcntl.flock(held, fcntl.LOCK_EX)
    with pytest.raises(StorageError, match="held the lock"):
        repairer.check(fix=True)
    os.close(held)
    assert repairer.check(fix=True).ok
    running.store.poll()
    assert running.store.problems() == []
    running.graph.add_observations([ObservationAddition(entityName="Alice", contents=["y"])])  # writable again


# -- and the smaller things seen with them ---------------------------------------------------------------------
@pytest.mark.parametrize("port", ["0", "99999", "http"])
def test_a_port_out_of_range_is_refused_by_name(tmp_path: Path, port: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--transport", "http", "--port", port])
    assert exited.value.code == 2 and "1 to 65535" in capsys.readouterr().err


def test_import_says_which_lines_it_could_not_read_and_exits_1(tmp_path: Path, run: Callable[..., Ran]) -> None:
    source = tmp_path / "old.jsonl"
    source.write_text('{"type":"entity","name":"A","entityType":"x","observations":[]}\n{oops\n', encoding="utf-8")
    result = run(tmp_path, "import", str(source))
    assert result.returncode == 1 and "imported 1 entities" in result.stdout
    assert f"{source}:2: not valid JSON" in result.stderr


def test_import_names_the_line_of_a_lesson_the_lesson_rule_refuses(tmp_path: Path, run: Callable[..., Ran]) -> None:
    source = tmp_path / "old.jsonl"
    lesson = {"type": "entity", "name": "L", "entityType": "lesson", "observations": []}
    lesson |= {"errorPattern": {"type": "build", "message": "make: *** No rule"}, "metadata": {"frequency": -4}}
    entity = {"type": "entity", "name": "A", "entityType": "x", "observations": []}
    source.write_text(f"{json.dumps(entity)}\n{json.dumps(lesson)}\n", encoding="utf-8")
    result = run(tmp_path, "import", str(source))
    assert result.returncode == 1 and "imported 1 entities" in result.stdout
    assert f"{source}:2: lesson 'L': metadata.frequency" in result.stderr


def test_import_of_a_json_document_broken_by_hand_names_the_one_place(tmp_path: Path, run: Callable[..., Ran]) -> None:
    entities = [{"name": f"E{i}", "entityType": "x", "observations": [f"fact {i}"]} for i in range(20)]
    text = json.dumps({"entities": entities, "relations": []}, indent=2)
    lines = text.splitlines()
    lines[26] = "oops " + lines[26]
    source = tmp_path / "export.json"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run(tmp_path, "import", str(source))
    assert result.returncode == 1 and "1 record(s) could not be read" in result.stderr
    assert f"{source}: 27:" in result.stderr and "one JSON document" in result.stderr


def test_export_refuses_the_stores_own_files_and_a_missing_folder(tmp_path: Path, run: Callable[..., Ran]) -> None:
    run(tmp_path, "import", str(official_file(tmp_path)))
    own = tmp_path / "store" / "memory.json"
    before = own.read_bytes()
    refused = run(tmp_path, "export", "--output", str(own))
    assert refused.returncode == 1 and "one of the store's own files" in refused.stderr
    assert own.read_bytes() == before
    missing = run(tmp_path, "export", "--output", str(tmp_path / "nowhere" / "out.jsonl"))
    assert missing.returncode == 1 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    # Another file (another store's memory, an earlier export) is replaced only when asked to.
    other = tmp_path / "other.jsonl"
    other.write_text("kept\n", encoding="utf-8")
    refused = run(tmp_path, "export", "--output", str(other))
    assert refused.returncode == 1 and "already exists" in refused.stderr and "--force" in refused.stderr
    assert other.read_text(encoding="utf-8") == "kept\n"
    assert run(tmp_path, "export", "--output", str(other), "--force").returncode == 0
    assert other.read_text(encoding="utf-8") != "kept\n"


def test_export_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    source = tmp_path / "big.jsonl"
    source.write_text(
        "".join(
            json.dumps({"type": "entity", "name": f"E{i}", "entityType": "x", "observations": ["y" * 100]}) + "\n"
            for i in range(3000)
        ),
        encoding="utf-8",
    )
    assert run_process(tmp_path, "import", str(source)).returncode == 0
    env = {**os.environ, "MEMORY_FILE_PATH": str(tmp_path / "store" / "memory.json"), "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        f"{sys.executable} -m memory_graph export | head -n 1",
        shell=True,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.stdout.startswith('{"type":"entity"') and "Traceback" not in result.stderr, result.stderr


def test_migrate_refuses_a_source_with_unreadable_lines_and_a_target_beside_it(
    tmp_path: Path, run: Callable[..., Ran]
) -> None:
    run(tmp_path, "import", str(official_file(tmp_path)))
    store = tmp_path / "store"
    # A target in the source's own folder would share its lesson.json.
    beside = run(tmp_path, "migrate", "--to", str(store / "backup.json"))
    assert beside.returncode == 1 and "lesson.json" in beside.stderr and "another folder" in beside.stderr
    assert not (store / "backup.json").exists()
    # A folder not made yet, written with its slash, is a folder.
    copied = run(tmp_path, "migrate", "--to", f"{tmp_path / 'backups' / '2025'}/")
    assert copied.returncode == 0, copied.stderr
    assert (tmp_path / "backups" / "2025" / "memory.json").is_file()
    # A line the store cannot read would be left behind by the copy, which would still match the counts it read.
    with (store / "memory.json").open("a", encoding="utf-8") as memory:
        memory.write('{"type":"entity","name":"Carol","entityType":\n')
    refused = run(tmp_path, "migrate", "--to", str(tmp_path / "elsewhere" / "memory.json"))
    assert refused.returncode == 1 and "cannot be read" in refused.stderr and "repair" in refused.stderr
    assert not (tmp_path / "elsewhere").exists()


def test_import_reports_text_that_is_not_utf8_and_skips_a_data_folders_history(
    tmp_path: Path, run: Callable[..., Ran]
) -> None:
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes(
        b'{"type":"entity","name":"Ana","entityType":"person","observations":["ok"]}\n'
        + '{"type":"entity","name":"José","entityType":"person","observations":["café"]}\n'.encode("latin-1")
    )
    imported = run(tmp_path, "import", str(latin1))
    assert imported.returncode == 1 and "latin1.jsonl:2: not UTF-8 text" in imported.stderr
    exported = run(tmp_path, "export").stdout
    assert '"Ana"' in exported and "\ufffd" not in exported  # nothing guessed, nothing stored with a U+FFFD
    # Another memory-graph folder: its memory comes, its change history and side caches are not read as records.
    other = tmp_path / "other"
    other.mkdir()
    (other / "memory.json").write_text(
        '{"type":"entity","name":"Bea","entityType":"person","observations":[]}\n', encoding="utf-8"
    )
    (other / "history.json").write_text('{"type":"event","id":"1","at":"2026-01-01T00:00:00.000Z"}\n', encoding="utf-8")
    (other / "lesson.signatures.jsonl").write_text('{"name":"X"}\n', encoding="utf-8")
    folder = run(tmp_path, "import", str(other))
    assert folder.returncode == 0, folder.stderr
    assert "from 1 file(s)" in folder.stdout and "imported 1 entities" in folder.stdout
