"""Ranking pieces: the success statistic, error-line extraction, and identifier-sensitive matching."""

from __future__ import annotations

from pathlib import Path

import pytest

from lessons.model import MAX_ALIASES, LessonInput
from lessons.ranking import (
    CANDIDATES,
    RECENCY_DECAY,
    LessonIndex,
    combined_score,
    error_lines,
    margins,
    query_of,
    same_type,
    success_statistic,
    type_key,
    unquoted,
)
from lessons.signature import shape
from memory_graph.app import services_for_folder


def test_a_lucky_one_for_one_does_not_beat_a_proven_record() -> None:
    lucky, proven, new = success_statistic(1, 1), success_statistic(95, 100), success_statistic(0, 0)
    assert new == 0.5
    assert lucky < proven
    assert combined_score(0.9, lucky) < combined_score(0.9, proven)
    # a new lesson that matches exactly is not buried by a proven but weakly related one
    assert combined_score(1.0, new) > combined_score(0.6, success_statistic(100, 100))


def test_recent_outcomes_weigh_more() -> None:
    successes = attempts = 0.0
    for outcome in [True] * 20 + [False] * 5:
        successes = successes * RECENCY_DECAY + outcome
        attempts = attempts * RECENCY_DECAY + 1
    assert success_statistic(successes, attempts) < success_statistic(20, 25)


def test_error_lines_skip_ci_wrappers_and_keep_the_error() -> None:
    log = "\n".join(
        [
            "$ python3 job.py",
            "Traceback (most recent call last):",
            '  File "/srv/app/job.py", line 3, in <module>',
            "KeyError: 'region'",
            "Error: Process completed with exit code 1.",
        ]
    )
    lines = error_lines(log)
    assert "KeyError: 'region'" in lines
    assert not any("exit code" in line for line in lines)


def test_error_lines_leave_out_the_commands_that_were_run() -> None:
    """A command echoed by a prompt, `set -x`, a CI step or npm is input, not output: matched as an error line, a
    lesson mentioning the same tool explained all of it."""
    commands = [
        "$ bash build.sh",
        "dev@laptop:~/site$ npm run build",
        "+ bash build.sh",
        "Run bash build.sh",
        "Step 3/8 : RUN bash build.sh",
        "> site@1.0.0 build",
    ]
    for command in commands:
        log = f"{command}\nbuild.sh: line 3: popd: directory stack empty\nbuilt\n"
        lines = error_lines(log)
        assert "build.sh: line 3: popd: directory stack empty" in lines, (command, lines)
        assert not any(command in line for line in lines), (command, lines)
    # A line that merely starts like one is kept.
    assert error_lines("$HOME is not set") == ["$HOME is not set"]


def test_a_note_is_not_read_as_the_error_in_the_tools_own_words() -> None:
    """The line before an error line is tried too (a tool states the error, then a summary that names it), but not
    when it is a note on another line: git's `hint:` before "Could not apply" matched lessons on aborting."""
    log = "\n".join(
        [
            "CONFLICT (content): Merge conflict in lib/version.txt",
            "error: could not apply 1a2b3c4... bump version",
            'hint: To abort and get back to the state before "git rebase", run "git rebase --abort".',
            "Could not apply 1a2b3c4... bump version",
        ]
    )
    lines = error_lines(log)
    assert "CONFLICT (content): Merge conflict in lib/version.txt" in lines
    assert not any(line.startswith("hint:") for line in lines)


def test_a_banner_is_not_an_error_line() -> None:
    """pytest frames its report with banners that name no particular error; matched as error lines, unrelated
    lessons that hold "error" and "collecting" were rivals of the right one. A glibc abort line is not a banner."""
    log = "\n".join(
        [
            "_____________________ ERROR collecting tests/test_retry.py _____________________",
            'E     File "/srv/app/retry.py", line 3',
            "E       while retries < 3",
            "E   SyntaxError: expected ':'",
            "=========================== short test summary info ============================",
            "!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!",
            "*** stack smashing detected ***: terminated",
        ]
    )
    lines = error_lines(log)
    assert "E   SyntaxError: expected ':'" in lines
    assert "*** stack smashing detected ***: terminated" in lines
    assert not any(line.startswith(("___", "===", "!!!")) for line in lines)
    assert not any("short test summary" in line for line in lines)


