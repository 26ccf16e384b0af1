"""Ranking lessons: how well an error matches a lesson, and how much the lesson's record should count.

**Match score** (0..1) of an error message against a lesson, from the two parts of a signature (signature.py):

    0.55 x query coverage                     share of the query's evidence the lesson explains anywhere (message,
                                              aliases, context, observations, verification)
  + 0.10 x Dice overlap                       of the query's and the message's evidence, weighted by rarity
  + 0.05 x lesson coverage                    share of the lesson message's evidence the query has
  + 0.10 x partial_ratio(shapes)              the shorter shape inside the longer (aliases and the first
                                              observations are keys too), damped when the shorter is much shorter
  + 0.05 x token_sort_ratio(shapes)           the two shapes, word order ignored
  + 0.15 x same type                          when the caller gives a type

Evidence shares are weighted by rarity: idf(w) = ln((N + 1) / (df(w) + 0.5)) over the N stored lessons, so a
word every lesson has counts for little and a rare one (E0382, EADDRINUSE, NoneType) for a lot. A slot of the
query (a quoted name, a file name) counts SLOT_WEIGHT of its rarity against a lesson that lacks it and all of it
for one that has it. In find_similar_errors the query's share also counts the unquoted words no lesson has (at
half a unique word's rarity), so an error no lesson covers scores low. Without a type (recommendations from a
raw log) the other weights are scaled up to sum to 1. The character terms only break ties between raw lines:
led by them, a lesson about another error of the same tool ("missing 'endif'" for "missing separator") beat a
lesson written in other words about the right one.

**Long text.** The fuzzy terms cost more than linear time in the lengths compared (partial_ratio of two
4,000-character shapes takes seconds: about the shorter's length squared times the longer's), so they see bounded
views: ratio compares the first FUZZY_CHARS characters of each sorted shape, partial_ratio aligns at most
FUZZY_NEEDLE characters of the shorter shape within at most FUZZY_CHARS (and FUZZY_AREA / needle) of the longer.
A cut score is scaled by the share of the text it compared, so a cut lowers a score rather than raising it. The
evidence terms always see all the text. No pair of dev-corpus shapes is cut: lesson shapes are at most 425
characters, query and log-line shapes at most 231.

**Success statistic** (0..1): the lesson's recency-weighted success share shrunk towards 1/2 by a Beta(2, 2)
prior: (s + 2) / (n + 4), where s and n are successes and attempts with every older outcome weighted by 0.98
per newer one. A new lesson sits at 0.5, a lucky 1-for-1 at 0.6, a proven 95-for-100 near 0.9.

**Recommendation score** = relevance x (0.7 + 0.3 x success statistic): at equal relevance the proven lesson
wins; an exact match with no record (0.85 x relevance) still beats an unrelated proven one.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass, field
from itertools import chain, islice, takewhile
from typing import Any, TypeVar

from rapidfuzz import fuzz

from lessons import model as model_module
from lessons import signature as signature_module
from lessons.model import MAX_ALIASES
from lessons.signature import evidence_words, identity_words, shape, slot_words, strip_ansi, twin_key
from memory_graph import search as search_module
from memory_graph.storage import code_tag

T = TypeVar("T")
PRIOR_SUCCESSES = 2.0
PRIOR_ATTEMPTS = 4.0
RECENCY_DECAY = 0.98
SUCCESS_WEIGHT = 0.3

W_SORT, W_PARTIAL, W_LESSON_COVERAGE, W_QUERY_COVERAGE, W_TYPE = 0.05, 0.10, 0.05, 0.55, 0.15
W_DICE = 0.10
# The most one query's match can score before its weight and type (every term at its cap; the partial term's
# damping is at most 1), with room for the floats' rounding: `LessonIndex.best_match` skips a query it cannot beat.
MATCH_CEILING = (W_SORT + W_PARTIAL + W_LESSON_COVERAGE + W_QUERY_COVERAGE + W_DICE) * (1 + 1e-9)
# Confidence that a match is right: a logistic model of the top answer's features (see `confidence` and `clues`),
# fitted by bench/lessons_fit_confidence.py on lessons and real errors harvested on this machine
# (bench/data/harvested-lessons.json, harvested-negatives-2.json), never on the dev sets. A fixed score cut-off let
# unrelated errors through in a large store and cut right matches to differently worded lessons. The cut keeps a
# match when that maximises right answers minus twice the wrong ones over the fitting data (its errors no lesson
# covers weighted to a quarter of the queries); the weight of ln size is held at or below zero.
# Weights of (score, margin over the best rival (see `margins`), rarest words explained, names the class,
# message coverage, query coverage, query and rarest words explained by the lesson's prose, ln size, how crowded
# the call's top is (`crowding`)), then the intercept:
FIND_CONFIDENCE = (2.288, 3.55, 0.755, -0.163, 2.259, 0.093, 1.904, 1.001, -0.008, -2.838, -4.28)
RECOMMEND_CONFIDENCE = (2.544, 3.415, 0.7, -0.576, 1.811, 0.317, 1.892, 0.996, -0.002, -2.197, -4.393)
FIND_MIN_CONFIDENCE = 0.4
RECOMMEND_MIN_CONFIDENCE = 0.41
# Score floors: the model is not trusted below the lowest score a right fitting answer had.
FIND_THRESHOLD = 0.3
RECOMMEND_THRESHOLD = 0.25
CROWD_GAP = 0.05  # of a score, within which a candidate crowds the best one (`crowding`)
RAREST_WORDS = 3  # the query's rarest words, which a right lesson explains (clues)
SLOT_WEIGHT = 0.5  # of a slot's rarity (a quoted or file name), in the query's mass (see LessonIndex.prepare)
UNKNOWN_WORD_WEIGHT = 0.5  # of a unique word's rarity, for a query word no lesson has
SAME_FIX = 0.8  # idf-weighted Jaccard of two lessons' explanations past which they give the same fix (same_fix)
RELATIVE_CUTOFF = 0.6  # results scoring under this share of the best one are dropped
IDENTITY_CONFLICT = 0.75  # of a match's score, when the query and the lesson name different errors
CANDIDATES = 48
MAX_HOLDERS = 1_000  # lessons holding a word, past which it does not pick candidates (LessonIndex.candidates)
MAX_ERROR_LINES = 60
TAIL_LINES = 10
PRECEDING_WEIGHT = 0.7  # of a match, for the line just before an error line (error_windows)
# A log line's match counts in full once it has this many words some lesson has, or as many as the log's richest
# error line (LessonIndex.weigh_by_evidence). Chosen on the harvested data, not on the dev sets: after a refit,
# bench/lessons_fit_confidence.py's objective for 2, 3, 4, 5 words (without the richest-line part) was 551, 566,
# 569, 569 (the old code: 513), and of the flat top, 5 ranks best there (top-1 with abstention off over the four
# fitting stores: 3.615, 3.620, 3.640 for 3, 4, 5); with the richest-line part, 570.
EVIDENCE_WORDS = 5.0
# error_windows reads at most this many of a log's last error lines, and stops once it has shaped this much text:
# a log of 100,000 error lines that are all alike would otherwise be shaped line by line without ever finding
# MAX_ERROR_LINES different ones.
MAX_HIT_LINES = 2_000
MAX_SHAPED_CHARS = 262_144
MAX_LINE_CHARS = 4_096
# Bounds of the fuzzy terms' views (see the module docstring). A 3 KB traceback given as the message is still
# aligned whole against a lesson; the dearest alignment left costs a few milliseconds.
FUZZY_CHARS = 4_096
FUZZY_NEEDLE = 512
FUZZY_AREA = 1 << 20  # needle x haystack characters
MAX_KEYS = 3  # observations used as extra match keys, and the characters read of each
MAX_KEY_CHARS = 600
KEY_DISCOUNT = 1.0  # an observation's wording counts as much as the message's (measured: 1.0 beat 0.9 on authored-A)

# Lines that announce an error (a generous net; the scoring decides). Both patterns are matched against the line in
# lower case (written in lower case, without IGNORECASE): case-insensitive matching of these alternations cost
# 40 us a line, a quarter of a recommendation for a 200-line log.
ERROR_HINTS = (
    r"error|exception|fatal|panic|fail|traceback|conflict|reject|denied|not found|cannot|can't|could not|"
    r"couldn't|unable|invalid|missing|no such|undefined|refused|abort|segmentation|overflow|\*\*\*|"
    r"\b[a-z]\d{3,4}\b|not a |would be overwritten|no rule|not currently|unexpected|expected|timed? ?out|"
    r"no space|too many|out of memory|killed|deadlock|is a directory|not permitted|unsupported|incompatible|"
    r"mismatch|violation|illegal|assert|unknown|unrecognized|not allowed|forbidden|unreachable|bad |"
    r"not used|does not exist|doesn't exist|not recognized|permission|required|must be|core dumped"
)


def by_first_letter(alternatives: Iterable[str]) -> str:
    """An alternation whose search finds a match wherever the plain one (`"|".join(alternatives)`) does, with the
    alternatives that start with a letter grouped by it: the regex engine tries every branch at every position of
    a line, and a branch that fails at its first letter still costs its turn (grouped, the ERROR_HINT search of a
    200-line log took 0.31 ms instead of 0.61). Only for a search's yes or no: the match found may differ."""
    grouped: dict[str, list[str]] = {}
    others = []
    for alternative in alternatives:
        if alternative[:1].isalpha() and alternative[1:2] not in ("?", "*", "+", "{"):  # not "a?b"
            grouped.setdefault(alternative[0], []).append(alternative[1:])
        else:
            others.append(alternative)
    return "|".join([f"{letter}(?:{'|'.join(rests)})" for letter, rests in grouped.items()] + others)


