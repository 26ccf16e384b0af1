"""What a restart's restore of the start snapshot costs, in process: a memory of N entities (3 observations each)
and 2N relations is written in the official format and loaded once (timed: `load_s`, and the most the process
held meanwhile, `load_peak_mb`); its snapshot is saved (timed: `save_s` in all,
and `read_waited_s`, how long a read arriving 5 ms after the save began waited for the part made with the store
held; the RSS after that first load, after its warm-up builds the search index, and after the save, and the most
the process held while it saved, `save_peak_mb`); then the memory is taken again from that snapshot as the server
does after a full read (`hold_as_restored`: `held_as_restored_s`, and the RSS it leaves, `held_as_restored_rss_mb`).
A fresh process then restores the snapshot (timed: `store.open()`, what a restart does before its first answer)
and reports its RSS once the restore is done and the freed heap is handed back. Pass `--code` to measure another
checkout (a `git worktree`) alternately in the same run.

    .venv/bin/python bench/restore_bench.py --entities 100000 --runs 3
    .venv/bin/python bench/restore_bench.py --entities 100000 --runs 3 --code /path/to/other/worktree
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import alternate


def services(folder: Path) -> Any:
    from memory_graph.app import build_services
    from memory_graph.config import Settings

    os.environ.update(MEMORY_FILE_PATH=str(folder / "memory.json"), XDG_CACHE_HOME=str(folder / "cache"))
    return build_services(Settings.from_env())


def restore(folder: Path) -> dict[str, float]:
    built = services(folder)
    started = time.perf_counter()
    built.store.open()
    seconds = time.perf_counter() - started
    assert built.store.restored_from_snapshot, "the snapshot was not restored"
    return {"restore_s": seconds, "rss_mb": settled_rss_mb()}


def settled_rss_mb() -> float:
    """RSS once the freed heap is handed back, as storage.return_freed_memory does after a load (importing the
    server would add the MCP SDK to the RSS)."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    sys.path.insert(0, str(Path(__file__).parent))
    from startup_bench import megabytes, rss_kb

    return megabytes(rss_kb(os.getpid()))


def reset_peak_rss() -> None:
    """Start /proc's high-water mark (VmHWM) again from the present RSS (Linux 4.0+: `clear_refs` 5)."""
    Path("/proc/self/clear_refs").write_text("5")


def peak_rss_mb() -> float:
    sys.path.insert(0, str(Path(__file__).parent))
    from startup_bench import megabytes, rss_kb

    return megabytes(rss_kb(os.getpid(), "VmHWM"))


def measure(entities: int) -> dict[str, float]:
    sys.path.insert(0, str(Path(__file__).parent))
    from startup_bench import write_memory

    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        write_memory(folder / "memory.json", entities)
        first = services(folder)
        reset_peak_rss()
        began = time.perf_counter()
        first.store.open()
        load_s = time.perf_counter() - began
        load_peak = peak_rss_mb()
        loaded = settled_rss_mb()
        first.graph.warm_up()
        warmed = settled_rss_mb()
        reset_peak_rss()
        # A read arriving just after the save began waits for the part made with the store held.
        outcome: list[bool] = []
        timings: list[float] = []
        saved_event, measured = threading.Event(), threading.Event()

        def save_then_hold_as_restored() -> None:
            # One thread for both, as the server's load thread does them: glibc gives each thread its own heap,
            # and what one thread's heap keeps is not handed back by another's frees.
            outcome.append(first.store.save_snapshot())
            saved_event.set()
            measured.wait()
            began = time.perf_counter()
            outcome.append(first.store.hold_as_restored())
            timings.append(time.perf_counter() - began)

        saving = threading.Thread(target=save_then_hold_as_restored)
        started = time.perf_counter()
        saving.start()
        time.sleep(0.005)
        arrived = time.perf_counter()
        with first.store.reading():
            waited = time.perf_counter() - arrived
        saved_event.wait()
        saved = time.perf_counter() - started
        save_peak = peak_rss_mb()
        assert outcome == [True], "the snapshot was not saved"
        size = sum(p.stat().st_size for p in (folder / "cache").rglob("*.bin")) / 1e6
        saved_rss = settled_rss_mb()
        measured.set()
        saving.join()
        assert outcome == [True, True], "the memory was not taken again from its snapshot"
        held_s = timings[0]
        held_rss = settled_rss_mb()
        first.store.close()
        command = [sys.executable, __file__, "--restore", str(folder)]
        done = subprocess.run(command, capture_output=True, text=True, check=True, env=os.environ)
        restored = json.loads(done.stdout.strip().splitlines()[-1])
        first_load = {
            "load_s": load_s,
            "load_peak_mb": load_peak,
            "first_load_rss_mb": loaded,
            "warmed_rss_mb": warmed,
            "save_peak_mb": save_peak,
            "saved_rss_mb": saved_rss,
            "held_as_restored_s": held_s,
            "held_as_restored_rss_mb": held_rss,
        }
        return {**first_load, "read_waited_s": waited, "save_s": saved, "snapshot_mb": size, **restored}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--restore", help=argparse.SUPPRESS)
    alternate.add_arguments(parser)
    args = parser.parse_args()
    if args.restore:
        print(json.dumps(restore(Path(args.restore))))
        return
    if args.child:
        print(json.dumps(measure(args.entities)))
        return
    for label, runs in alternate.run_alternately(__file__, ["--entities", str(args.entities)], args).items():
        figures = {key: [run[key] for run in runs] for key in runs[0]}
        shown = "; ".join(
            f"{key} {statistics.median(values):.2f} ({', '.join(f'{v:.2f}' for v in values)})"
            for key, values in figures.items()
        )
        print(f"{label}: {shown}")


if __name__ == "__main__":
    main()
