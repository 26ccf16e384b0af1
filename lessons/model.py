"""Lessons: what an error looked like, how it was fixed, how to check the fix, and how often the fix worked.

- **errorPattern**: the error as it appeared: `type` (a category such as build, runtime, dependency, vcs),
  `message` (its key line), `context` (what was being done), optional `stackTrace`.
- **verificationSteps**: commands that show the fix worked, with the output to expect.
- **metadata**: `severity`, `environment` (os, versions, dependencies, anything else), ISO 8601 UTC
  `createdAt`/`updatedAt`, and the outcome record: `frequency` (attempts reported), `successCount`, and
  `successRate` = successCount / frequency, the plain share of reported attempts that worked.
  `recentSuccesses`/`recentAttempts` are the same counts with older outcomes weighted down (see ranking.py).

A lesson is also a graph entity (`entityType: "lesson"`): the graph tools show its name and observations.

This module is the one place that knows what a stored lesson is: `lesson_of` reads a stored record (lenient
where older records lack a field, strict where a field has the wrong shape), `stored_lesson_problem` is the
store's record rule for the lesson collection (a malformed lesson is reported by file:line and field when it is
read, never met later as a masked error), and `is_lesson_record` tells an imported record that is a lesson.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    StrictBool,
    StrictStr,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

Text = Annotated[StrictStr, StringConstraints(strip_whitespace=False)]
NonBlank = Annotated[StrictStr, StringConstraints(min_length=1, pattern=r"\S")]
MAX_ALIASES = 10  # wordings of its error a lesson learns (the newest kept)
MAX_ALIAS_CHARS = 500  # of a learned wording of a lesson's error (a lookup's message is cut to it)
Alias = Annotated[StrictStr, StringConstraints(min_length=1, max_length=MAX_ALIAS_CHARS, pattern=r"\S")]
RATE_TOLERANCE = 0.01  # a success rate given to two decimals is a whole count of successes
Severity = Literal["low", "medium", "high", "critical"]
# Number.MAX_SAFE_INTEGER: the largest count a JavaScript reader of the file still reads exactly.
MAX_COUNT = 2**53 - 1
# What find_similar_errors reads: an error's message is a line or a few (a whole log goes to
# get_lesson_recommendations), and the rest is bounded as that tool bounds a log. Reading is linear but not cheap on
# path-like text (about 8 s for 1 MB of "a." in one message).
MAX_MESSAGE_CHARS = 65_536
MAX_LOG_CHARS = 1_048_576


def as_utc(moment: datetime) -> datetime:
    """The same instant in UTC (a time without an offset is taken as UTC); OverflowError past years 1..9999."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def iso(moment: datetime | None) -> str | None:
    """ISO 8601 UTC with milliseconds and a Z, as JavaScript's toISOString writes it (always a 4-digit year)."""
    if moment is None:
        return None
    # Not strftime: its %Y writes year 1 as "1", which no ISO 8601 reader accepts.
    return as_utc(moment).replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


def utc_now() -> str:
    return iso(datetime.now(UTC)) or ""


def fits_a_float(number: int) -> bool:
    """Whether a JavaScript reader gets a finite number back (a larger one rounds to Infinity)."""
    try:
        float(number)
    except OverflowError:
        return False
    return True


def or_text(location: tuple[str | int, ...]) -> str:
    # Only the environment's free-form values may be text instead; the counts and rates must stay numbers.
    return ", or the value as a string" if "environment" in location else ""


