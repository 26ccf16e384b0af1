"""LessonService: create_lesson, find_similar_errors, update_lesson_success, get_lesson_recommendations.

Lessons are stored in the `lesson` collection of the same store as the graph (same locking, journal and
caching), and are graph entities too: GraphService sees them through the same change notifications. The
service keeps its own copy of the lesson records and asks the graph only one thing, through `EntityTypes`:
whether a name is taken.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from lessons.model import (
    MAX_ALIAS_CHARS,
    MAX_ALIASES,
    MAX_LOG_CHARS,
    CreatedLesson,
    ErrorQuery,
    Lesson,
    LessonChanges,
    LessonInput,
    LessonMatch,
    Recommendation,
    Recommendations,
    SimilarErrors,
    SuccessReport,
    UpdatedLesson,
    complete_metadata,
    iso,
    lesson_of,
    stored_counts,
    stored_lesson_problem,
    utc_now,
)
from lessons.ranking import (
    FIND_CONFIDENCE,
    FIND_MIN_CONFIDENCE,
    FIND_THRESHOLD,
    RECENCY_DECAY,
    RECOMMEND_CONFIDENCE,
    RECOMMEND_MIN_CONFIDENCE,
    RECOMMEND_THRESHOLD,
    IndexedLesson,
    LessonIndex,
    Query,
    best_first,
    clues,
    combined_score,
    confident,
    error_windows,
    query_of,
    share_of_query,
    signature_version,
    success_statistic,
    type_key,
)
from lessons.signature import evidence_words, shape
from memory_graph.errors import ConflictError, InvalidInputError, MemoryGraphError, NotFoundError
from memory_graph.graph import LESSONS, ImportSummary
from memory_graph.model import ENVELOPE_CHARS, json_size
from memory_graph.search import closest_name
from memory_graph.storage import (
    Key,
    StoreEngine,
    Taken,
    code_tag,
    merge_records,
    read_side_cache,
    write_side_cache,
)

log = logging.getLogger(__name__)
MAX_CONTEXT_CHARS = MAX_LOG_CHARS
Answer = TypeVar("Answer", SimilarErrors, Recommendations)
MAX_SIGNATURE_CHARS = 1_000  # of the query's shape a find answer shows (it echoed a pasted log whole)
SAVE_NOW_SIGNATURES = 200
SUGGEST_CUTOFF = 80  # WRatio score of a "did you mean" lesson name
CONTEXT_WEIGHT = 0.05  # find_similar_errors: share of the score from the query's context and stack trace
LOG_COVERAGE_WEIGHT = 0.2  # recommendations: share from the lesson message's words found anywhere in the log
# A scored recommendation: (score, relevance, success statistic, name, matched line, the query of that line, which
# the clues read as a message).
Ranked = tuple[float, float, float, str, str, Query | None]


ALIAS_WINDOW_SECONDS = 3_600.0  # an outcome reported later than this after the lookup teaches no wording
JOURNAL_SIZE = 256


class LookupJournal:
    """Which lessons this process's recent lookups showed, and for which wording of the error: an outcome reported
    for one of them (update_lesson_success) teaches the lesson that wording."""

    def __init__(self) -> None:
        self._shown: deque[tuple[float, str, tuple[str, ...]]] = deque(maxlen=JOURNAL_SIZE)
        self._lock = threading.Lock()

    def shown(self, wording: str, names: Sequence[str]) -> None:
        if names and wording.strip():
            with self._lock:
                self._shown.append((time.monotonic(), wording[:MAX_ALIAS_CHARS], tuple(names)))

    def forget(self, name: str) -> None:
        with self._lock:
            kept = [entry for entry in self._shown if name not in entry[2]]
            self._shown.clear()
            self._shown.extend(kept)

    def wording_for(self, name: str) -> str | None:
        """The wording of the newest recent lookup that showed the lesson."""
        now = time.monotonic()
        with self._lock:
            for moment, wording, names in reversed(self._shown):
                if now - moment > ALIAS_WINDOW_SECONDS:
                    return None
                if name in names:
                    return wording
        return None


def with_alias(record: dict[str, Any], wording: str) -> dict[str, Any]:
    """The record with one more wording of its error (unless its message or an alias already has that shape),
    keeping the newest MAX_ALIASES."""
    pattern = record.get("errorPattern") or {}
    known = [str(pattern.get("message") or ""), *(record.get("aliases") or [])]
    wording_shape = shape(wording)
    if any(shape(text) == wording_shape for text in known):
        return record
    return {**record, "aliases": [*(record.get("aliases") or []), wording][-MAX_ALIASES:]}


SEVERITIES = ("low", "medium", "high", "critical")


def merge_twin(current: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A lesson with a twin's observations, verification steps and counts added, the higher of the two severities,
    the twin's environment keys it lacks, and the twin's name kept. The twin's context and stack trace come as a
    pair where the lesson has neither (a context beside another occurrence's stack trace would say what never
    happened); otherwise its context becomes an observation ("Also seen while ...") and its stack trace is left
    out (`merge_leaves_out`)."""
    meta = complete_metadata(current)
    added = new["metadata"]
    for key in ("frequency", "successCount", "recentSuccesses", "recentAttempts"):
        meta[key] += added[key]
    meta["severity"] = max(meta["severity"], added["severity"], key=SEVERITIES.index)
    meta["environment"] = {**added["environment"], **meta["environment"]}
    pattern = dict(current.get("errorPattern") or {})
    occurrence = {key: new["errorPattern"][key] for key in ("context", "stackTrace") if new["errorPattern"].get(key)}
    observations = [*(current.get("observations") or []), *new["observations"]]
    if not pattern.get("context") and not pattern.get("stackTrace"):
        pattern.update(occurrence)
    elif occurrence.get("context") and occurrence["context"] != pattern.get("context"):
        observations.append(f"Also seen while {occurrence['context']}")
    meta["successRate"] = meta["successCount"] / meta["frequency"] if meta["frequency"] else 0.0
    meta["updatedAt"] = utc_now()
    return {
        **current,
        "errorPattern": pattern,
        "observations": list(dict.fromkeys(observations)),
        "verificationSteps": merged_steps(current.get("verificationSteps") or [], new["verificationSteps"]),
        "metadata": meta,
        "mergedNames": list(dict.fromkeys([*(current.get("mergedNames") or []), new["name"]])),
    }


