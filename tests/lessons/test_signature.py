"""Signatures: the same error in another place, run or wrapper gives the same shape."""

from __future__ import annotations

import pytest

from lessons.signature import evidence_words, quoted_words, shape

SAME_ERROR = [
    (
        "Makefile:2: *** missing separator.  Stop.",
        "\x1b[31mMakefile:117: *** missing separator.  Stop.\x1b[0m",
    ),
    (
        "Error: listen EADDRINUSE: address already in use :::3000",
        "Error: listen EADDRINUSE: address already in use 127.0.0.1:8080",
    ),
    (
        "thread 'main' (32445) panicked at src/main.rs:6:32:",
        "thread 'worker-3' (99) panicked at crates/core/src/lib.rs:120:5:",
    ),
    (
        "==31786==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x60200000001a at pc 0x7f8effe602ca",
        "==4==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x6040000000aa at pc 0x55d1e3a0b1f2",
    ),
    (
        "fatal: not a git repository: '/tmp/errcorpus/home/erin/svc/.git-old'",
        'fatal: not a git repository: "C:\\Users\\bob\\repo\\.git"',
    ),
    (
        "2026-11-29T22:15:24.917Z ERROR job 3f2b8c1e-1d2a-4b7e-9a0f-1234567890ab failed after 12 retries",
        "2025-01-02 03:04:05,123 ERROR job 00000000-0000-4000-8000-000000000000 failed after 3 retries",
    ),
]


@pytest.mark.parametrize(("first", "second"), SAME_ERROR)
def test_variable_parts_do_not_change_the_shape(first: str, second: str) -> None:
    assert shape(first) == shape(second)


def test_quoted_punctuation_is_shape_but_quoted_names_are_not() -> None:
    assert shape("SyntaxError: expected ':'") != shape("SyntaxError: expected ';'")
    assert shape("KeyError: 'database'") == shape('KeyError: "items"')


def test_a_punctuation_name_also_says_the_character_it_names() -> None:
    # "missing colon" in a lesson's words meets the raw `expected ':'` (the quoted character's term).
    assert "sym::" in evidence_words("SyntaxError: expected ':'")
    assert {"colon", "sym::"} <= evidence_words("Missing colon after the def line")
    assert {"sym:{", "sym:}", "sym:(", "sym:)"} <= evidence_words("unbalanced braces and a missing paren")
    # The character itself is counted once, not also by its name; words that name other things say nothing more.
    assert "colon" not in evidence_words("expected ':'")
    assert not any(word.startswith("sym:") for word in evidence_words("a dot in the period after the question"))


def test_evidence_keeps_rare_words_and_file_names_but_not_folders() -> None:
    words = evidence_words("error[E0382]: borrow of moved value: `items` in /home/erin/proj/src/main.rs:4:9")
    assert {"e0382", "borrow", "move", "item", "main.rs"} <= words  # words are stemmed: "moved" meets "moving"
    assert not {"home", "erin", "proj", "error"} & words
    assert quoted_words("NameError: name 'print' is not defined") == {"print"}


def test_compound_names_also_say_their_parts_and_an_error_class_its_initials() -> None:
    words = evidence_words("java.lang.ArrayIndexOutOfBoundsException: Index 5 out of bounds for length 5")
    assert {
        "arrayindexoutofboundsexception",
        "array",
        "index",
        "bound",
        "aioob",
    } <= words  # AIOOBE, stemmed like any word
    assert {"read", "timeout"} <= evidence_words("ReadTimeout while calling max_read_timeout")
    assert "npe" in evidence_words("java.lang.NullPointerException") and "npe" in evidence_words("an NPE in Map.get")
    # Not into single letters or digits: CMake and FindQt6 stay whole.
    assert {"cmake", "findqt6"} <= evidence_words("CMake cannot find FindQt6") and "c" not in evidence_words("CMake")


def test_a_compiler_position_is_not_read_as_an_ipv6_address() -> None:
    # `name.c:7:43:` has the colons of an IPv6 address but neither a "::" nor eight groups.
    assert "<addr>" not in shape("server.c:7:43: error: expected ';' before 'return'")
    assert shape("a.c:1:19: error: x") == shape("lib/b.c:22:5: error: x")
    for address in ("::1", ":::5173", "[::1]:8080", "2001:db8::1", "fe80:0:0:0:0:0:0:1"):
        assert "<addr>" in shape(f"connect {address} refused"), address