def refuse_unreadable_numbers(data: Any) -> None:
    """Raise a ValidationError naming each place in `data` that holds NaN, an infinity, or a whole number too
    large for a float. JSON has no NaN or Infinity (Python writes them anyway, as text no JSON reader takes);
    JavaScript reads a longer number as Infinity; Python cannot even print one of more than 4,300 digits."""
    problems: list[InitErrorDetails] = []
    pending: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    # Iterative on purpose: a deeply nested environment must not end in a RecursionError.
    while pending:
        location, value = pending.pop()
        if isinstance(value, dict):
            pending.extend(((*location, str(key)), item) for key, item in value.items())
        elif isinstance(value, list | tuple):
            pending.extend(((*location, index), item) for index, item in enumerate(value))
        elif isinstance(value, float) and not math.isfinite(value):
            problems.append(
                InitErrorDetails(
                    type=PydanticCustomError(
                        "finite_number",
                        "NaN and Infinity are not JSON numbers; send a finite number{or_text}",
                        {"or_text": or_text(location)},
                    ),
                    loc=location,
                    input=value,
                )
            )
        elif isinstance(value, int) and not fits_a_float(value):
            digits = math.floor(abs(value).bit_length() * math.log10(2)) + 1
            problems.append(
                InitErrorDetails(
                    type=PydanticCustomError(
                        "finite_number",
                        "a whole number this large is read back as Infinity by JavaScript; send a number below "
                        "1.8e308{or_text}",
                        {"or_text": or_text(location)},
                    ),
                    loc=location,
                    # Not the number: the error's text shows its input, and str() refuses past 4,300 digits.
                    input=f"a whole number of about {digits} digits",
                )
            )
    if problems:
        problems.sort(key=lambda problem: [str(part) for part in problem["loc"]])
        raise ValidationError.from_exception_data("unreadable numbers", problems)


def complete_metadata(record: dict[str, Any]) -> dict[str, Any]:
    """A stored lesson's metadata with every field present (hand-edited or older records may lack some). Raises
    ValueError naming the field when the counts are unusable (`stored_counts`)."""
    meta = dict(record.get("metadata") or {})
    frequency, successes, recent_successes, recent_attempts = stored_counts(meta)
    now = utc_now()
    return {
        "severity": meta.get("severity") or "medium",
        "environment": meta.get("environment") or {},
        "createdAt": meta.get("createdAt") or now,
        "updatedAt": meta.get("updatedAt") or meta.get("createdAt") or now,
        "frequency": frequency,
        "successCount": successes,
        "successRate": successes / frequency if frequency else 0.0,  # always derived: the count is the truth
        "recentSuccesses": recent_successes,
        "recentAttempts": recent_attempts,
        **({"project": meta["project"]} if isinstance(meta.get("project"), str) else {}),
    }


def stored_counts(meta: dict[str, Any]) -> tuple[int, int, float, float]:
    """(frequency, successCount, recentSuccesses, recentAttempts) of a stored lesson's metadata, older records'
    gaps filled. Raises ValueError naming the field when a count is not a whole number from 0 to MAX_COUNT,
    successCount exceeds frequency, or a recent count is not a finite number from 0 with recentSuccesses <=
    recentAttempts: one such line (1e400 is valid JSON) made every lookup divide by zero or print NaN, which no
    client parses."""
    frequency = _stored_count(meta, "frequency", 0)
    if "successCount" in meta or frequency == 0:
        successes = _stored_count(meta, "successCount", 0)
    else:  # an older record kept only the rate
        rate = _stored_number(meta, "successRate", 0.0)
        if not 0 <= rate <= 1:
            raise ValueError(f"metadata.successRate must be from 0 to 1 (got {rate:g})")
        successes = round(rate * frequency)
    if successes > frequency:
        raise ValueError(f"metadata.successCount ({successes}) cannot exceed metadata.frequency ({frequency})")
    recent_successes = _stored_number(meta, "recentSuccesses", float(successes))
    recent_attempts = _stored_number(meta, "recentAttempts", float(frequency))
    if recent_successes > recent_attempts * (1 + 1e-9) + 1e-9:
        raise ValueError(
            f"metadata.recentSuccesses ({recent_successes:g}) cannot exceed metadata.recentAttempts "
            f"({recent_attempts:g})"
        )
    return frequency, successes, recent_successes, recent_attempts