def merge_leaves_out(current: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What of a twin `merge_twin` does not keep, for the answer to say so."""
    pattern = current.get("errorPattern") or {}
    trace = new["errorPattern"].get("stackTrace")
    kept_own = bool(pattern.get("context") or pattern.get("stackTrace"))
    return (
        ["its stack trace: the lesson keeps its own"]
        if kept_own and trace and trace != pattern.get("stackTrace")
        else []
    )


def merged_steps(current: list[Any], new: list[dict[str, Any]]) -> list[Any]:
    """A lesson's verification steps with a twin's added: a step of a command the lesson already checks completes
    that step (its expected output where the lesson's has none, its success indicators added), else is appended."""
    steps = [dict(step) if isinstance(step, dict) else step for step in current]
    by_command = {step.get("command"): step for step in steps if isinstance(step, dict)}
    for step in new:
        same = by_command.get(step["command"])
        if same is None:
            steps.append(step)
            by_command[step["command"]] = step
            continue
        if not same.get("expectedOutput") and step.get("expectedOutput"):
            same["expectedOutput"] = step["expectedOutput"]
        indicators = [*(same.get("successIndicators") or []), *(step.get("successIndicators") or [])]
        if indicators:
            same["successIndicators"] = list(dict.fromkeys(indicators))
    return steps


def changed_lesson(record: dict[str, Any], changes: LessonChanges) -> dict[str, Any]:
    """The lesson with update_lesson's changes applied (its name, counts and creation time kept)."""
    updated = dict(record)
    if changes.errorPattern is not None:
        updated["errorPattern"] = changes.errorPattern.model_dump(exclude_none=True)
    if changes.observations is not None:
        updated["observations"] = list(dict.fromkeys(changes.observations))
    if changes.addObservations:
        updated["observations"] = list(dict.fromkeys([*(updated.get("observations") or []), *changes.addObservations]))
    if changes.verificationSteps is not None:
        updated["verificationSteps"] = [step.model_dump() for step in changes.verificationSteps]
    if changes.aliases is not None:
        updated["aliases"] = list(dict.fromkeys(changes.aliases))[-MAX_ALIASES:]
    meta = complete_metadata(record)
    if changes.severity is not None:
        meta["severity"] = changes.severity
    meta["updatedAt"] = utc_now()
    updated["metadata"] = meta
    return updated


class EntityTypes(Protocol):
    """What lessons need to know of the graph: whether a name is taken, and by what type of entity."""

    def entity_type(self, name: str) -> str | None: ...


def _shorten_texts(value: Any, cap: int) -> int:
    """Cut every text longer than `cap` in these answers' items (but names) to `cap` characters, the last an
    ellipsis; how many were cut."""
    cut = 0
    keys: Iterable[Any] = range(len(value)) if isinstance(value, list) else list(value)
    for key in keys:
        item = value[key]
        if isinstance(item, str) and len(item) > cap and key != "name":
            value[key] = item[: cap - 1] + "…"
            cut += 1
        elif isinstance(item, dict | list):
            cut += _shorten_texts(item, cap)
    return cut


def statistic_of(record: dict[str, Any]) -> float:
    _, _, recent_successes, recent_attempts = stored_counts(record.get("metadata") or {})
    return success_statistic(recent_successes, recent_attempts)


class LessonService:
    def __init__(
        self,
        store: StoreEngine,
        names: EntityTypes,
        project: str | None = None,
        signature_cache: Path | None = None,
        max_response_chars: int | None = None,
    ) -> None:
        self.store = store
        self.max_response_chars = max_response_chars  # the lookups' answers are cut to it (None: never)
        self.names = names
        # Signatures cost most of a start with many lessons (regexes over every text): they are kept in a side
        # cache and reused for every lesson whose fields are unchanged (ranking.fields_hash).
        self.signature_cache = signature_cache
        self._cache_read = False
        self._saving = threading.Lock()
        self.project = project  # recorded on the lessons written here; preferred at equal relevance
        self.records: dict[str, dict[str, Any]] = {}
        self.index = LessonIndex()
        self.lookups = LookupJournal()
        store.add_listener(self)

    # The start snapshot keeps the lesson records (the graph's own, shared in the file); the index is built from
    # them as from a load, its signatures read from the side cache.
    snapshot_name = "lessons"

    def snapshot_version(self) -> str:
        return code_tag([__file__])

    def snapshot_copy(self) -> Taken:
        # The map is copied (a write adds or drops a lesson in it); each record is shared: a change to a lesson
        # is a new dict (`changed_lesson`, `merge_twin`, `_with_outcome`), never one changed in place.
        return Taken(dict(self.records))

    def snapshot_state(self) -> dict[str, dict[str, Any]]:
        state: dict[str, dict[str, Any]] = self.snapshot_copy().snapshot_state()
        return state

    def hold_nothing(self) -> None:
        """Hold no lesson, as before a load (`StoreEngine.hold_as_restored`: the records come back from the snapshot,
        laid out together, or from the files when that fails). The signatures made or read so far are kept for them:
        at 10k lessons computing them again is seconds."""
        known = {**self.index.cached, **self.index.made}
        unsaved = dict(self.index.made)
        self.records = {}
        self.index = LessonIndex()
        self.index.cached, self.index.made = known, unsaved

    def restore_state(self, state: dict[str, dict[str, Any]]) -> None:
        if any(not isinstance(record, dict) for record in state.values()):
            raise ValueError("a lesson record is not an object")
        self.records_changed(LESSONS, [], list(state.values()))

    def records_changed(self, collection: str, removed: list[Key], upserted: list[dict[str, Any]]) -> None:
        if collection != LESSONS:
            return
        if not self._cache_read and self.signature_cache is not None:
            self._cache_read = True
            self.index.cached = read_side_cache(self.signature_cache, signature_version())
        made = len(self.index.made)
        for key in removed:
            if key[0] == "entity":
                self.records.pop(key[1], None)
                self.index.remove(key[1])
                self.lookups.forget(key[1])  # a lesson made later under this name is another lesson
        for record in upserted:
            if record.get("type") == "entity":
                self.records[record["name"]] = record
                self.index.put(record)
        # Saved when a batch computed many signatures (a start with a stale cache, an import): the cost is a few
        # percent of computing them. Lessons created one at a time are not saved at once: the next start computes
        # those few again and saves once they add up. (A timer thread writing later raced with folders being
        # removed, and a short-lived admin command exits before it fires.)
        if len(self.index.made) - made >= SAVE_NOW_SIGNATURES and self.signature_cache is not None:
            with self._saving:
                self._write_signatures(held=True)

    def save_signatures(self) -> None:
        """Write the signature cache now (`memory-graph` writes it when a load or import computed many)."""
        with self._saving:
            self._write_signatures(held=False)

    def _write_signatures(self, held: bool) -> None:
        """Write the signature cache (`held`: inside a store notification, where the store is already held)."""
        assert self.signature_cache is not None
        try:
            if held:
                entries = self.index.cache_entries()
            else:
                with self.store.reading():
                    entries = self.index.cache_entries()
            write_side_cache(self.signature_cache, signature_version(), entries)
        except (OSError, MemoryGraphError) as exc:
            log.warning("could not keep the lesson signatures in %s (%s)", self.signature_cache, exc)

    def _project_of(self, name: str) -> str | None:
        meta = self.records[name].get("metadata")
        project = meta.get("project") if isinstance(meta, dict) else None
        return project if isinstance(project, str) else None

    def _elsewhere(self, name: str) -> bool:
        """Whether a lesson came from another project (it ranks after this project's at equal relevance)."""
        return self.project is not None and self._project_of(name) != self.project

    def _unknown_lesson(self, name: str, other: str | None) -> NotFoundError:
        """Why `name` is no lesson, with a "did you mean": call it outside the store's lock (it reads a copy of
        the names), as the fuzzy match over every lesson name is the slow part."""
        if other is not None:
            return NotFoundError(
                f'"{name}" is an entity of type "{other}", not a lesson; lessons are made with create_lesson'
            )
        best = closest_name(name, list(self.index.lessons), SUGGEST_CUTOFF)
        hint = f' Did you mean "{best}"?' if best else " find_similar_errors finds lessons by their error."
        return NotFoundError(f'No lesson named "{name}".{hint}')

    # -- writes ------------------------------------------------------------------------------------------
    def create_lesson(self, lesson: LessonInput) -> CreatedLesson:
        observations = list(dict.fromkeys(lesson.observations))
        pattern = lesson.errorPattern.model_dump(exclude_none=True)
        steps = [step.model_dump() for step in lesson.verificationSteps]
        # Reading the error text costs time linear in it (a 1 MB message, a large part of a second): done here,
        # before the lock, rather than when the committed record reaches the index under it.
        record = self._new_record(lesson, observations, pattern, steps)
        prepared = self.index.prepare_record(record)
        # A merge into a twin is indexed ahead too (the twin's text and the new one's together).
        try:
            with self._indexed_ahead(self._twin_guess(prepared), lambda current: merge_twin(current, record)):
                return self._create(lesson, record, prepared)
        finally:
            self.index.forget_prepared(lesson.name)

    def _new_record(
        self, lesson: LessonInput, observations: list[str], pattern: dict[str, Any], steps: list[dict[str, Any]]
    ) -> dict[str, Any]:
        given = lesson.metadata
        now = utc_now()
        successes = given.success_count()
        rate = successes / given.frequency if given.frequency else 0.0
        return {
            "type": "entity",
            "name": lesson.name,
            "entityType": "lesson",
            "observations": observations,
            "errorPattern": pattern,
            "verificationSteps": steps,
            "metadata": {
                "severity": given.severity,
                "environment": given.environment.model_dump(exclude_none=True),
                "createdAt": iso(given.createdAt) or now,
                "updatedAt": iso(given.updatedAt) or iso(given.createdAt) or now,
                "frequency": given.frequency,
                "successCount": successes,
                "successRate": rate,
                "recentSuccesses": float(successes),
                "recentAttempts": float(given.frequency),
                **({"project": self.project} if self.project else {}),
            },
        }

    def _twin_of(self, prepared: IndexedLesson) -> str | None:
        """The stored lesson a new one (its signature) would duplicate. A twin from another project (or from none,
        for a project's server) stays apart: each project prefers its own lesson at equal relevance."""
        return next((n for n in self.index.twins(prepared) if self._project_of(n) == self.project), None)

    def _twin_guess(self, prepared: IndexedLesson) -> str | None:
        """`_twin_of` without the store held: a guess for `_index_ahead` (the index may change meanwhile)."""
        try:
            return self._twin_of(prepared)
        except (RuntimeError, KeyError):  # a set or dict changed size, or a lesson went, while it was read
            return None

    @contextmanager
    def _indexed_ahead(self, name: str | None, change: Callable[[dict[str, Any]], dict[str, Any]]) -> Iterator[None]:
        """For the call inside: index, before the store is held, what `change` will make of the lesson `name` as it
        stands (reading a lesson's text costs time linear in it, a second for a 200 KB message, and while the lock
        is held every other client waits), and forget it after. It is a guess from the records as they are now
        (another call may change them first): put() takes it only when the record committed has the same indexed
        fields, and otherwise indexes that record itself."""
        record = self.records.get(name) if name is not None else None
        prepared = record is not None and self.index.prepare_changed(record, change(record))
        try:
            yield
        finally:
            if prepared and name is not None:
                self.index.forget_prepared(name)

    def _create(self, lesson: LessonInput, record: dict[str, Any], prepared: IndexedLesson) -> CreatedLesson:
        with self.store.transaction() as tx:
            existing = self.names.entity_type(lesson.name)
            if existing is not None:
                raise ConflictError(
                    f'the name "{lesson.name}" is already used by an entity of type "{existing}"; '
                    "names are unique across entities and lessons. Choose another name, or delete_entities it first."
                )
            twin = self._twin_of(prepared)
            if twin is not None and lesson.name in (self.records[twin].get("mergedNames") or ()):
                # The same call again (a client retrying): merged once, counted once.
                return CreatedLesson(
                    **lesson_of(self.records[twin]).model_dump(),
                    merged=True,
                    note=f'"{lesson.name}" was already merged into "{twin}"; nothing changed.',
                )
            if twin is not None:
                # The same error signature is already a lesson: a second one would split its record of successes
                # and be found in its place half the time.
                holder = self._merged_into(lesson.name, anywhere=False)
                if holder is not None:
                    raise ConflictError(
                        f'"{lesson.name}" already stands for this project\'s lesson "{holder}" (a lesson of that name '
                        f'was merged into it), and this one is the same error as "{twin}": send it under another name, '
                        f'or update_lesson "{twin}" with what it adds'
                    )
                merged = merge_twin(self.records[twin], record)
                left_out = merge_leaves_out(self.records[twin], record)
                answer = CreatedLesson(
                    **lesson_of(merged).model_dump(),
                    merged=True,
                    note=f'"{twin}" already covers this error (the same message but for places and times); the new '
                    "observations, steps and counts were merged into it"
                    + (f" (not {', '.join(left_out)})" if left_out else "")
                    + f', and update_lesson_success and update_lesson accept "{lesson.name}" for it. Use update_lesson '
                    "to edit it.",
                )
                tx.upsert(LESSONS, merged)
                return answer
            created = CreatedLesson(**lesson_of(record).model_dump())
            tx.upsert(LESSONS, record)
        return created

    def update_lesson(self, changes: LessonChanges) -> Lesson:
        """Replace some of a lesson's fields, keeping its name, counts and creation time (every version stays in
        the history: get_history / restore_entity)."""
        if changes.changes_nothing():
            raise InvalidInputError(
                "nothing to change: send at least one of errorPattern, observations, addObservations, "
                "verificationSteps, severity, aliases"
            )
        with (
            self._indexed_ahead(changes.name, lambda record: changed_lesson(record, changes)),
            self.store.transaction() as tx,
        ):
            name = self._resolve(changes.name)
            record = self.records.get(name) if name is not None else None
            if record is not None and name is not None:
                if changes.errorPattern is not None or changes.aliases is not None:
                    # A lookup of the old error teaches the new pattern nothing, and aliases just set (or cleared)
                    # are not to be learned again from a lookup made before.
                    self.lookups.forget(name)
                updated = changed_lesson(record, changes)
                answer = lesson_of(updated)
                tx.upsert(LESSONS, updated)
                return answer
            other = self.names.entity_type(changes.name)
        raise self._unknown_lesson(changes.name, other)

    def _resolve(self, name: str) -> str | None:
        """The stored lesson a name stands for: itself, or the lesson a twin of that name was merged into (unless
        an entity now has that name)."""
        if name in self.records:
            return name
        if self.names.entity_type(name) is not None:
            return None
        return self._merged_into(name)

    def _merged_into(self, name: str, anywhere: bool = True) -> str | None:
        """The lesson a twin named `name` was merged into: this project's (with MEMORY_LESSONS=shared, projects
        each merge their own twins, and may name them alike), else (`anywhere`) another project's."""
        holders = [n for n, r in self.records.items() if name in (r.get("mergedNames") or ())]
        own = next((n for n in holders if self._project_of(n) == self.project), None)
        return own if own is not None or not anywhere else next(iter(holders), None)

    def _with_outcome(self, record: dict[str, Any], success: bool) -> dict[str, Any]:
        """The lesson with one more attempt counted, and after a success the wording that found it (and that it
        fixed) as an alias: the next error worded like it finds it."""
        meta = complete_metadata(record)
        meta["frequency"] += 1
        meta["successCount"] += int(success)
        meta["successRate"] = meta["successCount"] / meta["frequency"]
        meta["recentSuccesses"] = meta["recentSuccesses"] * RECENCY_DECAY + int(success)
        meta["recentAttempts"] = meta["recentAttempts"] * RECENCY_DECAY + 1
        meta["updatedAt"] = utc_now()
        updated = {**record, "metadata": meta}
        learned = self.lookups.wording_for(record["name"]) if success else None
        return with_alias(updated, learned) if learned is not None else updated

    def update_lesson_success(self, report: SuccessReport) -> UpdatedLesson:
        # Only a new alias changes what is indexed (counts are not read by the index).
        with (
            self._indexed_ahead(report.lessonName, lambda record: self._with_outcome(record, report.success)),
            self.store.transaction() as tx,
        ):
            name = self._resolve(report.lessonName)
            record = self.records.get(name) if name is not None else None
            if record is not None and name is not None:
                updated = self._with_outcome(record, report.success)
                # The answer is made before the commit: nothing may fail once the attempt is counted.
                answer = UpdatedLesson(lesson=lesson_of(updated), successStatistic=statistic_of(updated))
                tx.upsert(LESSONS, updated)
                return answer
            other = self.names.entity_type(report.lessonName)
        # Nothing was changed; the "did you mean" is looked for with the lock released.
        raise self._unknown_lesson(report.lessonName, other)

    # -- reads -------------------------------------------------------------------------------------------
    def find_similar_errors(self, pattern: ErrorQuery, limit: int = 5) -> SimilarErrors:
        # The text is read before the store is held: that part depends on no lesson, and costs the most.
        message = query_of(pattern.message)
        extra = " ".join(filter(None, [pattern.context, pattern.stackTrace or ""]))
        extra_query = query_of(extra) if extra.strip() else None
        with self.store.reading():
            index = self.index
            query = index.prepare(message, count_unknown=True)
            context = index.prepare(extra_query) if extra_query is not None else None
            scored: list[tuple[float, float, str]] = []
            size = len(index.lessons)
            kind = type_key(pattern.type)
            for name in index.candidates([query]):
                lesson = index.lessons[name]
                score = index.match(query, lesson, kind)
                if context is not None and context.known_mass:
                    # (capped at 1: a quoted word counts in full among the lesson's words, at half in the mass)
                    explained = share_of_query(context, lesson.all_evidence)
                    score = (1 - CONTEXT_WEIGHT) * score + CONTEXT_WEIGHT * explained
                scored.append((score, statistic_of(self.records[name]), name))
            # Abstention by fitted confidence (see ranking.FIND_CONFIDENCE) above the score floor the model was
            # fitted over (below it the model would extrapolate).
            chances = confident(
                [s[0] for s in scored],
                lambda i: clues(index, query, index.lessons[scored[i][2]]),
                size,
                FIND_CONFIDENCE,
                FIND_MIN_CONFIDENCE,
                FIND_THRESHOLD,
                lambda i, j: index.same_fix(index.lessons[scored[i][2]], index.lessons[scored[j][2]]),
            )
            sure = [
                (score, statistic, name, chance)
                for (score, statistic, name), chance in zip(scored, chances, strict=True)
                if chance is not None
            ]
            top = best_first(
                sure, lambda s: (-round(s[0], 4), self._elsewhere(s[2]), -s[1], s[2]), lambda s: s[0], limit
            )
            matches = [
                LessonMatch(
                    name=name,
                    score=round(score, 4),
                    successStatistic=round(statistic, 4),
                    confidence=round(chance, 4),
                    lesson=lesson_of(self.records[name]),
                )
                for score, statistic, name, chance in top
            ]
        self.lookups.shown(pattern.message, [match.name for match in matches])
        shape = query.shape
        return self._fitted(
            SimilarErrors(
                matches=matches,
                signature=shape if len(shape) <= MAX_SIGNATURE_CHARS else shape[: MAX_SIGNATURE_CHARS - 1] + "…",
            ),
            "matches",
        )

    def get_lesson_recommendations(self, context: str, limit: int = 5) -> Recommendations:
        if len(context) > MAX_CONTEXT_CHARS:
            raise InvalidInputError(
                f"context is {len(context):,} characters; the most accepted is {MAX_CONTEXT_CHARS:,} (1 MB). "
                "Pass the end of the log, where the error is."
            )
        if not context.strip():
            raise InvalidInputError("context is empty; pass the error output or a description of the problem")
        windows = error_windows(context)
        lines = [window for window, _, _ in windows]
        log_words = evidence_words(context)
        line_queries = [query_of(window, window_shape, weight) for window, window_shape, weight in windows]
        with self.store.reading():
            index = self.index
            queries = [index.prepare(query) for query in line_queries]
            index.weigh_by_evidence(queries)
            log_query = index.prepare(Query(shape="", evidence=log_words, text=""))
            # The clues read the winning line as find_similar_errors reads a message: its words no lesson has
            # count against every lesson. Read as a log line (where they are ignored, logs being full of them), a
            # line of an error no lesson covers looked fully explained by any lesson sharing its known words. (A
            # copy of the line's query, its text having been read before the store was held; made when a
            # candidate's clues are first asked for, which most candidates' are not.)
            strict_of: dict[int, Query] = {}

            def strict(query: Query | None) -> Query | None:
                if query is None:
                    return None
                found = strict_of.get(id(query))
                if found is None:
                    found = strict_of[id(query)] = index.prepare(copy.copy(query), count_unknown=True)
                return found

            ranked: list[Ranked] = []
            for name in index.candidates(queries or [log_query]):
                lesson = index.lessons[name]
                best, winner = index.best_match(queries, lesson)
                coverage = index.message_coverage(log_query, lesson)
                relevance = (1 - LOG_COVERAGE_WEIGHT) * best + LOG_COVERAGE_WEIGHT * coverage
                statistic = statistic_of(self.records[name])
                line = winner.text if winner is not None else ""
                ranked.append(
                    (
                        combined_score(relevance, statistic),
                        relevance,
                        statistic,
                        name,
                        line,
                        winner,
                    )
                )
            top = best_first(
                self._sure(ranked, strict),
                lambda r: (-round(r[0], 4), self._elsewhere(r[3]), -r[1], r[3]),
                lambda r: r[0],
                limit,
            )
            results = [
                Recommendation(
                    name=name,
                    score=round(score, 4),
                    relevance=round(relevance, 4),
                    successStatistic=round(statistic, 4),
                    confidence=round(chance, 4),
                    matchedLine=line[:500],
                    lesson=lesson_of(self.records[name]),
                )
                for score, relevance, statistic, name, line, chance in top
            ]
        for result in results:
            self.lookups.shown(result.matchedLine, [result.name])
        return self._fitted(
            Recommendations(recommendations=results, errorLines=[line[:300] for line in lines[:20]]),
            "recommendations",
        )

    def _fitted(self, answer: Answer, items: str) -> Answer:
        """The answer within the response budget, as every read is (a lesson holding a 230 KB stack trace made a
        336 KB answer): the least relevant lessons left out while more than one is left, then the long texts of
        those returned cut short (names never), saying so in `truncated`."""
        if self.max_response_chars is None:
            return answer
        budget = self.max_response_chars - ENVELOPE_CHARS
        # Measured by pydantic's own serializer (compact, non-ASCII kept, as json_size counts): a dump to dicts and
        # json.dumps cost a find call 0.6 ms of its 2 ms, on every call, for the rare answer over the budget.
        if len(answer.model_dump_json(exclude_none=True)) < budget:
            return answer
        data = answer.model_dump(mode="json", exclude_none=True)
        if json_size(data) <= budget:
            return answer
        listed: list[Any] = data[items]
        total = len(listed)
        while len(listed) > 1 and json_size(data) > budget:
            listed.pop()
        whole, shortened, cap = listed, 0, budget
        while json_size(data) > budget and cap > 16:
            cap //= 2
            data[items] = copy.deepcopy(whole)
            shortened = _shorten_texts(data[items], cap)
        data["truncated"] = {
            "total": total,
            "returned": len(data[items]),
            "shortenedTexts": shortened,
            "maxResponseChars": self.max_response_chars,
            "hint": "cut to fit MEMORY_MAX_RESPONSE_CHARS: ask with limit=1 for the best lesson alone; "
            "`memory-graph export` writes every lesson whole",
        }
        return type(answer).model_validate(data)

    def _sure(
        self, ranked: list[Ranked], strict: Callable[[Query | None], Query | None]
    ) -> list[tuple[float, float, float, str, str, float]]:
        """Recommendations confident enough to return, each with its confidence (from its relevance, its margin
        over the best other relevance, its clues and the store size; see ranking.RECOMMEND_CONFIDENCE).
        `strict(query)`: the winning line's query read as a message."""
        index = self.index
        chances = confident(
            [r[1] for r in ranked],
            lambda i: clues(index, strict(ranked[i][5]), index.lessons[ranked[i][3]]),
            len(index.lessons),
            RECOMMEND_CONFIDENCE,
            RECOMMEND_MIN_CONFIDENCE,
            RECOMMEND_THRESHOLD,
            lambda i, j: index.same_fix(index.lessons[ranked[i][3]], index.lessons[ranked[j][3]]),
        )
        return [
            (score, relevance, statistic, name, line, chance)
            for (score, relevance, statistic, name, line, _), chance in zip(ranked, chances, strict=True)
            if chance is not None
        ]

    # -- bulk: import and export ---------------------------------------------------------------------------
    def import_lessons(
        self,
        records: Sequence[dict[str, Any]],
        summary: ImportSummary,
        batch: int = 500,
        places: Sequence[str] = (),
    ) -> None:
        """Merge lesson records in, a batch per transaction: each is checked by the stored-lesson rule, a new name
        is stored with complete metadata, a lesson already stored (or seen twice) gains the other's observations.
        `places`: where each record was read ("file:line"), named in a refusal."""
        for start in range(0, len(records), batch):
            with self.store.transaction() as tx:
                pending: dict[str, dict[str, Any]] = {}
                for number, record in enumerate(records[start : start + batch], start=start):
                    name = record["name"]
                    problem = stored_lesson_problem(record)
                    taken = self.names.entity_type(name) if name not in self.records else None
                    if problem is not None:
                        summary.invalid.append(f"{places[number]}: {problem}" if number < len(places) else problem)
                        continue
                    if taken is not None:
                        summary.problems.append(f"lesson {name!r} skipped: the name is used by a {taken}")
                        continue
                    current = pending.get(name) or self.records.get(name)
                    if current is None:
                        summary.lessons += 1
                        pending[name] = {**record, "metadata": complete_metadata(record)}
                    else:
                        merged = merge_records(current, record)
                        if merged == current:
                            summary.duplicates += 1
                        else:
                            summary.merged += 1
                        pending[name] = merged
                for record in pending.values():
                    tx.upsert(LESSONS, record)
            summary.progress(min(start + batch, len(records)))
