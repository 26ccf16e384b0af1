"""Settings from the environment: paths, defaults and clear refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_graph.config import Settings
from memory_graph.errors import InvalidInputError


def test_defaults_live_in_the_user_data_folder(tmp_path: Path) -> None:
    settings = Settings.from_env({"XDG_DATA_HOME": str(tmp_path)}, cwd=tmp_path / "elsewhere")
    assert settings.memory_file == tmp_path / "memory-graph" / "memory.json"
    assert settings.lesson_file == tmp_path / "memory-graph" / "lesson.json"
    assert (settings.shard_lines, settings.max_response_chars, settings.toolsets) == (
        1000,
        80_000,
        ("graph", "lessons"),
    )


def test_relative_paths_resolve_against_the_working_directory(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {"MEMORY_FILE_PATH": "data/mem.jsonl", "LESSON_FILE_PATH": "l/lessons.json"}, cwd=tmp_path
    )
    assert settings.memory_file == tmp_path / "data" / "mem.jsonl"
    assert settings.lesson_file == tmp_path / "l" / "lessons.json"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MEMORY_SHARD_LINES": "0"}, "MEMORY_SHARD_LINES=0 is too small"),
        ({"MEMORY_SHARD_LINES": "many"}, "is not a whole number"),
        ({"MEMORY_TOOLS": "graph,cats"}, "MEMORY_TOOLS"),
        ({"MEMORY_LOG_LEVEL": "LOUD"}, "MEMORY_LOG_LEVEL"),
        ({"MEMORY_FILE_PATH": "same.json", "LESSON_FILE_PATH": "same.json"}, "file of their own"),
        ({"MEMORY_FILE_PATH": "."}, "is a folder; it must name a file"),
        ({"MEMORY_SHARED_SERVER": "yes"}, "MEMORY_SHARED_SERVER='yes' is not valid; use off"),
        ({"MEMORY_SHARED_IDLE_SECONDS": "0"}, "MEMORY_SHARED_IDLE_SECONDS=0 is too small"),
        ({"MEMORY_COMPACT_IDLE_SECONDS": "-1"}, "MEMORY_COMPACT_IDLE_SECONDS=-1 is too small; set it to 0 or more"),
        # Tokens (a review with fresh eyes): each a secret that can be sent, given once, never wider than it says.
        ({"MEMORY_AUTH_TOKEN": "x"}, "MEMORY_AUTH_TOKEN: every token must be at least 16 characters"),
        ({"MEMORY_AUTH_TOKENS": '{" alpha-token-0123456789": "*"}'}, "a space or a control character"),
        (
            {"MEMORY_AUTH_TOKENS": '{"alpha-token-0123456789": ["alpha"], "alpha-token-0123456789": "*"}'},
            "given twice",
        ),
        (
            {"MEMORY_AUTH_TOKEN": "alpha-token-0123456789", "MEMORY_AUTH_TOKENS": '{"alpha-token-0123456789": "*"}'},
            "also a token of MEMORY_AUTH_TOKENS",
        ),
        ({"MEMORY_AUTH_TOKENS": '{"alpha-token-0123456789": ["alpha"]}'}, "Set MEMORY_LESSONS=project"),
    ],
)
def test_bad_settings_are_refused_with_the_fix(tmp_path: Path, env: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        Settings.from_env(env, cwd=tmp_path)


def test_the_shared_server_is_off_by_default_and_keeps_its_socket_in_the_runtime_folder(tmp_path: Path) -> None:
    default = Settings.from_env({}, cwd=tmp_path)
    assert (default.shared_server, default.shared_idle_seconds) == (False, 900)
    chosen = Settings.from_env(
        {"MEMORY_SHARED_SERVER": "on", "MEMORY_SHARED_IDLE_SECONDS": "60", "XDG_RUNTIME_DIR": "run"}, cwd=tmp_path
    )
    assert (chosen.shared_server, chosen.shared_idle_seconds) == (True, 60)
    assert chosen.shared_folder == tmp_path / "run" / "memory-graph"


def test_a_first_load_is_held_as_restored_after_30_quiet_seconds_unless_told_otherwise(tmp_path: Path) -> None:
    assert Settings.from_env({}, cwd=tmp_path).compact_idle_seconds == 30
    assert Settings.from_env({"MEMORY_COMPACT_IDLE_SECONDS": "0"}, cwd=tmp_path).compact_idle_seconds == 0