def _stored_number(meta: dict[str, Any], field: str, default: float) -> float:
    value = meta.get(field, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"metadata.{field} must be a number (got {json.dumps(value, default=str)[:40]})")
    # (compared before any conversion: a 400-digit integer is no float, and Python will not even print it whole)
    if not 0 <= value <= MAX_COUNT:
        shown = f"{value:g}" if isinstance(value, float) or value.bit_length() < 64 else "a number that large"
        raise ValueError(f"metadata.{field} must be a number from 0 to {MAX_COUNT} (got {shown})")
    return float(value)


def _stored_count(meta: dict[str, Any], field: str, default: int) -> int:
    value = _stored_number(meta, field, default)
    if value != int(value):
        raise ValueError(f"metadata.{field} must be a whole number (got {value:g})")
    return int(value)


class ErrorPattern(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: NonBlank = Field(description="Error category, e.g. build, runtime, dependency, network, vcs, syntax")
    message: NonBlank = Field(description="The key error line, as printed")
    context: Text = Field(default="", description="What was being done when it happened")
    stackTrace: StrictStr | None = Field(default=None, description="Optional stack trace or surrounding output")


class ErrorQuery(BaseModel):
    """An error to look up: the message is required, the rest helps."""

    model_config = ConfigDict(extra="forbid")

    type: Text = Field(default="", description="Error category, if known")
    message: NonBlank = Field(
        max_length=MAX_MESSAGE_CHARS,
        description="The error message or key line (a few lines are fine; a whole log: get_lesson_recommendations)",
    )
    context: Text = Field(default="", max_length=MAX_LOG_CHARS, description="What was being done")
    stackTrace: StrictStr | None = Field(default=None, max_length=MAX_LOG_CHARS)

    @model_validator(mode="before")
    @classmethod
    def _readable_numbers(cls, data: Any) -> Any:
        refuse_unreadable_numbers(data)
        return data


class VerificationStep(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: NonBlank = Field(description="A command that checks the fix")
    expectedOutput: Text = Field(default="", description="What it prints when the fix worked")
    successIndicators: list[StrictStr] = Field(default_factory=list, description="Strings that show success")


class Environment(BaseModel):
    """Where the lesson was learned; any further keys are kept."""

    model_config = ConfigDict(extra="allow")

    os: StrictStr | None = None
    nodeVersion: StrictStr | None = None
    pythonVersion: StrictStr | None = None
    dependencies: dict[str, StrictStr] | list[StrictStr] | None = None


class LessonMetadataInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    severity: Severity = "medium"
    environment: Environment = Field(default_factory=Environment)
    createdAt: datetime | None = Field(
        default=None, description="Kept if given (ISO 8601, within years 1..9999 in UTC); else now"
    )
    updatedAt: datetime | None = None
    frequency: NonNegativeInt = Field(default=0, le=MAX_COUNT, description="Attempts already reported (prior history)")
    successRate: float = Field(
        default=0.0, ge=0.0, le=1.0, allow_inf_nan=False, description="Share of those attempts that worked"
    )
    successCount: NonNegativeInt | None = Field(default=None, le=MAX_COUNT, description="Successes; derived if omitted")

    @field_validator("createdAt", "updatedAt")
    @classmethod
    def _within_utc_calendar(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        if value is None:
            return None
        try:
            return as_utc(value)
        except OverflowError:
            raise ValueError(
                f"metadata.{info.field_name} {value.isoformat()} is outside years 1..9999 once converted to UTC; "
                "send an ISO 8601 time between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z, "
                "e.g. 2024-05-01T12:00:00Z"
            ) from None

    @model_validator(mode="after")
    def _consistent_counts(self) -> LessonMetadataInput:
        if self.successCount is not None and self.successCount > self.frequency:
            raise ValueError(
                f"metadata.successCount ({self.successCount}) cannot exceed metadata.frequency ({self.frequency})"
            )
        if self.frequency == 0 and self.successRate > 0:
            raise ValueError(
                "metadata.successRate > 0 needs metadata.frequency > 0 (how many attempts it is a share of)"
            )
        if "successRate" in self.model_fields_set and self.frequency:
            # The rate is stored as successCount / frequency: a rate that is not one (to two decimals) would be
            # shown, then replaced at the next outcome, with no attempt between.
            count = self.success_count()
            if abs(count / self.frequency - self.successRate) >= RATE_TOLERANCE:
                given = "metadata.successCount" if self.successCount is not None else "the nearest whole count"
                raise ValueError(
                    f"metadata.successRate ({self.successRate:g}) is not {given} over metadata.frequency "
                    f"({count}/{self.frequency} = {count / self.frequency:.3f}); send metadata.successCount (the "
                    "attempts that worked) and leave successRate out: it is derived"
                )
        return self

    def success_count(self) -> int:
        """The successes this prior history says (given, or the rate's whole share of the attempts)."""
        if self.successCount is not None:
            return self.successCount
        return round(self.successRate * self.frequency)


class LessonInput(BaseModel):
    """What create_lesson accepts."""

    model_config = ConfigDict(extra="forbid")

    name: NonBlank = Field(description="Unique name across entities and lessons, e.g. PIP_NO_MATCHING_DIST")
    entityType: Literal["lesson"] = Field(default="lesson", description='Always "lesson"')
    observations: list[StrictStr] = Field(default_factory=list, description="What the cause was, how it was fixed")
    errorPattern: ErrorPattern
    verificationSteps: list[VerificationStep] = Field(default_factory=list)
    metadata: LessonMetadataInput = Field(default_factory=LessonMetadataInput)

    @model_validator(mode="before")
    @classmethod
    def _readable_numbers(cls, data: Any) -> Any:
        # Before the fields: a field's own error would show the number, and Python cannot print a huge one.
        refuse_unreadable_numbers(data)
        return data

    @field_validator("entityType", mode="before")
    @classmethod
    def _lesson_type(cls, value: Any) -> Any:
        if value != "lesson":
            raise ValueError(f'entityType must be "lesson" (got {value!r}); use create_entities for other entities')
        return value


class LessonMetadata(BaseModel):
    severity: Severity
    environment: dict[str, Any]
    createdAt: str
    updatedAt: str
    frequency: int
    successCount: int
    successRate: float
    recentSuccesses: float
    recentAttempts: float
    project: str | None = Field(
        default=None, description="The project the lesson was written in (lessons are shared by every project)"
    )


class Lesson(BaseModel):
    """A stored lesson."""

    name: str
    entityType: str
    observations: list[str]
    errorPattern: ErrorPattern
    verificationSteps: list[VerificationStep]
    metadata: LessonMetadata
    aliases: list[str] = Field(
        default_factory=list,
        description="Other wordings of the error that this lesson fixed (learned from update_lesson_success after a "
        "lookup, or from a merged twin); matched like the message",
    )
    mergedNames: list[str] = Field(
        default_factory=list, description="Names of twin lessons merged into this one (they still find it)"
    )


class CreatedLesson(Lesson):
    """What create_lesson returns: the stored lesson, and whether the new one was merged into a twin."""

    merged: bool = Field(
        default=False,
        description="true when a lesson with the same error signature already existed: the new observations, "
        "verification steps and counts were merged into it (its name is `name`) instead of storing a twin",
    )
    note: str | None = None


class LessonChanges(BaseModel):
    """What update_lesson accepts: the lesson's name and the fields to replace (the others are kept)."""

    model_config = ConfigDict(extra="forbid")

    name: NonBlank = Field(description="The lesson's exact name")
    errorPattern: ErrorPattern | None = Field(default=None, description="Replaces the whole error pattern")
    observations: list[StrictStr] | None = Field(default=None, description="Replaces the observations")
    addObservations: list[StrictStr] = Field(default_factory=list, description="Appended to the observations")
    verificationSteps: list[VerificationStep] | None = Field(default=None, description="Replaces the steps")
    severity: Severity | None = None
    aliases: list[Alias] | None = Field(
        default=None,
        max_length=MAX_ALIASES,
        description=f"Replaces the learned wordings of the error, at most {MAX_ALIASES} ([] clears them)",
    )

    def changes_nothing(self) -> bool:
        return (
            self.errorPattern is None
            and self.observations is None
            and not self.addObservations
            and self.verificationSteps is None
            and self.severity is None
            and self.aliases is None
        )


class SuccessReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lessonName: NonBlank
    success: StrictBool


class LessonMatch(BaseModel):
    name: str
    score: float = Field(description="How well the error matches, 0..1")
    successStatistic: float = Field(description="Shrunk, recency-weighted success rate used for ranking, 0..1")
    confidence: float = Field(
        description="Estimated probability that this lesson is the right one (score, margin over the others, "
        "store size; fitted on real errors), 0..1"
    )
    lesson: Lesson


class LessonsCut(BaseModel):
    """Present only when an answer was cut to fit the response budget."""

    total: int = Field(description="Lessons the answer held before the cut")
    returned: int
    shortenedTexts: int = Field(description="Texts of the lessons returned cut short (each ends with …)")
    maxResponseChars: int
    hint: str


class SimilarErrors(BaseModel):
    matches: list[LessonMatch]
    signature: str = Field(description="The query's normalized error shape (what was matched)")
    truncated: LessonsCut | None = Field(default=None, description="Set when cut to fit the response budget")


class Recommendation(BaseModel):
    name: str
    score: float = Field(description="relevance x (0.7 + 0.3 x successStatistic)")
    relevance: float = Field(description="How well the lesson matches the context, 0..1")
    successStatistic: float
    confidence: float = Field(description="Estimated probability that this lesson is the right one, 0..1")
    matchedLine: str = Field(description="The line of the context that matched best")
    lesson: Lesson


class Recommendations(BaseModel):
    recommendations: list[Recommendation]
    errorLines: list[str] = Field(description="The lines of the context read as errors (first 20)")
    truncated: LessonsCut | None = Field(default=None, description="Set when cut to fit the response budget")


class UpdatedLesson(BaseModel):
    lesson: Lesson
    successStatistic: float


def lesson_of(record: dict[str, Any]) -> Lesson:
    """The Lesson a stored record holds; raises ValueError (a pydantic ValidationError among them) naming the
    field when a field has the wrong shape."""
    pattern = record.get("errorPattern") or {}
    if not isinstance(pattern, dict):
        raise ValueError(f"errorPattern must be an object (got {type(pattern).__name__})")
    if not isinstance(record.get("metadata") or {}, dict):
        raise ValueError(f"metadata must be an object (got {type(record['metadata']).__name__})")
    return Lesson.model_validate(
        {
            "name": record["name"],
            "entityType": record.get("entityType", "lesson"),
            "observations": record.get("observations", []),
            "errorPattern": {
                "type": pattern.get("type") or "unknown",
                "message": pattern.get("message") or "(no message)",
                "context": pattern.get("context") or "",
                **({"stackTrace": pattern["stackTrace"]} if pattern.get("stackTrace") else {}),
            },
            "verificationSteps": record.get("verificationSteps") or [],
            "metadata": complete_metadata(record),
            "aliases": record.get("aliases") or [],
            "mergedNames": record.get("mergedNames") or [],
        }
    )


def stored_lesson_problem(record: dict[str, Any]) -> str | None:
    """Why a stored lesson record is unusable (naming the field), or None; the store's rule for lesson lines."""
    if record.get("type") == "relation":
        return None
    try:
        lesson_of(record)
    except ValidationError as exc:
        problem = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in problem["loc"])
        got = json.dumps(problem.get("input"), ensure_ascii=False, default=str)[:80]
        return f"lesson {record['name']!r}: field {where}: {problem['msg']} (got {got})"
    except ValueError as exc:  # (each names its field)
        return f"lesson {record['name']!r}: {exc}"
    except TypeError as exc:
        return f"lesson {record['name']!r}: a field has the wrong type ({exc})"
    return None


def is_lesson_record(record: dict[str, Any]) -> bool:
    """Whether an imported entity record is a lesson (the fork's files mix them with plain entities)."""
    return (
        record.get("type") == "entity"
        and record.get("entityType") == "lesson"
        and isinstance(record.get("errorPattern"), dict)
    )
