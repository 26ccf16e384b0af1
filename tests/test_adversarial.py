"""Hostile text: every text path takes time linear in its input (issue 14).

Every function that reads error text, and search_nodes and the "did you mean" of both services, gets long inputs
built to defeat regular expressions (`"a." * n`, `"/" * n`, one giant token, many tiny lines...) and must answer
within a bound far below what the quadratic code took (32 KB took 13-27 s; 200 KB would have taken minutes and
1 MB hours) yet generous for a loaded 2-core machine. A scaling check compares n with 4n characters (best of three):
linear code takes about 4x as long, quadratic 16x. The rewritten patterns are also checked against the plain ones
they replace, which match the same text (slowly) and serve as the reference here.
"""

from __future__ import annotations

import re
import string
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.types import TextContent
from pydantic import ValidationError

from lessons import ranking, service, signature
from lessons.model import MAX_MESSAGE_CHARS, ErrorQuery, LessonChanges, LessonInput, SuccessReport
from memory_graph.app import Services, services_for_folder
from memory_graph.config import Settings
from memory_graph.errors import InvalidInputError, NotFoundError
from memory_graph.model import Entity, ObservationAddition, ObservationDeletion, Relation
from memory_graph.search import MAX_QUERY_CHARS
from memory_graph.server import build_app

KB = 1024
MB = 1024 * KB
LONG = 200 * KB
# Seconds for one call on LONG characters: a quadratic pattern takes minutes there, the linear code about 1.2 s on
# an idle 2-core machine and 2.1 s on a busy one (a bound of 2 s failed there); linearity is `scaling`'s to check.
LONG_BOUND = 5.0
HOSTILE_OVER_ORDINARY = 20  # create_lesson on hostile text, at most this many times the same on ordinary text
CONTEXT_BOUND = 6.0  # seconds for get_lesson_recommendations on a 1 MB context
SCALING_LIMIT = 8.0  # 4x the text: about 4x the time when linear, 16x when quadratic

# Repeated units (None: one giant token of varied letters). The last ones are where the plain patterns were
# quadratic: a scheme-like run, a file-name-like run, unterminated escape sequences and quotes.
HOSTILE: dict[str, str | None] = {
    "letters": "a",
    "dotted": "a.",
    "slashes": "/",
    "colons": "::",
    "backslashes": "\\",
    "parentheses": "(",
    "digits": "0123456789",
    "punctuation": string.punctuation,
    "giant-token": None,
    "tiny-lines": "x\n",
    "error-words": "Error: ",
    "error-lines": "Error: it failed at /srv/app/main.py:12\n",
    "dashed": "a-",
    "underscores": "_",
    "scheme-like": "a.b+c-",
    "file-names": "x.py-",
    "ipv6-like": "1:",
    "osc-escapes": "\x1b]",
    "csi-escapes": "\x1b[1",
    "curly-quotes": "‘",
    "open-double-quotes": "“a",
    "dotted-numbers": "1.",
}

KEYERROR = "KeyError: 'user_id'"
LESSONS: list[dict[str, Any]] = [
    {
        "name": "PY_KEYERROR",
        "errorPattern": {"type": "runtime", "message": KEYERROR, "context": "reading a request"},
        "observations": ["The dict has no such key.", "Fix: use dict.get or check the key first."],
        "verificationSteps": [{"command": "pytest -k user", "expectedOutput": "passed"}],
    },
    {
        "name": "NODE_EADDRINUSE",
        "errorPattern": {"type": "network", "message": "Error: listen EADDRINUSE: address already in use :::3000"},
        "observations": ["Another process listens on the port.", "Fix: stop it (lsof -i :3000) or use PORT=3001."],
    },
    {
        "name": "MAKE_NO_RULE",
        "errorPattern": {"type": "build", "message": "make: *** No rule to make target 'src/a.o'.  Stop."},
        "observations": ["A prerequisite file is missing or misspelled in the Makefile."],
    },
    {
        "name": "RUST_E0382",
        "errorPattern": {"type": "build", "message": "error[E0382]: borrow of moved value: `config`"},
        "observations": ["The value was moved earlier; clone it or borrow it instead."],
    },
    {
        "name": "PIP_NO_MATCHING_DIST",
        "errorPattern": {"type": "dependency", "message": "ERROR: No matching distribution found for reqeusts"},
        "observations": ["Misspelled project name or a pin that was never published."],
    },
]