ERROR_HINT = re.compile(by_first_letter(ERROR_HINTS.split("|")))  # no alternative holds a "|" of its own
# Wrapper lines that CI systems, make and npm print around any failure: they name no particular error.
# Two patterns: what a wrapper line says anywhere, and how one starts (matched at the start only: as alternatives of
# one searched pattern, the starts were tried at every position of every line, a third of the time error_windows
# took on a 200-line log).
WRAPPER = re.compile(r"exit code|exit status|non-zero code|returned \d+|job failed|process completed|\] error \d+")
# A count of errors ("due to 2 previous errors", "1 error generated", "x.pl had compilation errors") sums up the
# errors above it and names none of them: it says where to look (the line before it is tried, see error_windows),
# but is not matched itself (a lesson on another tool's "aborting ... due to ..." won with it).
ERROR_COUNT = re.compile(r"\b\d+ (?:previous )?errors?\b|\b(?:previous|compilation) errors\b")
WRAPPER_START = re.compile(
    r"make(\[\d+\])?: \*\*\* \[|"
    r"npm (?:error|err!)(?: (?:code (?:\d+|elifecycle)|path|command|errno|a complete log)|\s*$)|"
    r"error: could not compile|for more information about this error|"
    # A traceback's header and the lines that chain one exception to the next: the exception lines name the error.
    r"traceback \(most recent call last\)|during handling of the above exception|the above exception was|"
    # The command that was run, echoed by a shell prompt (`$ make`, `user@host:~/app$ make`), `set -x` (`+ make`),
    # a CI step (`Run make`, Docker's `Step 3/8 : RUN make`) or npm (`> app@1.0.0 build`): it is what the user
    # typed, not output. Matched as an error line, a lesson whose text mentions the same tool or file explained
    # all of it (a confident answer to an error no lesson covers). A bare prompt (the log's last line) is one too.
    r"\$(?: |$)|[\w.-]+@[\w.-]+:\S*[$#](?: |$)|\+ |run \S|step \d+/\d+ : |> \S+@\S+ |"
    # A banner: text between two runs of one character (pytest's `____ ERROR collecting tests/t.py ____` and
    # `==== short test summary info ====`, `!!!! Interrupted: 1 error during collection !!!!`): a section
    # title, not an error. (glibc's `*** stack smashing detected ***: terminated` does not end in a run.)
    r"(?P<banner>[_=!*#~-])(?P=banner){2,} .*\S (?P=banner){3,}$",
)

