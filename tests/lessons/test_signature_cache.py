"""The lesson signature cache: a start with many lessons reuses the signatures of unchanged lessons, and a stale,
damaged or foreign cache is never trusted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lessons.model import ErrorQuery, LessonInput, SuccessReport
from lessons.ranking import index_record, lesson_from_cache, lesson_to_cache, signature_version
from memory_graph.app import services_for_folder
from tests.conftest import SHARED, needed

CORPUS = SHARED / "data" / "errors-dev.json"


@pytest.fixture(scope="module")
def corpus() -> dict:
    needed(CORPUS.exists(), f"the dev corpus is not at {CORPUS}")
    return json.loads(CORPUS.read_text(encoding="utf-8"))


def test_a_cached_signature_is_the_computed_one(corpus: dict) -> None:
    for lesson in corpus["lessons"]:
        indexed = index_record(lesson)
        assert lesson_from_cache(lesson["name"], json.loads(json.dumps(lesson_to_cache(indexed)))) == indexed


def answers(folder: Path, corpus: dict) -> list[list[str]]:
    services = services_for_folder(folder)
    return [
        [m.name for m in services.lessons.find_similar_errors(ErrorQuery.model_validate(q["errorPattern"])).matches]
        for q in corpus["queries"][:40]
    ]


def test_a_restart_reuses_unchanged_signatures_and_recomputes_changed_ones(tmp_path: Path, corpus: dict) -> None:
    services = services_for_folder(tmp_path)
    for lesson in corpus["lessons"]:
        services.lessons.create_lesson(LessonInput.model_validate(lesson))
    services.lessons.save_signatures()  # created one at a time: not saved until asked (or a later load)
    cache = tmp_path / "lesson.signatures.jsonl"
    header, *entries = cache.read_text(encoding="utf-8").splitlines()
    assert json.loads(header)["tag"] == signature_version() and len(entries) == len(corpus["lessons"])
    fresh = answers(tmp_path, corpus)

    reopened = services_for_folder(tmp_path)
    reopened.store.open()
    assert reopened.lessons.index.made == {}  # every signature came from the cache
    name = corpus["lessons"][0]["name"]
    reopened.lessons.update_lesson_success(SuccessReport(lessonName=name, success=True))
    assert reopened.lessons.index.made == {}  # success counts are not part of a signature
    assert answers(tmp_path, corpus) == fresh

    shard = tmp_path / "lesson.json"
    lines = shard.read_text(encoding="utf-8").splitlines()
    edited = json.loads(lines[0])
    edited["errorPattern"]["message"] = "fatal: a message edited by hand"
    shard.write_text("\n".join([json.dumps(edited), *lines[1:]]) + "\n", encoding="utf-8")
    after_edit = services_for_folder(tmp_path)
    after_edit.store.open()
    assert set(after_edit.lessons.index.made) == {edited["name"]}  # only the edited lesson is computed again
    assert after_edit.lessons.index.lessons[edited["name"]] == index_record(edited)


@pytest.mark.parametrize("damage", ["garbage", "other-version", "bad-entry"])
def test_a_damaged_or_foreign_cache_is_ignored(tmp_path: Path, corpus: dict, damage: str) -> None:
    services = services_for_folder(tmp_path)
    for lesson in corpus["lessons"][:5]:
        services.lessons.create_lesson(LessonInput.model_validate(lesson))
    services.lessons.save_signatures()
    cache = tmp_path / "lesson.signatures.jsonl"
    header, *entries = cache.read_text(encoding="utf-8").splitlines()
    if damage == "garbage":
        cache.write_bytes(b"\xff\x00 not json")
    elif damage == "other-version":
        cache.write_text("\n".join([json.dumps({"tag": "older code"}), *entries]) + "\n", encoding="utf-8")
    else:
        broken = json.loads(entries[0])
        broken["value"] = {"type": 1}
        cache.write_text("\n".join([header, json.dumps(broken), *entries[1:]]) + "\n", encoding="utf-8")
    reopened = services_for_folder(tmp_path)
    reopened.store.open()
    for lesson in corpus["lessons"][:5]:
        assert reopened.lessons.index.lessons[lesson["name"]] == index_record(lesson)
