"""Lesson retrieval quality, in process: top-1, MRR and score margins on an errors-*.json corpus.

    .venv/bin/python bench/lessons_quality.py ../shared/data/errors-dev.json [-v]

The same corpus format as ../shared/tools/lessons_eval.py (which drives the server over stdio); this one also
prints how far the right lesson's score sits above the best wrong one and above the cut-off thresholds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lessons.model import ErrorQuery, LessonInput  # noqa: E402
from lessons.ranking import FIND_THRESHOLD, RECOMMEND_THRESHOLD  # noqa: E402
from memory_graph.app import services_for_folder  # noqa: E402


def evaluate(corpus: dict, verbose: bool = False) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        lessons = services_for_folder(Path(folder)).lessons
        for lesson in corpus["lessons"]:
            lessons.create_lesson(LessonInput.model_validate(lesson))
        find_ranks: list[int | None] = []
        rec_ranks: list[int | None] = []
        margins: list[float] = []
        right_scores: list[float] = []
        for query in corpus["queries"]:
            found = lessons.find_similar_errors(ErrorQuery.model_validate(query["errorPattern"]), limit=50)
            names = [m.name for m in found.matches]
            find_ranks.append(names.index(query["expected"]) + 1 if query["expected"] in names else None)
            recs = lessons.get_lesson_recommendations(query["log"], limit=50)
            rnames = [r.name for r in recs.recommendations]
            rec_ranks.append(rnames.index(query["expected"]) + 1 if query["expected"] in rnames else None)
            scores = {m.name: m.score for m in found.matches}
            if query["expected"] in scores:
                right = scores.pop(query["expected"])
                right_scores.append(right)
                margins.append(right - max(scores.values(), default=FIND_THRESHOLD))
            if verbose and (find_ranks[-1] != 1 or rec_ranks[-1] != 1):
                print(f"miss {query['id']} {query['expected']}: find {names[:3]} rec {rnames[:3]}")

    def top1(ranks: list[int | None]) -> float:
        return sum(r == 1 for r in ranks) / len(ranks)

    def mrr(ranks: list[int | None]) -> float:
        return sum(1 / r for r in ranks if r) / len(ranks)

    return {
        "find_top1": top1(find_ranks),
        "find_mrr": mrr(find_ranks),
        "rec_top1": top1(rec_ranks),
        "rec_mrr": mrr(rec_ranks),
        "find_margin_median": statistics.median(margins) if margins else 0.0,
        "find_right_score_min": min(right_scores, default=0.0),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    corpus = json.loads(Path(args.corpus).read_text(encoding="utf-8"))
    result = evaluate(corpus, args.verbose)
    print(f"thresholds: find {FIND_THRESHOLD}, recommend {RECOMMEND_THRESHOLD}")
    for key, value in result.items():
        print(f"{key:24} {value:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