# A compiler's notes on the error above them (rustc's `help:` and `= note:`, gcc's `a.c:3:5: note:`, a `hint:`):
# they suggest fixes and so use other errors' words ("consider using `Option::expect` ... panicking"); matched as
# error lines of their own (or as the line before one) they outscored the error they annotate. They stay in that
# error's window. (The source lines quoted under a gutter, `  |   ^ expected ...`, stay error lines: their labels
# say what was expected and found, which a summary lesson often repeats.)
SUB_DIAGNOSTIC = re.compile(r"(?:= )?(?:help|note|hint): |\S+:\d+:(?:\d+:)? note: ")


def is_wrapper(line: str) -> bool:
    """Whether a (lower-cased) log line is a wrapper line (WRAPPER, WRAPPER_START)."""
    return WRAPPER.search(line) is not None or WRAPPER_START.match(line) is not None


def type_key(kind: str) -> str:
    """An error type reduced to a stem: letters only, lower-cased, without a trailing "error"/"issue"/"failure"
    and a plural ending, so "Build", "build-error", "dependency" and "dependencies" compare alike."""
    key = "".join(ch for ch in kind.lower() if ch.isalpha())
    for suffix in ("errors", "error", "issues", "issue", "failures", "failure"):
        if key.endswith(suffix) and len(key) > len(suffix) + 2:
            key = key[: -len(suffix)]
            break
    if key.endswith("ies") and len(key) > 5:
        return key[:-3] + "y"
    if key.endswith("sses"):
        return key[:-2]
    if key.endswith("s") and not key.endswith("ss") and len(key) > 4:
        return key[:-1]
    return key


def same_type(first: str, second: str) -> bool:
    return bool(first) and first == second


def success_statistic(recent_successes: float, recent_attempts: float) -> float:
    return (recent_successes + PRIOR_SUCCESSES) / (recent_attempts + PRIOR_ATTEMPTS)


def best_first(items: list[T], order: Callable[[T], Any], score_of: Callable[[T], float], limit: int) -> list[T]:
    """Items sorted by `order`, without those scoring under RELATIVE_CUTOFF of the best, at most `limit`."""
    ranked = sorted(items, key=order)
    if not ranked:
        return []
    floor = RELATIVE_CUTOFF * score_of(ranked[0])
    return [item for item in ranked if score_of(item) >= floor][:limit]


def confidence(weights: tuple[float, ...], features: tuple[float, ...]) -> float:
    """The fitted probability that a match is right, from its features: (score, margin over the best other lesson,
    the `clues`, ln store size, `crowding`); `weights` has one weight per feature, then the intercept."""
    z = weights[-1] + sum(w * x for w, x in zip(weights[:-1], features, strict=True))
    return 1 / (1 + math.exp(-max(-50.0, min(50.0, z))))


def confident(
    scores: list[float],
    clues_of: Callable[[int], Clues],
    size: int,
    weights: tuple[float, ...],
    cut: float,
    floor: float,
    same_fix: Callable[[int, int], bool],
) -> list[float | None]:
    """For each score of a call's candidates, its confidence (`confidence` of the score, its margin over its best
    rival, the candidate's clues, ln store size and how crowded the call's top is), or None when under the cut, the
    score under the floor, or under RELATIVE_CUTOFF of the best candidate's score (which `best_first` drops
    whenever the best is answered). `clues_of(i)`: candidate i's clues, asked for only where the score reaches that
    line (most candidates of a large store do not, and the clues are the dear part of the features).
    `same_fix(i, j)`: whether candidates i and j give the same fix (see `margins`)."""
    log_size = math.log(max(size, 1))
    best = max(scores, default=0.0)
    line = max(floor, RELATIVE_CUTOFF * best)
    crowd = crowding(scores, best)
    chances: list[float | None] = []
    for i, (score, margin) in enumerate(zip(scores, margins(scores, same_fix, line), strict=True)):
        chance = confidence(weights, (score, margin, *clues_of(i), log_size, crowd)) if score >= line else None
        chances.append(chance if chance is not None and chance >= cut else None)
    return chances


def crowding(scores: list[float], best: float) -> float:
    """How crowded a call's top is: the candidates scoring within CROWD_GAP of the best, in tens. Where many lessons
    explain an error about as well, the best of them is less likely the one: the margin over the runner-up alone
    says nothing of the third and the fourth (fitted weight negative; thirty-sixth session)."""
    return sum(1 for score in scores if score >= best - CROWD_GAP) / 10