RUSTC_WITH_HELP = """   Compiling shop v0.1.0 (/home/u/shop)
error[E0308]: mismatched types
 --> src/cart.rs:9:22
  |
9 |     let total: u64 = parse_total(line);
  |                ---   ^^^^^^^^^^^^^^^^^ expected `u64`, found `Result<u64, ParseIntError>`
  |
  = note: expected type `u64` found enum `Result<u64, ParseIntError>`
help: consider using `Result::expect` to unwrap the `Result<u64, ParseIntError>` value, panicking if it is an Err
  |
9 |     let total: u64 = parse_total(line).expect("REASON");
  |                                        +++++++++++++++++
error: could not compile `shop` (bin "shop") due to 1 previous error"""


def test_a_compilers_notes_are_not_error_lines_of_their_own(tmp_path: Path) -> None:
    """rustc's `help:` suggests a fix in another error's words (unwrap, panicking): matched as an error line of its
    own, it outscored the error it annotates."""
    lines = error_lines(RUSTC_WITH_HELP)
    assert any(line.startswith("error[E0308]: mismatched types") for line in lines)
    assert not any(line.startswith(("help:", "= note:")) for line in lines)
    assert not any(
        line.startswith("a.c:2:16: note:")
        for line in error_lines(
            "a.c:7:9: error: passing argument 1 of 'f' from incompatible pointer type\n"
            "a.c:2:16: note: expected 'int *' but argument is of type 'char *'"
        )
    )
    lessons = services_for_folder(tmp_path).lessons
    lessons.create_lesson(
        LessonInput(
            name="RUST_MISMATCHED_TYPES",
            errorPattern={"type": "build", "message": "error[E0308]: mismatched types"},
            observations=["The expression's type differs from the one the context requires.", "Fix: convert it."],
        )
    )
    lessons.create_lesson(
        LessonInput(
            name="RUST_UNWRAP_PANIC",
            errorPattern={
                "type": "runtime",
                "message": "thread 'main' panicked at src/main.rs:4:10: called `Result::unwrap()` on an `Err` value",
            },
            observations=["unwrap() or expect() on a Result that was Err panics the thread.", "Fix: handle Err."],
        )
    )
    recommended = lessons.get_lesson_recommendations(RUSTC_WITH_HELP).recommendations
    assert [r.name for r in recommended][:1] == ["RUST_MISMATCHED_TYPES"]


def test_a_bare_prompt_after_the_error_is_not_part_of_its_window() -> None:
    """A terminal log often ends in the prompt that came back; its user and host name are no part of the error."""
    log = "bob@devbox:~/tool$ make instal\nmake: *** No rule to make target 'instal'.  Stop.\nbob@devbox:~/tool$"
    assert error_lines(log) == ["make: *** No rule to make target 'instal'.  Stop."]
    assert error_lines("$ ./run.sh\n./run.sh: line 3: cd: /srv/app: No such file or directory\n$") == [
        "./run.sh: line 3: cd: /srv/app: No such file or directory"
    ]


