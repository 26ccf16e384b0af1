"""Child processes for the reliability tests: `python -m tests.memory_graph.workers MODE ...`."""

from __future__ import annotations

import contextlib
import os
import random
import sys
import threading
from pathlib import Path

from memory_graph.app import build_services, services_for_folder
from memory_graph.config import Settings
from memory_graph.errors import MemoryGraphError
from memory_graph.graph import LESSONS, MEMORY, GraphService
from memory_graph.history import ObservationUpdate, replay_history
from memory_graph.model import Entity, ObservationAddition, ObservationDeletion, Relation
from tests.conftest import open_graph

NAMES = [f"E{i}" for i in range(24)]


def torture_ops(seed: int, count: int) -> list[tuple[str, list]]:
    """A deterministic mix of calls that each touch several shards (at 3 lines a shard)."""
    rng = random.Random(seed)
    ops: list[tuple[str, list]] = []
    for step in range(count):
        kind = rng.choice(
            ["create", "create", "observe", "relate", "delete", "forget", "unrelate", "update", "rename", "merge"]
        )
        picked = rng.sample(NAMES, rng.randint(2, 6))
        if kind == "create":
            ops.append(
                (
                    "create_entities",
                    [Entity(name=n, entityType="t", observations=[f"o{step}"]) for n in picked],
                )
            )
        elif kind == "observe":
            ops.append(
                (
                    "add_observations",
                    [ObservationAddition(entityName=n, contents=[f"s{step}"]) for n in picked],
                )
            )
        elif kind == "relate":
            pairs = zip(picked, reversed(picked), strict=True)
            relations = [Relation.model_validate({"from": a, "to": b, "relationType": "r"}) for a, b in pairs]
            ops.append(("relate", relations))
        elif kind == "delete":
            ops.append(("delete_entities", picked[:3]))
        elif kind == "update":
            updates = [ObservationUpdate(entityName=n, old=f"o{step - 1}", new=f"u{step}") for n in picked[:2]]
            ops.append(("update_observations", updates))
        elif kind == "rename":
            ops.append(("rename_entity", (picked[0], picked[1])))
        elif kind == "merge":
            ops.append(("merge_entities", (picked[:2], picked[2 % len(picked)])))
        elif kind == "forget":
            ops.append(
                (
                    "delete_observations",
                    [ObservationDeletion(entityName=n, observations=[f"s{step - 1}", f"o{step - 2}"]) for n in picked],
                )
            )
        else:
            pairs = zip(picked, reversed(picked), strict=True)
            ops.append(
                (
                    "delete_relations",
                    [Relation.model_validate({"from": a, "to": b, "relationType": "r"}) for a, b in pairs],
                )
            )
    return ops


def apply(graph: GraphService, name: str, argument: list) -> None:
    if name == "relate":
        existing = {e.name for e in graph.open_nodes([r.from_ for r in argument] + [r.to for r in argument]).entities}
        argument = [r for r in argument if r.from_ in existing and r.to in existing]
        name = "create_relations"
    with contextlib.suppress(MemoryGraphError):  # a refused call is part of the sequence: it must change nothing
        if isinstance(argument, tuple):
            getattr(graph, name)(*argument)
        else:
            getattr(graph, name)(argument)


def replayed(graph: GraphService) -> tuple:
    """The snapshot that replaying the whole history from empty gives (it must equal the graph's)."""
    records = replay_history(graph.store)[MEMORY] | replay_history(graph.store)[LESSONS]
    entities = [r for r in records.values() if r["type"] == "entity"]
    relations = [r for r in records.values() if r["type"] == "relation"]
    return (
        tuple(sorted((e["name"], e["entityType"], tuple(e["observations"])) for e in entities)),
        tuple(sorted((r["from"], r["to"], r["relationType"]) for r in relations)),
    )


def snapshot(graph: GraphService) -> tuple:
    result = graph.read_graph()
    return (
        tuple(sorted((e.name, e.entityType, tuple(e.observations)) for e in result.entities)),
        tuple(sorted((r.from_, r.to, r.relationType) for r in result.relations)),
    )


def worker_graph(folder: str, shard_lines: int = 3) -> GraphService:
    """The graph of the folder's memory, or of MEMORY_DATABASE_URL's database when the parent test set it."""
    url = os.environ.get("MEMORY_DATABASE_URL")
    if not url:
        return open_graph(Path(folder), shard_lines=shard_lines)
    services = services_for_folder(Path(folder), shard_lines, database_url=url)
    services.store.open()
    return services.graph


def torture(folder: str, start: int, seed: int, count: int) -> None:
    graph = worker_graph(folder)
    ops = torture_ops(seed, count)
    print("ready", flush=True)
    for index in range(start, count):
        apply(graph, *ops[index])
        print(f"ack {index}", flush=True)


def concurrent(folder: str, worker: int, writes: int, threads: int) -> None:
    graph = worker_graph(folder, shard_lines=7)

    def run(thread: int) -> None:
        for i in range(thread, writes, threads):
            tag = f"w{worker}-{i}"
            graph.create_entities([Entity(name=tag, entityType="write", observations=[tag])])
            graph.add_observations([ObservationAddition(entityName="shared", contents=[tag])])

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    print("done", flush=True)


def project_writes(folder: str, project: str, worker: int, writes: int) -> None:
    """In one project of the folder's memory (or of MEMORY_DATABASE_URL's database), create an entity per step
    and count an attempt on the lesson every project shares."""
    from lessons.model import SuccessReport

    settings = Settings(
        memory_file=Path(folder) / "memory.json",
        lesson_file=Path(folder) / "lesson.json",
        database_url=os.environ.get("MEMORY_DATABASE_URL") or None,
    ).for_project(project)
    services = build_services(settings)
    for i in range(writes):
        tag = f"w{worker}-{i}"
        services.graph.create_entities([Entity(name=tag, entityType="write", observations=[project])])
        services.lessons.update_lesson_success(SuccessReport(lessonName="PORT_IN_USE", success=True))
    print("done", flush=True)


def shared_lesson(folder: str, memory: str, start: int, count: int) -> None:
    """Through memory `memory` (sharing `lesson.json` with others), add step i's tag to the shared lesson and to
    this memory's note in one call: one commit across both files."""
    services = build_services(Settings(memory_file=Path(folder) / memory, lesson_file=Path(folder) / "lesson.json"))
    print("ready", flush=True)
    for index in range(start, count):
        tag = f"{memory}:{index}"
        services.graph.add_observations(
            [
                ObservationAddition(entityName="SHARED", contents=[tag]),
                ObservationAddition(entityName=f"{memory}-note", contents=[tag]),
            ]
        )
        print(f"ack {index}", flush=True)


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "torture":
        torture(args[0], int(args[1]), int(args[2]), int(args[3]))
    elif mode == "shared":
        shared_lesson(args[0], args[1], int(args[2]), int(args[3]))
    elif mode == "projects":
        project_writes(args[0], args[1], int(args[2]), int(args[3]))
    elif mode == "concurrent":
        concurrent(args[0], int(args[1]), int(args[2]), int(args[3]))
    else:
        raise SystemExit(f"unknown mode {mode}")