def margins(scores: list[float], same_fix: Callable[[int, int], bool], line: float = 0.0) -> list[float]:
    """Each score's margin over its best rival: the best-scoring candidate that does not give the same fix
    (negative when a rival scores higher). Two lessons that explain an error alike (an assistant's summary and the
    raw line it was written for, or two wordings of one lesson) are not rivals: choosing between them changes
    nothing for the user, and measured against each other they made a right answer look unsure.

    The candidates scoring at least `line` (the ones that can be answered) are grouped in score order, each with
    the first group whose best member gives the same fix; a candidate's rival is the best outside its group.
    The others' margins are over the best score, as any other candidate's would be."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    leaders: list[int] = []  # each group's best member, best group first
    group_of: dict[int, int] = {}
    for i in order:
        if scores[i] < line:
            break
        group = next((g for g, leader in enumerate(leaders) if same_fix(i, leader)), None)
        if group is None:
            group = len(leaders)
            leaders.append(i)
        group_of[i] = group
    # The best score outside the first group: the second group's leader, or the first candidate left ungrouped.
    outside_first = [scores[leaders[1]]] if len(leaders) > 1 else []
    outside_first.extend(scores[i] for i in order[len(group_of) : len(group_of) + 1])
    best_outside_first = max(outside_first, default=0.0)
    top = scores[order[0]] if order else 0.0
    return [
        score - (best_outside_first if group_of.get(i) == 0 else top) if i in group_of else score - top
        for i, score in enumerate(scores)
    ]


def combined_score(relevance: float, statistic: float) -> float:
    return relevance * (1 - SUCCESS_WEIGHT + SUCCESS_WEIGHT * statistic)


Clues = tuple[float, float, float, float, float, float]  # see `clues`


@dataclass(frozen=True)
class IndexedLesson:
    name: str
    type: str
    shape: str
    sorted_shape: str  # the shape's words sorted: ratio() of two of these is token_sort_ratio, without re-sorting
    message_evidence: frozenset[str]
    all_evidence: frozenset[str]
    # More match keys: the shapes of the lesson's observations. An assistant often writes a summary as the
    # message and the real error wording in an observation; the partial alignment takes the best key.
    other_shapes: tuple[str, ...] = ()
    # Identity tokens (signature.identity_words) of the message, and of everything the lesson says.
    message_identity: frozenset[str] = frozenset()
    all_identity: frozenset[str] = frozenset()
    twin_key: str = ""  # signature.twin_key of the message: a new lesson with the same one is its twin
    explanation_evidence: frozenset[str] = frozenset()  # evidence of the observations and verification steps
    # Evidence of the observations and verification steps outside their quotes: the lesson's own words about the
    # error, without the error text, commands and file names it quotes.
    prose_evidence: frozenset[str] = frozenset()


def lesson_text(record: dict[str, Any]) -> str:
    """Everything a lesson says, for evidence: its name, pattern, observations, verification steps. The name is the
    author's too: an assistant names a lesson after the error ("npm-missing-script") and words its message as what
    happened ("npm run build fails in CI because package.json has no build script")."""
    pattern = record.get("errorPattern") or {}
    parts = [str(record.get("name") or "")]
    parts.extend(str(pattern.get(k) or "") for k in ("type", "message", "context", "stackTrace"))
    parts.extend(str(alias) for alias in record.get("aliases") or [])
    parts.extend(record.get("observations") or [])
    for step in record.get("verificationSteps") or []:
        if isinstance(step, dict):
            parts.append(str(step.get("command") or ""))
            parts.append(str(step.get("expectedOutput") or ""))
            parts.extend(str(s) for s in step.get("successIndicators") or [])
    return "\n".join(parts)


# Quoted text in a lesson's explanation: an error's own wording or a command, as opposed to the lesson's prose.
# A single quote opens and closes only outside a word, so the apostrophe of "doesn't" is neither.
QUOTED_SPAN = re.compile(
    r"(?<![\w'])'[^'\n]{1,400}+'(?!\w)|\"[^\"\n]{1,400}+\"|`[^`\n]{1,400}+`|‘[^’\n]{1,400}+’|“[^”\n]{1,400}+”"
)


def unquoted(text: str) -> str:
    """The text without its quoted spans."""
    return QUOTED_SPAN.sub(" ", text)


def explanation_text(record: dict[str, Any]) -> str:
    """What the lesson says about the error in its own words: observations and verification steps."""
    return lesson_text(
        {"observations": record.get("observations"), "verificationSteps": record.get("verificationSteps")}
    )


def index_record(record: dict[str, Any]) -> IndexedLesson:
    pattern = record.get("errorPattern") or {}
    message = str(pattern.get("message") or "")
    # A quoted name the lesson never mentions again was the user's own (a key, a file, a variable): another
    # occurrence will have another name, so its absence must not count against a match. One the lesson
    # talks about (a builtin, a reserved word, an option) is what the lesson is about, and stays evidence.
    explained = evidence_words(explanation_text(record))
    incidental = {w for w in slot_words(message) if w not in explained}
    message_shape = shape(message)
    message_words = evidence_words(message)
    text = lesson_text(record)
    return IndexedLesson(
        name=record["name"],
        type=type_key(str(pattern.get("type") or "")),
        shape=message_shape,
        sorted_shape=sort_words(message_shape),
        message_evidence=message_words - incidental,
        all_evidence=evidence_words(text),
        # Aliases (other wordings that this lesson fixed) first, then the observations.
        other_shapes=tuple(
            shape(str(text)[:MAX_KEY_CHARS])
            for text in chain(
                _newest(record.get("aliases"), MAX_ALIASES), islice(record.get("observations") or [], MAX_KEYS)
            )
        ),
        message_identity=identity_words(message),
        all_identity=identity_words(text),
        # A message too short to say which error it is (one word) has no twin.
        twin_key=twin_key(message) if len(message_words) >= 2 else "",
        explanation_evidence=explained,
        prose_evidence=evidence_words(unquoted(explanation_text(record))),
    )


def _newest(items: Any, count: int) -> list[Any]:
    """The last `count` items of a list (a lesson's aliases are kept oldest first: two copies of a lesson merged on
    import may hold more than a lesson learns)."""
    return list(items[-count:]) if isinstance(items, list) else []


def _indexed_fields(record: dict[str, Any]) -> tuple[Any, ...]:
    """What index_record reads of a record besides its name."""
    return (
        record.get("errorPattern"),
        record.get("observations"),
        record.get("verificationSteps"),
        record.get("aliases"),
    )


def fields_hash(record: dict[str, Any]) -> str:
    """A digest of what index_record reads: a cached signature is valid while this is unchanged. (repr, not JSON:
    one C call, and the same record read from the same line always has the same repr.)"""
    return hashlib.sha1(repr(_indexed_fields(record)).encode("utf-8", "surrogatepass")).hexdigest()


@functools.cache
def signature_version() -> str:
    """Which code made a cached signature: a digest of the modules that compute it, so any change to them
    makes every cached signature stale instead of silently wrong. (search.py has the stemmer, model.py the limits
    index_record reads, MAX_ALIASES.)"""
    return code_tag([__file__, signature_module.__file__, search_module.__file__, model_module.__file__])


def lesson_to_cache(lesson: IndexedLesson) -> dict[str, Any]:
    return {
        "type": lesson.type,
        "shape": lesson.shape,
        "message_evidence": sorted(lesson.message_evidence),
        "all_evidence": sorted(lesson.all_evidence),
        "other_shapes": list(lesson.other_shapes),
        "message_identity": sorted(lesson.message_identity),
        "all_identity": sorted(lesson.all_identity),
        "twin_key": lesson.twin_key,
        "explanation_evidence": sorted(lesson.explanation_evidence),
        "prose_evidence": sorted(lesson.prose_evidence),
    }


def lesson_from_cache(name: str, value: dict[str, Any]) -> IndexedLesson:
    return IndexedLesson(
        name=name,
        type=str(value["type"]),
        shape=str(value["shape"]),
        sorted_shape=sort_words(str(value["shape"])),
        message_evidence=frozenset(value["message_evidence"]),
        all_evidence=frozenset(value["all_evidence"]),
        other_shapes=tuple(value["other_shapes"]),
        message_identity=frozenset(value["message_identity"]),
        all_identity=frozenset(value["all_identity"]),
        twin_key=str(value["twin_key"]),
        explanation_evidence=frozenset(value["explanation_evidence"]),
        prose_evidence=frozenset(value["prose_evidence"]),
    )


def sort_words(text: str) -> str:
    return " ".join(sorted(text.split()))


def shape_ratio(first: str, second: str) -> float:
    """fuzz.ratio (0..100) of two (sorted) shapes; past FUZZY_CHARS, of their first FUZZY_CHARS characters."""
    if len(first) <= FUZZY_CHARS and len(second) <= FUZZY_CHARS:
        return fuzz.ratio(first, second)
    # ratio is 2 x common / (total length): the common part of the views, over the lengths of the whole shapes.
    first_view, second_view = first[:FUZZY_CHARS], second[:FUZZY_CHARS]
    return fuzz.ratio(first_view, second_view) * (len(first_view) + len(second_view)) / (len(first) + len(second))


def shape_partial_ratio(first: str, second: str) -> float:
    """fuzz.partial_ratio (0..100) of two shapes: the shorter aligned within the longer, in bounded views."""
    short, long = sorted((first, second), key=len)
    if not short or (len(short) <= FUZZY_NEEDLE and len(long) <= min(FUZZY_CHARS, FUZZY_AREA // len(short))):
        return fuzz.partial_ratio(first, second)
    needle = short[:FUZZY_NEEDLE]
    haystack = long[: min(FUZZY_CHARS, FUZZY_AREA // len(needle))]
    return fuzz.partial_ratio(needle, haystack) * len(needle) / len(short)


@dataclass
class Query:
    """A piece of error text to match, with its known words' rarity computed once per call."""

    shape: str
    evidence: frozenset[str]
    text: str
    known: dict[str, float] | None = None  # word -> idf, for words some lesson has
    known_mass: float = 0.0
    sorted_shape: str = ""
    slots: frozenset[str] = frozenset()  # signature.slot_words: quoted names and file names
    identity: frozenset[str] = frozenset()
    weight: float = 1.0  # a log line's share of its match (error_windows)
    # Computed from `known` when first asked for (LessonIndex.prepare sets them back to None).
    rarest: list[str] | None = None  # see `rarest_words`
    order: dict[str, int] | None = None  # each known word's place in `known`
    # shape_partial_ratio against each lesson key met in this call: lessons about one error template share their
    # shapes (the variable parts are placeholders), and a log's lines are aligned against each candidate's keys.
    # (A copy of the query, of the same shape, shares it.)
    partials: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sorted_shape = sort_words(self.shape)
        self.identity = identity_words(self.text)

    def rarest_words(self) -> list[str]:
        """The RAREST_WORDS rarest known words, slots aside (see `clues`): the same for every lesson of a call."""
        if self.rarest is None:
            known = self.known or {}
            self.rarest = heapq.nlargest(
                RAREST_WORDS, (w for w in known if w not in self.slots), key=lambda w: (known[w], w)
            )
        return self.rarest

    def partial_ratio(self, key: str) -> float:
        """shape_partial_ratio of this query's shape and a lesson key, aligned once per call."""
        value = self.partials.get(key)
        if value is None:
            value = self.partials[key] = shape_partial_ratio(self.shape, key)
        return value

    def weight_among(self, words: Set[str]) -> float:
        """The summed rarity of the known words that are among `words`. The smaller side is walked, but the weights
        are added in `known`'s order either way, so the float is the one a loop over `known` gives."""
        known = self.known or {}
        if len(words) >= len(known):
            return sum(weight for w, weight in known.items() if w in words)
        if self.order is None:
            self.order = {w: i for i, w in enumerate(known)}
        found = [w for w in words if w in known]
        found.sort(key=self.order.__getitem__)
        return sum(known[w] for w in found)