def test_a_count_of_errors_points_at_the_error_but_is_not_matched_itself() -> None:
    """perl's "Execution of x.pl aborted due to compilation errors." (or a compiler's "1 error generated.") sums up
    the errors above it: matched on its own, a lesson on another tool's "aborting ... due to ..." won. The line
    before it is still tried (perl's "Global symbol ..." names no error word)."""
    log = "\n".join(
        [
            "$ perl totals.pl",
            'Global symbol "$totl" requires explicit package name (did you forget to declare "my $totl"?) at'
            " totals.pl line 6.",
            "Execution of totals.pl aborted due to compilation errors.",
        ]
    )
    lines = error_lines(log)
    assert any(line.startswith("Global symbol") for line in lines)
    assert not any(line.startswith("Execution of") for line in lines)
    clang = error_lines("a.c:3:9: error: use of undeclared identifier 'x'\n1 error generated.")
    assert "a.c:3:9: error: use of undeclared identifier 'x'" in clang
    assert not any(line.startswith("1 error") for line in clang)


def test_a_bare_npm_error_line_is_a_wrapper() -> None:
    lines = error_lines('npm error Missing script: "dev"\nnpm error\nnpm error To see a list of scripts, run:')
    assert 'npm error Missing script: "dev"' in lines
    assert "npm error" not in lines


def lesson(name: str, message: str, observations: list[str]) -> dict:
    return {
        "type": "entity",
        "name": name,
        "entityType": "lesson",
        "observations": observations,
        "errorPattern": {"type": "runtime", "message": message, "context": ""},
        "verificationSteps": [],
    }


def index_of(*records: dict) -> LessonIndex:
    index = LessonIndex()
    for record in records:
        index.put(record)
    return index


def best_lesson(index: LessonIndex, message: str, kind: str = "") -> str:
    """The name of the lesson that matches the message best."""
    query = index.prepare(query_of(message))
    return max(index.lessons.values(), key=lambda item: index.match(query, item, kind)).name


def test_a_quoted_builtin_the_lesson_explains_is_evidence_but_a_user_name_is_not() -> None:
    index = index_of(
        lesson("TYPO", "NameError: name 'recieve' is not defined", ["A misspelled variable or function."]),
        lesson(
            "PY2_PRINT",
            "NameError: name 'unicode' is not defined",
            ["Python 2 code run on Python 3: unicode was renamed to str."],
        ),
    )
    assert best_lesson(index, "NameError: name 'unicode' is not defined", "runtime") == "PY2_PRINT"
    assert best_lesson(index, "NameError: name 'totl' is not defined", "runtime") == "TYPO"


def test_a_lesson_naming_the_quoted_character_explains_the_error() -> None:
    index = index_of(
        lesson("COLON", "Missing colon after the def line: Python refuses to parse the file", ["Add it."]),
        lesson("FSTRING", "f-string: single '}' is not allowed", ["Double the brace."]),
        lesson("INDENT", "IndentationError: expected an indented block", ["Indent the body."]),
    )
    assert best_lesson(index, "SyntaxError: expected ':'") == "COLON"


def test_a_lessons_name_is_evidence() -> None:
    """An assistant names a lesson after the error ("npm-missing-script") and writes its message as a summary of
    what happened, in words the error itself does not use: the name is the lesson's own text too."""
    index = index_of(
        lesson(
            "npm-missing-script",
            "npm run build fails in CI because package.json has no build script",
            ["'npm run <name>' was called but package.json has no such entry under scripts."],
        ),
        lesson(
            "NODE_ARGUMENT_LIST",
            "SyntaxError: missing ) after argument list",
            ["node failed while running a script: a parenthesis is missing after the arguments."],
        ),
    )
    assert best_lesson(index, 'npm error Missing script: "dev"') == "npm-missing-script"
    # The name's words count as any other words of the lesson: a query that shares none of them is not drawn to it.
    assert best_lesson(index, "SyntaxError: missing ) after argument list") == "NODE_ARGUMENT_LIST"


