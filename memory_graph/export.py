"""Export formats: the official JSON Lines (which the official server reads), a JSON document, and drawings
(Mermaid, Graphviz dot). Pure functions over the records the graph service exports.
"""

from __future__ import annotations

import json
from typing import Any

from memory_graph.errors import InvalidInputError
from memory_graph.graph import ExportedGraph
from memory_graph.model import entity_view

FORMATS = ("jsonl", "json", "mermaid", "dot")


def render(graph: ExportedGraph, fmt: str) -> str:
    if fmt == "jsonl":
        # The official format: entity lines, then relation lines; lessons are entities with extra fields,
        # which the official server ignores.
        records = [*graph.entities, *graph.lessons, *graph.relations]
        return "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)
    if fmt == "json":
        document = {
            "entities": [entity_view(e) for e in graph.entities],
            "lessons": [_without_type(r) for r in graph.lessons],
            "relations": [_without_type(r) for r in graph.relations],
        }
        return json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    if fmt in ("mermaid", "dot"):
        return _drawing(fmt, graph.entities, graph.lessons, graph.relations)
    raise InvalidInputError(f"unknown export format {fmt!r}; use {', '.join(FORMATS)}")


def _without_type(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "type"}


def _drawing(fmt: str, entities: list[dict], lessons: list[dict], relations: list[dict]) -> str:
    ids: dict[str, str] = {}
    for number, record in enumerate([*entities, *lessons]):
        ids[record["name"]] = f"n{number}"
    lesson_names = {r["name"] for r in lessons}
    lines: list[str] = []
    if fmt == "mermaid":

        def label(text: str) -> str:
            return text.replace('"', "#quot;").replace("\n", " ")

        lines.append("graph LR")
        for record in [*entities, *lessons]:
            node = ids[record["name"]]
            text = label(f"{record['name']} ({record['entityType']})")
            lines.append(f'  {node}{{{{"{text}"}}}}' if record["name"] in lesson_names else f'  {node}["{text}"]')
        for relation in relations:
            source, target = ids.get(relation["from"]), ids.get(relation["to"])
            if source and target:
                lines.append(f'  {source} -->|"{label(relation["relationType"])}"| {target}')
        lines.append("  classDef lesson fill:#fff3cd,stroke:#b58900,color:#333")
        if lesson_names:
            lines.append(f"  class {','.join(ids[n] for n in sorted(lesson_names))} lesson")
        return "\n".join(lines) + "\n"

    def quote(text: str) -> str:
        return json.dumps(text, ensure_ascii=False)

    lines.append("digraph memory {")
    lines.append("  rankdir=LR;")
    lines.append('  node [shape=box, style="rounded"];')
    for record in entities:
        lines.append(f"  {ids[record['name']]} [label={quote(record['name'] + chr(10) + record['entityType'])}];")
    for record in lessons:
        lines.append(
            f'  {ids[record["name"]]} [label={quote(record["name"])}, shape=note, style=filled, fillcolor="#fff3cd"];'
        )
    for relation in relations:
        source, target = ids.get(relation["from"]), ids.get(relation["to"])
        if source and target:
            lines.append(f"  {source} -> {target} [label={quote(relation['relationType'])}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