def query_of(text: str, text_shape: str | None = None, weight: float = 1.0) -> Query:
    """The query for a text (`text_shape`: its shape, when already known; `weight`: its share of a match)."""
    return Query(
        shape=shape(text) if text_shape is None else text_shape,
        evidence=evidence_words(text),
        text=text,
        slots=slot_words(text),
        weight=weight,
    )


class LessonIndex:
    """Signatures of all lessons, word rarity, and an inverted index for picking candidates fast."""

    def __init__(self) -> None:
        self.lessons: dict[str, IndexedLesson] = {}
        self._document_frequency: Counter[str] = Counter()
        self._type_frequency: Counter[str] = Counter()  # lessons per type key (type_specificity)
        self._holders: dict[str, set[str]] = {}
        self._twins: dict[str, set[str]] = {}  # twin key -> lessons: finds a new lesson's twin
        # Rarity changes whenever a lesson comes or goes; between changes it is computed once per word.
        self._idf: dict[str, float] = {}
        self._message_mass: dict[str, float] = {}
        self._explanation_mass: dict[str, float] = {}
        self._prepared: dict[str, tuple[tuple[Any, ...], IndexedLesson]] = {}
        # Signatures read from the side cache (name -> (fields hash, value)), and those this process made, to save.
        self.cached: dict[str, tuple[str, Any]] = {}
        self.made: dict[str, tuple[str, Any]] = {}

    def prepare_record(self, record: dict[str, Any]) -> IndexedLesson:
        """Index a record ahead of its commit, outside the store's lock: put() takes the result when the record
        that arrives says the same. Safe from any thread (one dict item is set)."""
        indexed = index_record(record)
        self._prepared[record["name"]] = (_indexed_fields(record), indexed)
        return indexed

    def prepare_changed(self, before: dict[str, Any], after: dict[str, Any]) -> bool:
        """prepare_record(after), unless it indexes the same fields as `before` (put() then reuses the signature it
        holds): whether it was prepared."""
        if _indexed_fields(after) == _indexed_fields(before):
            return False
        self.prepare_record(after)
        return True

    def forget_prepared(self, name: str) -> None:
        self._prepared.pop(name, None)

    def put(self, record: dict[str, Any]) -> None:
        self.remove(record["name"])
        prepared = self._prepared.get(record["name"])
        if prepared and prepared[0] == _indexed_fields(record):
            indexed = prepared[1]
            self.made[indexed.name] = (fields_hash(record), lesson_to_cache(indexed))
        else:
            indexed = self._cached_or_indexed(record)
        self.lessons[indexed.name] = indexed
        if indexed.twin_key:
            self._twins.setdefault(indexed.twin_key, set()).add(indexed.name)
        self._type_frequency[indexed.type] += 1
        self._idf.clear()
        self._message_mass.clear()
        self._explanation_mass.clear()
        for word in indexed.all_evidence:
            self._document_frequency[word] += 1
            self._holders.setdefault(word, set()).add(indexed.name)

    def _cached_or_indexed(self, record: dict[str, Any]) -> IndexedLesson:
        """The record's signature from the side cache when it was made from the same fields, else computed (and
        kept for the next save)."""
        name = record["name"]
        digest = fields_hash(record)
        hit = self.cached.get(name)
        if hit is not None and hit[0] == digest:
            try:
                return lesson_from_cache(name, hit[1])
            except (KeyError, TypeError, ValueError):
                pass  # a damaged entry: computed again
        indexed = index_record(record)
        self.made[name] = (digest, lesson_to_cache(indexed))
        return indexed

    def cache_entries(self) -> dict[str, tuple[str, Any]]:
        """Every current lesson's signature entry (for the side cache)."""
        entries = {}
        for name in self.lessons:
            entry = self.made.get(name) or self.cached.get(name)
            if entry is not None:
                entries[name] = entry
        return entries

    def remove(self, name: str) -> None:
        old = self.lessons.pop(name, None)
        if old is None:
            return
        twins = self._twins.get(old.twin_key)
        if twins is not None:
            twins.discard(name)
            if not twins:
                del self._twins[old.twin_key]
        self._type_frequency[old.type] -= 1
        if self._type_frequency[old.type] <= 0:
            del self._type_frequency[old.type]
        self._idf.clear()
        self._message_mass.clear()
        self._explanation_mass.clear()
        for word in old.all_evidence:
            self._document_frequency[word] -= 1
            if self._document_frequency[word] <= 0:
                del self._document_frequency[word]
                del self._holders[word]
            else:
                self._holders[word].discard(name)

    def twins(self, lesson: IndexedLesson) -> list[str]:
        """Stored lessons that a new lesson would duplicate (`lesson`: its signature, made before the store is
        held): the same error at another place or time (signature.twin_key: only folders, positions, addresses, hex
        and times may differ) with a compatible type. A message too short to say which error it is has none."""
        if not lesson.twin_key:
            return []
        return [
            name
            for name in sorted(self._twins.get(lesson.twin_key, ()))
            if not lesson.type or not self.lessons[name].type or self.lessons[name].type == lesson.type
        ]

    def idf(self, word: str) -> float:
        value = self._idf.get(word)
        if value is None:
            value = math.log((len(self.lessons) + 1) / (self._document_frequency.get(word, 0) + 0.5))
            self._idf[word] = value
        return value

    def type_specificity(self, kind: str) -> float:
        """How much a caller's type agreeing with a lesson's says, from 0 to 1: the type's rarity among the lessons
        over the rarity of a type no other lesson has. A type most lessons share ("runtime", "build") narrows little;
        given in full, it lifted every lesson of that type over the one whose author worded its type otherwise
        ("cmake configure"), which an assistant writing its own lessons usually does."""
        unique = math.log((len(self.lessons) + 1) / 1.5)
        if unique <= 0:
            return 1.0
        shared = math.log((len(self.lessons) + 1) / (self._type_frequency.get(kind, 0) + 0.5))
        return max(0.0, min(1.0, shared / unique))

    def same_fix(self, first: IndexedLesson, second: IndexedLesson) -> bool:
        """Whether two lessons explain an error alike: the idf-weighted Jaccard overlap of their explanations'
        evidence is at least SAME_FIX. Lessons that explain nothing are rivals of every other."""
        mass_a, mass_b = self.explanation_mass(first), self.explanation_mass(second)
        # The overlap is at most the smaller mass over the larger: most pairs are told apart by their masses.
        if not mass_a or not mass_b or min(mass_a, mass_b) < SAME_FIX * max(mass_a, mass_b):
            return False
        small, large = sorted((first.explanation_evidence, second.explanation_evidence), key=len)
        shared = sum(self.idf(word) for word in small if word in large)
        return shared >= SAME_FIX * (mass_a + mass_b - shared)

    def explanation_mass(self, lesson: IndexedLesson) -> float:
        value = self._explanation_mass.get(lesson.name)
        if value is None:
            value = self._explanation_mass[lesson.name] = sum(self.idf(w) for w in lesson.explanation_evidence)
        return value

    def message_mass(self, lesson: IndexedLesson) -> float:
        value = self._message_mass.get(lesson.name)
        if value is None:
            value = self._message_mass[lesson.name] = sum(self.idf(w) for w in lesson.message_evidence)
        return value

    # -- candidates ----------------------------------------------------------------------------------------
    def candidates(self, queries: Iterable[Query]) -> list[str]:
        """Lessons worth scoring in full: those sharing the most rare words with the queries (each word counted once,
        however many log lines repeat it). A word held by more than MAX_HOLDERS lessons is skipped, so the cost
        grows with the rare words' holders, not with the store (a scan of every lesson's shape cost 15 ms at 50k
        lessons and changed no answer the confidence keeps); when no word is that rare, the rarest one is used."""
        if len(self.lessons) <= CANDIDATES:
            return list(self.lessons)
        common = min(max(50, len(self.lessons) // 20), MAX_HOLDERS)  # words held by more lessons say little
        words = {word for query in queries for word in query.evidence if word in self._holders}
        rare = [word for word in words if len(self._holders[word]) <= common]
        if not rare and words:
            rare = [min(words, key=lambda word: (len(self._holders[word]), word))]
        if len(rare) == 1:  # one weight for all: `heaviest` would give the greatest names
            return heapq.nlargest(CANDIDATES, self._holders[rare[0]])
        weights: dict[str, float] = {}
        for word in rare:
            weight = self.idf(word)
            if not weights:  # the first word's holders, at once
                weights = dict.fromkeys(self._holders[word], weight)
                continue
            for name in self._holders[word]:
                weights[name] = weights.get(name, 0.0) + weight
        return heaviest(weights, CANDIDATES)

    # -- scoring -----------------------------------------------------------------------------------------
    def weigh_by_evidence(self, queries: list[Query]) -> None:
        """Scale each of a log's prepared line queries by how much evidence it holds: the number of its words some
        lesson has, over EVIDENCE_WORDS or the most any of the log's lines has, whichever is less (at most 1). A line
        of a word or two ("Aborting", an echoed `undefined`, a caret) is explained in full by any lesson that has
        them, and outscored the error line next to it; in a small store, where few words are known at all, the
        richest line still counts in full."""
        counts = [len(query.known or ()) for query in queries]
        # The richest of the error lines' own windows (a preceding line's window, weighted down, holds the error
        # line too, and is not a measure of it).
        full = min(EVIDENCE_WORDS, max((c for c, q in zip(counts, queries, strict=True) if q.weight >= 1), default=0))
        if full <= 0:
            return
        for query, count in zip(queries, counts, strict=True):
            query.weight *= min(1.0, count / full)

    def prepare(self, query: Query, count_unknown: bool = False) -> Query:
        query.known = {w: self.idf(w) for w in query.evidence if w in self._document_frequency}
        query.rarest = query.order = None
        # A quoted name is a slot (the user's key, file or variable, or a builtin the error is about): missing it
        # costs a lesson only SLOT_WEIGHT of its rarity, having it earns all of it (coverage capped at 1).
        query.known_mass = sum(v * (SLOT_WEIGHT if w in query.slots else 1.0) for w, v in query.known.items())
        if count_unknown:
            # For one error message: a word no lesson has is evidence against every lesson, unless it is a
            # quoted name (the user's own key, file or variable, which no lesson can know). Unquoted, it is
            # error vocabulary no lesson explains ("externally-managed-environment"): every score drops, and
            # an error no lesson covers stays under the threshold. (Not for log lines, full of such words.)
            unexplained = query.evidence - query.known.keys() - query.slots
            query.known_mass += UNKNOWN_WORD_WEIGHT * self.idf("") * len(unexplained)
        return query

    def message_coverage(self, query: Query, lesson: IndexedLesson) -> float:
        """Rarity-weighted share of the lesson message's evidence that the query has."""
        mass = self.message_mass(lesson)
        if not mass or query.known is None:
            return 0.0
        return query.weight_among(lesson.message_evidence) / mass

    def query_coverage(self, query: Query, lesson: IndexedLesson) -> float:
        """Rarity-weighted share of the query's words that the lesson explains anywhere (capped at 1: a slot the
        lesson has counts in full, one it lacks only at SLOT_WEIGHT)."""
        return share_of_query(query, lesson.all_evidence)

    def _partial_free(self, query: Query, lesson: IndexedLesson) -> tuple[float, float, float]:
        """(score without the partial term, the partial term's weight cap, the sorted ratio)."""
        if query.known is None:
            self.prepare(query)
        assert query.known is not None
        sorted_ratio = shape_ratio(query.sorted_shape, lesson.sorted_shape) / 100
        short, long = sorted((len(query.shape), len(lesson.shape)))
        damping = 0.4 + 0.6 * math.sqrt(short / long) if short > 8 else 1.0
        mass = self.message_mass(lesson)
        common = query.weight_among(lesson.message_evidence)
        lesson_coverage = common / mass if mass else 0.0
        dice = min(1.0, 2 * common / (mass + query.known_mass)) if mass + query.known_mass else 0.0
        query_coverage = self.query_coverage(query, lesson)
        base = (
            W_SORT * sorted_ratio
            + W_LESSON_COVERAGE * lesson_coverage
            + W_QUERY_COVERAGE * query_coverage
            + W_DICE * dice
        )
        return base, W_PARTIAL * damping, sorted_ratio

    def _partial(self, query: Query, lesson: IndexedLesson, cap: float, sorted_ratio: float) -> float:
        if min(len(query.shape), len(lesson.shape)) <= 8:
            return W_PARTIAL * sorted_ratio  # too short for a meaningful partial alignment
        best = query.partial_ratio(lesson.shape)
        for key in lesson.other_shapes:
            if len(key) > 8 and best < 100:
                best = max(best, KEY_DISCOUNT * query.partial_ratio(key))
        return cap * best / 100

    def match(self, query: Query, lesson: IndexedLesson, query_type: str = "") -> float:
        """The match score; `query_type` is the caller's error type as a `type_key`, "" when unknown."""
        base, cap, sorted_ratio = self._partial_free(query, lesson)
        score = (base + self._partial(query, lesson, cap, sorted_ratio)) * identity_factor(query, lesson)
        untyped = score / (1 - W_TYPE)
        # The type is a soft prior: a caller's own wording of it ("db" for "database") must not score worse than
        # giving none, so a differing type falls back to the untyped score; an equal one adds a little on top, as
        # much as the type narrows the store (type_specificity).
        if query_type and same_type(query_type, lesson.type):
            return max(untyped, score + W_TYPE * self.type_specificity(lesson.type))
        return untyped

    def best_match(self, queries: list[Query], lesson: IndexedLesson) -> tuple[float, Query | None]:
        """The best-matching query (no type) for a lesson. Two bounds skip work that cannot change the winner:
        the queries are read heaviest first, and one whose weight times MATCH_CEILING cannot beat what a query
        already read is sure to score (its score without the partial term) is not read at all (a log's preceding
        lines and thin lines weigh little); the costly partial alignment is run in order of each read query's
        bound, until no bound beats the best score."""
        floor = 0.0  # a score the best match is sure to reach
        bounds: list[tuple[float, int, float, float, float, float, Query]] = []
        for position in sorted(range(len(queries)), key=lambda i: -queries[i].weight):
            query = queries[position]
            if query.weight * MATCH_CEILING <= floor:
                break
            base, cap, sorted_ratio = self._partial_free(query, lesson)
            factor = identity_factor(query, lesson)
            floor = max(floor, base * factor * query.weight)
            bounds.append((-(base + cap) * query.weight, position, base, cap, sorted_ratio, factor, query))
        bounds.sort(key=lambda b: b[:2])  # the bound, then the query's place: ties go to the earlier line
        best, winner = 0.0, None
        for _, _, base, cap, sorted_ratio, factor, query in bounds:
            if (base + cap) * query.weight <= best:
                break
            score = (base + self._partial(query, lesson, cap, sorted_ratio)) * factor
            score *= query.weight
            if score > best:
                best, winner = score, query
        return best / (1 - W_TYPE), winner


def heaviest(weights: dict[str, float], count: int) -> list[str]:
    """The `count` names of greatest weight, heaviest first, a tie going to the greater name: what
    `heapq.nlargest(count, weights, key=lambda name: (weights[name], name))` gives, without a Python call per name
    (a call's candidates may be picked among thousands of holders of its words)."""
    if not weights or count <= 0:
        return []
    ordered = sorted(weights.values(), reverse=True)
    threshold = ordered[min(count, len(ordered)) - 1]
    above = sorted(
        (name for name, weight in weights.items() if weight > threshold),
        key=lambda name: (weights[name], name),
        reverse=True,
    )
    tied = [name for name, weight in weights.items() if weight == threshold]
    return above + heapq.nlargest(count - len(above), tied)


def clues(index: LessonIndex, query: Query | None, lesson: IndexedLesson) -> Clues:
    """Signs that a match is right beyond its score: the lesson explains the query's rarest word (a slot aside);
    the lesson names the query's error class (1.0 when the query names none); the share of the lesson message's
    words that the query has (a near miss of the same tool, "column ... does not exist" for "relation ... does not
    exist", has a word the query lacks); the share of the query the lesson explains anywhere; and the shares of the
    query and of its rarest words that the lesson's prose explains (its observations and verification steps
    outside quotes). The prose tells a lesson that explains the error from one that only repeats its words: an
    assistant's summary ("the deploy script crashed with KeyError because ...") shares few words with the raw
    error, and its message coverage looks like a near miss's, but its observations say what the error means."""
    if query is None or query.known is None:
        return 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    known = query.known
    rarest = query.rarest_words()
    rare_mass = sum(known[w] for w in rarest)

    def explains_rarest(words: Set[str]) -> float:
        return sum(known[w] for w in rarest if w in words) / rare_mass if rare_mass else 0.0

    names_class = 1.0 if not query.identity or query.identity & lesson.all_identity else 0.0
    return (
        explains_rarest(lesson.all_evidence),
        names_class,
        index.message_coverage(query, lesson),
        index.query_coverage(query, lesson),
        share_of_query(query, lesson.prose_evidence),
        explains_rarest(lesson.prose_evidence),
    )


def share_of_query(query: Query, words: Set[str]) -> float:
    """Rarity-weighted share of the query's known words that are among `words` (capped at 1: a slot counts in
    full there, and only at SLOT_WEIGHT in the query's mass)."""
    if not query.known_mass or query.known is None:
        return 0.0
    return min(1.0, query.weight_among(words) / query.known_mass)


def identity_factor(query: Query, lesson: IndexedLesson) -> float:
    """How much a match keeps of its score when the two name different errors: the query names its error
    (`KeyError`), the lesson's message names one too (`IndexError`), and nothing the lesson says names the
    query's. A lesson that names no error (a summary in its own words) is not held against."""
    if query.identity and lesson.message_identity and not query.identity & lesson.all_identity:
        return IDENTITY_CONFLICT
    return 1.0


def error_windows(log: str) -> list[tuple[str, str, float]]:
    """The lines of a log worth matching, each with its shape and its share of a match: error lines (with the one
    or two after them), deduplicated by shape."""
    # Past MAX_LINE_CHARS a line is data (a minified bundle, a JSON dump, a long command line): its start holds
    # the message if there is one.
    # Any line break: a log copied from a terminal or a Windows tool may end its lines with a lone \r.
    lines = [line.strip()[:MAX_LINE_CHARS].rstrip() for line in strip_ansi(log).splitlines()]
    lines = [line for line in lines if line]
    lowered = [line.lower() for line in lines]
    plain = [i for i, line in enumerate(lowered) if not is_wrapper(line)]
    # The last errors in a log are usually the ones that matter: error lines are looked for from the end, and only
    # as far back as needed.
    hinted: dict[int, bool] = {}  # each line is searched for an error hint once

    def names_error(i: int) -> bool:
        if i not in hinted:
            hinted[i] = ERROR_HINT.search(lowered[i]) is not None and SUB_DIAGNOSTIC.match(lowered[i]) is None
        return hinted[i]

    def states_error(j: int) -> bool:
        """Whether the line before an error line may be the error in the tool's own words (see below)."""
        return j in unwrapped and not names_error(j) and SUB_DIAGNOSTIC.match(lowered[j]) is None

    found = (i for i in reversed(plain) if names_error(i))
    first = next(found, None)
    # When no line names an error, the last lines are the likeliest. The line just before an error line is tried
    # too, at a discount: a tool often states the error in its own words and then a line that names it
    # ("error: linking failed").
    unwrapped = set(plain)
    hits: Iterable[tuple[int, float]] = (
        ((i, 1.0) for i in reversed(plain[-TAIL_LINES:]))
        if first is None
        else (
            (j, 1.0 if j == i else PRECEDING_WEIGHT)
            for i in chain([first], found)
            for j in (i, i - 1)
            if (j == i and ERROR_COUNT.search(lowered[i]) is None) or (j < i and states_error(j))
        )
    )
    picked: list[tuple[str, str, float]] = []
    seen: set[str] = set()
    windows: set[str] = set()  # a window met again has the same shape: not shaped twice
    shaped = 0
    for i, weight in islice(hits, MAX_HIT_LINES):
        after = range(i + 1, min(i + 3, len(lines)))
        following = [lines[j] for j in takewhile(lambda j: not is_wrapper(lowered[j]), after)]
        for size in range(len(following) + 1):
            window = " ".join([lines[i], *following[:size]])
            if window in windows:
                continue
            windows.add(window)
            key = shape(window)
            shaped += len(window)
            if key not in seen:
                seen.add(key)
                picked.append((window, key, weight))
        if len(picked) >= MAX_ERROR_LINES or shaped >= MAX_SHAPED_CHARS:
            break
    picked.reverse()
    return picked


def error_lines(log: str) -> list[str]:
    """The lines of a log worth matching (see error_windows)."""
    return [window for window, _, _ in error_windows(log)]