def test_lessons_that_give_the_same_fix_are_not_rivals() -> None:
    """A raw error line and an assistant's summary of it, with the same explanation, are one answer: the margin of
    the best of them is taken over the next lesson that explains something else."""
    fix = ["A dict was indexed with a key it does not contain.", "Fix: use d.get(key) or check 'key in d' first."]
    index = LessonIndex()
    index.put(lesson("RAW", "KeyError: 'database'", fix))
    index.put(lesson("SUMMARY", "The deploy script crashed: config.yaml has no database section", fix))
    index.put(lesson("OTHER", "IndexError: list index out of range", ["A list was read past its end."]))
    raw, summary, other = (index.lessons[name] for name in ("RAW", "SUMMARY", "OTHER"))
    assert index.same_fix(raw, summary) and index.same_fix(summary, raw)
    assert not index.same_fix(raw, other)
    candidates = [raw, summary, other]

    def same(i: int, j: int) -> bool:
        return index.same_fix(candidates[i], candidates[j])

    assert margins([0.8, 0.78, 0.5], same) == pytest.approx([0.3, 0.28, -0.3])
    # Without the summary's explanation they are rivals again, and the top is hardly ahead.
    assert margins([0.8, 0.78, 0.5], lambda i, j: False) == pytest.approx([0.02, -0.02, -0.3])
    # Under the line (what can be answered) candidates are not grouped: each is a rival, and its margin is the
    # distance to the best.
    assert margins([0.8, 0.2], same, line=0.3) == pytest.approx([0.6, -0.6])
    assert margins([0.8], same) == pytest.approx([0.8])


def test_error_types_compare_by_stem() -> None:
    alike = [
        ("dependency", "dependencies"),
        ("build", "Build-Error"),
        ("network", "Network errors"),
        ("process", "processes"),
    ]
    unlike = [("data", "database"), ("runtime", "network"), ("vcs", "vc")]
    assert all(same_type(type_key(a), type_key(b)) for a, b in alike)
    assert not any(same_type(type_key(a), type_key(b)) for a, b in unlike)


def test_a_lessons_prose_leaves_out_what_it_quotes() -> None:
    """The prose clue reads what a lesson says in its own words: the error text, command or file it quotes is not
    prose, an apostrophe is not a quote."""
    text = "sh failed with \"x.sh: 1: Bad substitution\" on deploy. Don't run `sh -n x.sh` here: it isn't 'bash' ."
    assert unquoted(text).split() == [
        "sh",
        "failed",
        "with",
        "on",
        "deploy.",
        "Don't",
        "run",
        "here:",
        "it",
        "isn't",
        ".",
    ]


def test_a_log_line_of_a_word_or_two_weighs_less_than_the_error_line() -> None:
    """A line of one word ("Aborting") is explained in full by any lesson that has it; its match counts for the share
    of evidence it holds, while an error line that names its error keeps its whole weight."""
    index = index_of(
        lesson("COMMIT", "Aborting commit due to empty commit message.", ["Write a message."]),
        lesson(
            "OVERWRITTEN",
            "error: Your local changes to the following files would be overwritten by checkout",
            ["Commit or stash the changes first."],
        ),
    )
    lines = [
        index.prepare(query_of("error: Your local changes to the following files would be overwritten by checkout")),
        index.prepare(query_of("Aborting")),
    ]
    index.weigh_by_evidence(lines)
    assert lines[0].weight == 1.0 and lines[1].weight < 0.5
    assert (
        index.best_match(lines, index.lessons["OVERWRITTEN"])[0] > index.best_match(lines, index.lessons["COMMIT"])[0]
    )


def test_candidates_are_the_lessons_holding_the_most_rarity_of_the_query_words() -> None:
    """Past CANDIDATES lessons, a query's candidates are the holders of its rare words, the most rarity first, a
    tie going to the greater name: with one word to go by (one weight for all its holders) the greatest names."""
    index = LessonIndex()
    for i in range(120):
        words = ["quokka"] if i % 2 else []
        words += ["wombat"] if i % 4 == 0 else []
        words += ["platypus"] if i % 20 == 0 else []
        index.put({"name": f"L{i:03}", "errorPattern": {"message": " ".join(["failure", *words])}})
    # quokka's 60 holders are too many to call it rare, but it is the query's rarest word.
    one_word = index.candidates([query_of("quokka failure")])
    assert one_word == sorted((f"L{i:03}" for i in range(1, 120, 2)), reverse=True)[:CANDIDATES]
    two_words = index.candidates([query_of("wombat platypus failure")])
    both = sorted((f"L{i:03}" for i in range(0, 120, 20)), reverse=True)
    wombat_only = sorted((f"L{i:03}" for i in range(0, 120, 4) if i % 20), reverse=True)
    assert two_words == both + wombat_only