# Kinds left out of the test of every function (to keep this file fast): each costs the text functions what a kind
# kept costs them, or has its own scaling test.
SIMILAR = {
    "error-lines",
    "dashed",
    "underscores",
    "scheme-like",
    "ipv6-like",
    "csi-escapes",
    "curly-quotes",
    "open-double-quotes",
    "dotted-numbers",
}


# Every pattern skips a text without the characters its matches need: each hostile text ends with all of them, so
# that every pattern reads the hostile part.
NEEDED = " x://y a/b.py C:\\d 1:2-3"


def hostile(kind: str, size: int) -> str:
    unit = HOSTILE[kind]
    size -= len(NEEDED)
    if unit is None:
        return "".join(chr(0x61 + (i * 7 + i // 26) % 26) for i in range(size)) + NEEDED
    return (unit * (size // len(unit) + 1))[:size] + NEEDED


def timed(fn: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - start, result


def within(bound: float, what: str, fn: Callable[..., Any], *args: Any) -> Any:
    elapsed, result = timed(fn, *args)
    assert elapsed < bound, f"{what} took {elapsed:.2f} s (bound {bound} s)"
    return result


def scaling(fn: Callable[[str], Any], kind: str) -> float:
    """Time for 4n characters over time for n, best of three each, n large enough to be measured."""

    def best(text: str) -> float:
        return min(timed(fn, text)[0] for _ in range(3))

    size = 8 * KB
    small = best(hostile(kind, size))
    while small < 0.01 and size < 256 * KB:
        size *= 2
        small = best(hostile(kind, size))
    return best(hostile(kind, 4 * size)) / small


def open_with_lessons(folder: Path) -> Services:
    services = services_for_folder(folder)
    services.store.open()
    for lesson in LESSONS:
        services.lessons.create_lesson(LessonInput.model_validate(lesson))
    return services


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Services:
    return open_with_lessons(tmp_path_factory.mktemp("adversarial"))


# -- every text function, on 200 KB of each kind -----------------------------------------------------------------
@pytest.mark.parametrize("kind", [kind for kind in HOSTILE if kind not in SIMILAR])
def test_every_text_function_is_fast_on_long_hostile_text(kind: str) -> None:
    text = hostile(kind, LONG)
    functions: list[tuple[str, Callable[[str], Any]]] = [
        ("strip_ansi", signature.strip_ansi),
        ("shape", signature.shape),
        ("evidence_words", signature.evidence_words),
        ("quoted_words", signature.quoted_words),
        ("query_of", ranking.query_of),
        ("error_lines", ranking.error_lines),
        ("type_key", ranking.type_key),
        ("sort_words", ranking.sort_words),
    ]
    for name, fn in functions:
        within(LONG_BOUND, f"{name}({kind!r} x {LONG})", fn, text)
    text_shape = signature.shape(text)
    lesson_shape = signature.shape(KEYERROR)
    for first, second in [(text_shape, text_shape), (text_shape, lesson_shape), (lesson_shape, text_shape), ("", text)]:
        within(LONG_BOUND, f"shape_ratio on {kind!r}", ranking.shape_ratio, first, second)
        within(LONG_BOUND, f"shape_partial_ratio on {kind!r}", ranking.shape_partial_ratio, first, second)


# -- the services: find, create, recommend ---------------------------------------------------------------------------
SERVICE_KINDS = ["dotted", "slashes", "giant-token", "tiny-lines", "error-lines"]


@pytest.mark.parametrize("kind", SERVICE_KINDS)
def test_find_similar_errors_is_fast_on_a_long_message(services: Services, kind: str) -> None:
    query = ErrorQuery(type="runtime", message=hostile(kind, MAX_MESSAGE_CHARS))
    within(LONG_BOUND, f"find({kind!r})", services.lessons.find_similar_errors, query)
    with pytest.raises(ValidationError, match="message"):  # a whole log goes to get_lesson_recommendations
        ErrorQuery(type="runtime", message=hostile(kind, MAX_MESSAGE_CHARS + 1))


def test_find_similar_errors_is_fast_on_a_long_context_and_stack_trace(services: Services) -> None:
    query = ErrorQuery(message=KEYERROR, context=hostile("dotted", LONG), stackTrace=hostile("slashes", LONG))
    found = within(2 * LONG_BOUND, "find(long context)", services.lessons.find_similar_errors, query)
    assert found.matches and found.matches[0].name == "PY_KEYERROR"


@pytest.mark.parametrize("kind", ["dotted", "slashes", "tiny-lines", "error-lines"])
def test_recommendations_are_fast_on_a_1_mb_context(services: Services, kind: str) -> None:
    # The error at the end of a hostile log is still found.
    tail = "\nError: listen EADDRINUSE: address already in use :::3000\n"
    context = hostile(kind, MB - len(tail)) + tail
    found = within(
        CONTEXT_BOUND, f"recommendations({kind!r} x 1 MB)", services.lessons.get_lesson_recommendations, context
    )
    assert found.recommendations and found.recommendations[0].name == "NODE_EADDRINUSE"


def test_a_hostile_lesson_costs_little_to_create_reload_and_match_against(tmp_path: Path) -> None:
    services = open_with_lessons(tmp_path)

    def lesson_of_text(name: str, text: str) -> LessonInput:
        return LessonInput.model_validate(
            {"name": name, "errorPattern": {"type": "runtime", "message": text}, "observations": [text[-32 * KB :]]}
        )

    # Measured against the same call on ordinary text of the same length, on this machine now: a loaded CI
    # machine took 3 s where a quiet one takes 1.3 s, while the quadratic code took minutes.
    benign = " ".join(f"request{i % 997} failed on server{i % 89}" for i in range(LONG // 30))[:LONG]
    ordinary, _ = timed(services.lessons.create_lesson, lesson_of_text("ORDINARY", benign))
    text = hostile("dotted", LONG)
    bound = max(LONG_BOUND, HOSTILE_OVER_ORDINARY * ordinary)
    within(bound, "create_lesson(hostile)", services.lessons.create_lesson, lesson_of_text("HOSTILE", text))
    # Lessons are indexed again when a process starts: a hostile one must not make that slow either.
    reopened = within(3 * LONG_BOUND, "reopening", open_reopened, tmp_path)
    for current, kind in [(services, "dotted"), (reopened, "slashes")]:
        query = ErrorQuery(type="runtime", message=hostile(kind, MAX_MESSAGE_CHARS))
        within(LONG_BOUND, f"find({kind!r}) among hostile lessons", current.lessons.find_similar_errors, query)
        found = current.lessons.find_similar_errors(ErrorQuery(message="KeyError: 'session'"))
        assert found.matches[0].name == "PY_KEYERROR"


def open_reopened(folder: Path) -> Services:
    services = services_for_folder(folder)
    services.store.open()
    return services


def test_error_text_is_read_before_the_store_is_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While a lock is held every other client waits: the slow part of each call (reading the text, the fuzzy
    "did you mean") runs before it is taken or after it is released."""
    services = open_with_lessons(tmp_path)
    store = services.store
    held: list[str] = []
    for method in ("transaction", "reading"):
        original = getattr(store, method)

        @contextmanager
        def holding(original: Callable[[], Any] = original, method: str = method) -> Iterator[Any]:
            held.append(method)  # from the lock's taking to its release, after the commit
            try:
                with original() as value:
                    yield value
            finally:
                held.pop()

        monkeypatch.setattr(store, method, holding)
    slow_under_lock: list[str] = []
    spied = [
        (ranking, "index_record"),
        (ranking, "twin_key"),  # finding a new lesson's twins
        (service, "query_of"),
        (service, "error_windows"),
        (service, "closest_name"),
    ]
    for module, name in [*spied, (service, "evidence_words")]:
        original = getattr(module, name)

        def spy(*args: Any, original: Callable[..., Any] = original, name: str = name) -> Any:
            if held:
                slow_under_lock.append(f"{name} under {held[-1]}")
            return original(*args)

        monkeypatch.setattr(module, name, spy)
    text = hostile("dotted", 16 * KB)
    services.lessons.create_lesson(
        LessonInput.model_validate({"name": "HOSTILE", "errorPattern": {"type": "runtime", "message": text}})
    )
    services.lessons.find_similar_errors(ErrorQuery(message=text, context=text))
    services.lessons.get_lesson_recommendations(text)
    with pytest.raises(NotFoundError, match='Did you mean "HOSTILE"'):
        services.lessons.update_lesson_success(SuccessReport(lessonName="HOSTLE", success=True))
    # A change to a stored lesson's text is indexed before the lock too: a merge into a twin, update_lesson, and
    # the alias a success teaches.
    message = f"ValueError: the record is not valid: {text}"
    for name in ("LONG", "LONG_AGAIN"):
        created = services.lessons.create_lesson(
            LessonInput.model_validate(
                {"name": name, "errorPattern": {"type": "runtime", "message": message}, "observations": [name]}
            )
        )
    assert created.merged and created.name == "LONG"
    services.lessons.update_lesson(LessonChanges(name="LONG", addObservations=[text]))
    found = services.lessons.find_similar_errors(ErrorQuery(message=f"ValueError: the record is not valid: {text}!"))
    assert found.matches[0].name == "LONG"
    updated = services.lessons.update_lesson_success(SuccessReport(lessonName="LONG", success=True))
    assert updated.lesson.aliases, "the lookup's wording was not learned"
    assert slow_under_lock == []


# -- scaling: 4x the text, about 4x the time ----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["dotted", "dashed", "osc-escapes", "curly-quotes"])
def test_signature_time_grows_linearly(kind: str) -> None:
    for fn in (signature.shape, signature.evidence_words):
        ratio = scaling(fn, kind)
        assert ratio < SCALING_LIMIT, f"{fn.__name__}: 4x {kind!r} took {ratio:.1f}x as long"


@pytest.mark.parametrize("kind", ["dotted", "slashes", "error-lines"])
def test_service_time_grows_linearly(services: Services, kind: str) -> None:
    lessons = services.lessons
    paths: list[tuple[str, Callable[[str], Any]]] = [
        ("find_similar_errors", lambda text: lessons.find_similar_errors(ErrorQuery(message=text))),
        ("get_lesson_recommendations", lessons.get_lesson_recommendations),
    ]
    for name, fn in paths:
        ratio = scaling(fn, kind)
        assert ratio < SCALING_LIMIT, f"{name}: 4x {kind!r} took {ratio:.1f}x as long"


# -- properties: never raise, stay bounded, and match what the plain patterns match --------------------------------
PUNCTUATION_RICH = string.punctuation + " \t\n\x1b\x07aZ09_‘’“”" + "ſKé٣"
TEXTS = st.one_of(
    st.text(max_size=400),
    st.text(alphabet=PUNCTUATION_RICH, max_size=400),
    st.builds(
        lambda unit, count: unit * count,
        st.text(alphabet=PUNCTUATION_RICH, min_size=1, max_size=6),
        st.integers(1, 600),
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXTS)
def test_signature_functions_never_raise_and_stay_bounded(text: str) -> None:
    start = time.perf_counter()
    assert signature.strip_ansi(text) == PLAIN_ANSI.sub("", text)
    sig = signature.signature(text)
    assert sig.shape == sig.shape.strip() and "  " not in sig.shape
    assert all(word and not word.isspace() for word in sig.evidence)
    assert all(word == word.lower() for word in signature.quoted_words(text))
    query = ranking.query_of(text)
    assert (query.shape, query.evidence) == (sig.shape, sig.evidence)
    assert all(isinstance(line, str) and line for line in ranking.error_lines(text))
    assert 0 <= ranking.shape_partial_ratio(sig.shape, "keyerror: <q>") <= 100
    assert 0 <= ranking.shape_ratio(query.sorted_shape, "<q> keyerror:") <= 100
    ranking.type_key(text)
    assert time.perf_counter() - start < 1.0


# The patterns as they were before they were made linear: the same matches, found in quadratic time.
PLAIN_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>`]+", re.IGNORECASE)
PLAIN_PATH = re.compile(
    r"(?:[A-Za-z]:)?(?:[~.]{0,2}[\\/])?(?:[\w.@+-]+[\\/])+[\w.@+-]*"
    r"|\b[\w-]+\.(?:py|pyc|js|mjs|cjs|ts|tsx|jsx|json|c|h|cc|cpp|hpp|rs|go|java|class|jar|rb|pl|pm|php|cs|kt|"
    r"swift|sh|toml|ya?ml|lock|cfg|ini|txt|md|html|css|o|so|a|dll|exe|log|cmake|gradle|xml|sql|csv)\b"
)
PLAIN_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
PLAIN_QUOTED = re.compile(r"'([^'\n]{1,80})'|\"([^\"\n]{1,80})\"|`([^`\n]{1,80})`|‘([^’\n]{1,80})’|“([^”\n]{1,80})”")
PATHISH = st.lists(
    st.sampled_from(
        [
            "a",
            "Z",
            "1",
            "_",
            "-",
            "--",
            ".",
            "..",
            "@",
            "+",
            "/",
            "\\",
            "~",
            ":",
            " ",
            "C:",
            "py",
            ".py",
            ".c",
            ".a",
            "x.py",
            "-x.js",
            ".json",
            ".yml",
            "~/",
            "./",
            "../",
            ".~/",
            "é",
            "٣",
            "=",
            "'",
            "\n",
        ]
    ),
    max_size=30,
).map("".join)
URLISH = st.lists(
    st.sampled_from(["a", "h", "http", "://", ":", "/", "1", "+", ".", "-", " ", "'", "K", "ſ", "_", "é", "<", "s3"]),
    max_size=30,
).map("".join)
ANSIISH = st.lists(
    st.sampled_from(["\x1b", "[", "]", "\x07", "1", ";", "?", " ", "m", "a", "\x1b[", "\x1b]"]), max_size=30
).map("".join)
QUOTISH = st.lists(st.sampled_from(["'", '"', "`", "‘", "’", "“", "”", "a", " ", "\n", "b" * 40]), max_size=12).map(
    "".join
)


def plain_file_name(match: re.Match[str]) -> str:
    return " " + re.split(r"[\\/]", match.group(0).rstrip("\\/"))[-1] + " "


@settings(max_examples=400, deadline=None)
@given(PATHISH, URLISH, ANSIISH, QUOTISH)
def test_the_linear_patterns_match_what_the_plain_ones_match(path: str, url: str, ansi: str, quoted: str) -> None:
    for text in (path, url, path + url):
        assert signature._replace(signature.PATH, text, " <path> ") == PLAIN_PATH.sub(" <path> ", text)
        assert signature._replace(signature.PATH, text, signature._file_name) == PLAIN_PATH.sub(plain_file_name, text)
        assert signature._replace(signature.URL, text, " <url> ") == PLAIN_URL.sub(" <url> ", text)
    assert signature.strip_ansi(ansi) == PLAIN_ANSI.sub("", ansi)
    assert [m.span() for m in signature.QUOTED.finditer(quoted)] == [m.span() for m in PLAIN_QUOTED.finditer(quoted)]


# Runs of non-space characters around the run-wise patterns' needed characters, apart by every kind of white space.
RUNISH = st.lists(
    st.sampled_from(
        [
            *["a", "f", "1", "_", "-", ".", "/", "\\", ":", "::", "[", "]", "@", "~", "C:", ".py", "x.py", "-x.js"],
            *["://", "http", "127.0.0.1", "::1", ":80", "é", "٣", "'"],
            *[" ", "\t", "\n", "\x0b", "\x1c", "\x85", "\xa0", "\u2028", "\u3000"],
        ]
    ),
    max_size=30,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(RUNISH)
def test_patterns_replaced_run_by_run_give_what_replacing_in_the_whole_text_gives(text: str) -> None:
    for pattern in signature._RUNS:
        assert signature._replace(pattern, text, " <x> ") == pattern.sub(
            "\\g<pre> <x> " if "pre" in pattern.groupindex else " <x> ", text
        )


# -- search_nodes and "did you mean" -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> Services:
    """3,000 entities that all hold the same words (every query word narrows nothing), one with a NUL."""
    services = services_for_folder(tmp_path_factory.mktemp("crowded"))
    services.store.open()
    entities = [
        Entity(name=f"entity-{i}", entityType="person", observations=[f"alpha works at acme, number {i}"])
        for i in range(3000)
    ]
    entities.append(Entity(name="with-nul", entityType="note", observations=["before\x00after"]))
    entities.append(Entity(name="n" * LONG, entityType="note", observations=["a very long name"]))
    services.graph.create_entities(entities)
    return services


def test_a_long_repeated_search_query_costs_what_its_distinct_words_cost(crowded: Services) -> None:
    query = ("alpha works " * MAX_QUERY_CHARS)[:MAX_QUERY_CHARS].strip()
    crowded.graph.search_nodes("warm the index up")
    tracemalloc.start()
    try:
        found = within(1.0, "search_nodes(4 KB repeated)", crowded.graph.search_nodes, query)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found.entities  # every entity holds both words
    assert peak < 16 * MB, f"peak {peak / MB:.0f} MB for two distinct words"
    distinct = " ".join(f"w{i}" for i in range(MAX_QUERY_CHARS // 6))
    assert not within(1.0, "search_nodes(4 KB distinct words)", crowded.graph.search_nodes, distinct).entities
    for kind in ["dotted", "punctuation", "colons", "giant-token"]:
        within(1.0, f"search_nodes({kind!r})", crowded.graph.search_nodes, hostile(kind, MAX_QUERY_CHARS))


def test_an_over_long_search_query_is_refused_with_what_to_send_instead(crowded: Services) -> None:
    with pytest.raises(InvalidInputError) as caught:
        crowded.graph.search_nodes("alpha " * 10_000)
    message = str(caught.value)
    assert "query" in message and "60,000" in message and f"{MAX_QUERY_CHARS:,}" in message
    assert "words" in message and "open_nodes" in message
    assert len(crowded.graph.search_nodes("a" * MAX_QUERY_CHARS).entities) == 0


def test_a_nul_query_matches_only_text_that_holds_a_nul(crowded: Services) -> None:
    assert [e.name for e in crowded.graph.search_nodes("\x00").entities] == ["with-nul"]
    assert [e.name for e in crowded.graph.search_nodes("e\x00a").entities] == ["with-nul"]
    assert crowded.graph.search_nodes("\x00\x00").entities == []
    assert crowded.graph.search_nodes("person\x00alpha").entities == []  # would span two fields


def test_a_nul_query_follows_the_fields_as_they_change(tmp_path: Path) -> None:
    services = services_for_folder(tmp_path)
    services.store.open()
    graph = services.graph
    graph.create_entities([Entity(name="n", entityType="t", observations=["x\x00y"])])
    assert [e.name for e in graph.search_nodes("x\x00y").entities] == ["n"]
    # The same text joined, other fields: "x" and "y" are two observations now, and no field holds "x\0y".
    graph.add_observations([ObservationAddition(entityName="n", contents=["x", "y"])])
    graph.delete_observations([ObservationDeletion(entityName="n", observations=["x\x00y"])])
    assert graph.search_nodes("x\x00y").entities == []
    assert [e.name for e in graph.search_nodes("x y").entities] == ["n"]


def test_did_you_mean_stays_fast_for_huge_names(crowded: Services, services: Services) -> None:
    graph = crowded.graph
    for name in ["x" * MB, "entity-" * (LONG // 7), hostile("dotted", LONG)]:
        hint = within(1.0, "suggest(huge name)", graph.suggest, name)
        assert "Names are exact" in hint
        with pytest.raises(NotFoundError):
            within(
                1.0,
                "create_relations(huge name)",
                graph.create_relations,
                [Relation.model_validate({"from": name, "to": "entity-1", "relationType": "knows"})],
            )
    assert 'Did you mean "entity-12"' in graph.suggest("entity-12x")
    assert 'Did you mean "entity-12"' in graph.suggest("ENTITY-12")
    lessons = services.lessons
    for name in ["x" * MB, hostile("slashes", LONG)]:
        with pytest.raises(NotFoundError, match="No lesson named"):
            within(
                1.0,
                "update_lesson_success(huge name)",
                lessons.update_lesson_success,
                SuccessReport(lessonName=name, success=True),
            )
    with pytest.raises(NotFoundError, match='Did you mean "PY_KEYERROR"'):
        lessons.update_lesson_success(SuccessReport(lessonName="PY_KEYEROR", success=True))


# -- through MCP ------------------------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_mcp_refuses_an_over_long_search_query_clearly(tmp_path: Path) -> None:
    app = build_app(Settings.from_env({"MEMORY_FILE_PATH": str(tmp_path / "memory.json")}, cwd=tmp_path))
    async with Client(app.server) as client:
        result = await client.call_tool("search_nodes", {"query": "alpha " * 1_000})
        fine = await client.call_tool("search_nodes", {"query": "alpha " * 600})
    assert result.is_error
    content = result.content[0]
    assert isinstance(content, TextContent)
    text = content.text
    assert "query is 6,000 characters" in text and f"at most {MAX_QUERY_CHARS:,}" in text and "open_nodes" in text
    assert not fine.is_error
