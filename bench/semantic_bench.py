"""search_nodes latency with and without the semantic extra, at a given size, in one run.

    .venv/bin/python bench/semantic_bench.py --size 10000 --queries 200

The recall corpus's entities (../shared/data/recall-dev.json) are stored, then padded with generated entities up to
`--size` (names and observations made from the corpus's own words, so the vocabulary stays realistic). Both
configurations answer the corpus's queries in turn; the semantic one first embeds every entity (timed separately:
that happens in the background when entities change, not during a search).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory_graph.app import build_services  # noqa: E402
from memory_graph.config import Settings  # noqa: E402
from memory_graph.model import Entity  # noqa: E402

CORPUS = ROOT.parent / "shared" / "data" / "recall-dev.json"


def entities(size: int) -> list[Entity]:
    corpus = json.loads(CORPUS.read_text(encoding="utf-8"))
    real = [Entity(**e) for e in corpus["entities"]]
    words = sorted({w for e in real for o in e.observations for w in o.split()})
    rng = random.Random(size)
    padding = [
        Entity(
            name=f"{rng.choice(words)} {rng.choice(words)} {i}",
            entityType=rng.choice(["person", "project", "place", "note"]),
            observations=[" ".join(rng.choices(words, k=9)) for _ in range(3)],
        )
        for i in range(max(0, size - len(real)))
    ]
    return real + padding


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    queries = [q["query"] for q in json.loads(CORPUS.read_text(encoding="utf-8"))["queries"]][: args.queries]
    stored = entities(args.size)
    with tempfile.TemporaryDirectory() as folder:
        results: dict[str, list[float]] = {}
        for mode in ("off", "on"):
            env = {"MEMORY_FILE_PATH": str(Path(folder) / mode / "memory.json"), "MEMORY_SEMANTIC": mode}
            services = build_services(Settings.from_env(env))
            for start in range(0, len(stored), 2000):
                services.graph.create_entities(stored[start : start + 2000])
            services.graph.warm_up()
            if services.graph.semantic is not None:
                started = time.perf_counter()
                services.graph.semantic.catch_up()  # loads the model and embeds every entity
                print(f"semantic: model load and {len(stored)} embeddings in {time.perf_counter() - started:.1f} s")
            times = []
            for query in queries:
                started = time.perf_counter()
                services.graph.search_nodes(query)
                times.append((time.perf_counter() - started) * 1000)
            results[mode] = times
        print(f"\n{len(stored)} entities, {len(queries)} queries, search_nodes in process (ms)")
        print(f"{'semantic':10}{'p50':>10}{'p95':>10}")
        for mode, times in results.items():
            ordered = sorted(times)
            p95 = ordered[int(0.95 * (len(ordered) - 1))]
            print(f"{mode:10}{statistics.median(times):>10.2f}{p95:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