def test_a_type_most_lessons_share_does_not_outweigh_what_the_error_says() -> None:
    """An assistant words a lesson's type its own way ("cmake configure"); the caller's "build" is the type of most
    stored lessons, so agreeing with it narrows little and must not lift them over the lesson that explains the
    error. A type few lessons have still counts in full."""

    def typed(name: str, kind: str, message: str, observations: list[str]) -> dict:
        record = lesson(name, message, observations)
        record["errorPattern"]["type"] = kind
        return record

    builds = [
        (
            "CMAKE_UNKNOWN_COMMAND",
            'CMake Error at CMakeLists.txt:3 (add_exectuable): Unknown CMake command "add_exectuable".',
        ),
        ("GCC_NO_FILE", "gcc: error: main.c: No such file or directory"),
        ("MAKE_NO_RULE", "make: *** No rule to make target 'install'.  Stop."),
        ("LD_UNDEFINED", "undefined reference to `pthread_create'"),
        ("JAVAC_SYMBOL", "error: cannot find symbol"),
        ("CARGO_E0432", "error[E0432]: unresolved import `serde`"),
    ]
    index = index_of(
        *(
            typed(name, "build", message, ["The build stopped here.", "Fix: correct the build file."])
            for name, message in builds
        ),
        typed(
            "CMAKE_FIND_PACKAGE",
            "cmake configure",
            "CMake can't find OpenCV during configure - libopencv-dev is not installed",
            ["CMake's find_package() could not locate the dependency: no Find<Pkg>.cmake module or package config."],
        ),
    )
    error = (
        'CMake Error at CMakeLists.txt:4 (find_package): By not providing "FindQt6.cmake" in CMAKE_MODULE_PATH this '
        'project has asked CMake to find a package configuration file provided by "Qt6", but CMake did not find one.'
    )
    assert best_lesson(index, error, type_key("build")) == "CMAKE_FIND_PACKAGE"
    assert index.type_specificity(type_key("cmake configure")) == 1.0
    assert index.type_specificity(type_key("build")) < 0.25
    # The type still decides between two lessons alike in words when few lessons have it.
    full_disk = "cp: error writing 'out.bin': No space left on device"
    index = index_of(
        typed("DISK_FULL_DB", "database", "No space left on device", ["The disk is full."]),
        typed("DISK_FULL_BUILD", "build", "No space left on device", ["The disk is full."]),
        *(typed(name, "runtime", message, ["Something else."]) for name, message in builds),
    )
    assert best_lesson(index, full_disk, type_key("database")) == "DISK_FULL_DB"
    assert best_lesson(index, full_disk, type_key("build")) == "DISK_FULL_BUILD"


def test_a_lesson_is_matched_by_its_newest_aliases() -> None:
    """Two copies of a lesson merged on import may hold more aliases than a lesson learns: the newest are matched."""
    record = lesson("PORT", "Error: listen EADDRINUSE: address already in use :::3000", ["Another process has it."])
    words = [
        "alpha",
        "bravo",
        "charlie",
        "delta",
        "echo",
        "foxtrot",
        "golf",
        "hotel",
        "india",
        "juliet",
        "kilo",
        "lima",
    ]
    record["aliases"] = [f"the {word} wording of the error" for word in words[: MAX_ALIASES + 2]]
    shapes = index_of(record).lessons["PORT"].other_shapes
    assert shape(record["aliases"][-1]) in shapes and shape(record["aliases"][0]) not in shapes
