"""Every lesson-retrieval bar of issue 8 in one run, with the shared evaluator driving the server over stdio.

    .venv/bin/python bench/lessons_bars.py [--jobs 2] [-v]

Runs ../shared/tools/lessons_eval.py for each condition (two at a time by default) and prints one table:
top-1 of find_similar_errors and get_lesson_recommendations, or the false-positive rates on negatives.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
EVAL = ROOT.parent / "shared" / "tools" / "lessons_eval.py"
LESSONS = DATA / "lessons"
DISTRACTORS = ["--also", str(LESSONS / "distractors-dev.json")]

# name -> (arguments, bar for find, bar for recommendations; for negatives the most false positives allowed)
CONDITIONS: dict[str, tuple[list[str], float, float]] = {
    "errors-dev": ([str(DATA / "errors-dev.json")], 0.99, 0.97),
    "+ distractors": ([str(DATA / "errors-dev.json"), *DISTRACTORS], 0.97, 0.95),
    "authored A+B + distractors": (
        [str(LESSONS / "errors-dev-authored.json"), *DISTRACTORS, "--accept-suffix", "__B"],
        0.92,
        0.92,
    ),
    "authored A + distractors": ([str(LESSONS / "errors-dev-authored-A.json"), *DISTRACTORS], 0.80, 0.80),
    "query types": ([str(LESSONS / "errors-dev-querytypes.json")], 0.98, 0.98),
    "negatives (26 lessons)": (
        [str(DATA / "errors-dev.json"), "--queries", str(LESSONS / "negatives-dev.json")],
        0.10,
        0.10,
    ),
    "negatives (+ distractors)": (
        [str(DATA / "errors-dev.json"), *DISTRACTORS, "--queries", str(LESSONS / "negatives-dev.json")],
        0.10,
        0.10,
    ),
}
SUMMARY = re.compile(r"find_similar_errors top1 ([\d.]+).*get_lesson_recommendations top1 ([\d.]+)")


def run(name: str, arguments: list[str], verbose: bool) -> tuple[str, str]:
    command = [sys.executable, str(EVAL), *arguments, "--server", f"{sys.executable} -m memory_graph"]
    done = subprocess.run(command + (["-v"] if verbose else []), capture_output=True, text=True, timeout=1800)
    return name, done.stdout + done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", help="comma list of condition names to run")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every miss")
    args = parser.parse_args()
    chosen = {k: v for k, v in CONDITIONS.items() if not args.only or k in args.only.split(",")}
    with ThreadPoolExecutor(args.jobs) as pool:
        outputs = dict(pool.map(lambda item: run(item[0], item[1][0], args.verbose), chosen.items()))
    print(f"{'condition':30}{'find':>10}{'rec':>10}   bars")
    for name, (_, find_bar, rec_bar) in chosen.items():
        out = outputs[name]
        if args.verbose:
            print(out)
        if name.startswith("negatives"):
            rates = re.search(r"false positives find ([\d.]+), rec ([\d.]+)", out)
            shown = [f"{float(r):.0%}" for r in rates.groups()] if rates else ["?", "?"]
            print(f"{name:30}{shown[0]:>10}{shown[-1]:>10}   <= {find_bar:.0%} / {rec_bar:.0%}")
            continue
        found = SUMMARY.search(out)
        find, rec = (found.group(1), found.group(2)) if found else ("?", "?")
        print(f"{name:30}{find:>10}{rec:>10}   >= {find_bar} / {rec_bar}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
