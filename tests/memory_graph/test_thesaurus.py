"""The thesaurus is looked up in its file block by block: every line is found as a plain read of the file has it."""

from __future__ import annotations

from pathlib import Path

from memory_graph.thesaurus import THESAURUS_FILE, load


def plain_tables(path: Path) -> dict[str, dict[str, str]]:
    tables: dict[str, dict[str, str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("@"):
            table = tables[line[1:]] = {}
        elif not line.startswith("#"):
            stem, _, words = line.partition(":")
            table[stem] = words
    return tables


def test_every_line_of_the_shipped_thesaurus_is_found_and_nothing_else() -> None:
    expected = plain_tables(THESAURUS_FILE)
    tables = load()
    assert set(tables) == {"relations", "kinds", "defined"} == set(expected)
    for name, lines in expected.items():
        assert len(lines) > 5000
        for stem, words in lines.items():
            assert tables[name].get(stem) == words, (name, stem)
            assert tables[name].get(stem + "q") == expected[name].get(stem + "q", "")  # between two lines
            assert tables[name].get(stem[:-1]) == expected[name].get(stem[:-1], "")
    for absent in ["", "0", "~", "zzzzzz", "été", "\udcff", "dog:"]:
        assert all(table.get(absent) == "" for table in tables.values()), absent


def test_a_table_is_read_to_its_last_line_and_blocks_split_anywhere(tmp_path: Path) -> None:
    path = tmp_path / "thesaurus.txt"
    stems = [f"w{i:03d}" for i in range(0, 200, 2)]  # 100 lines: three blocks and a short one
    path.write_text(
        "# a header line\n@first\n" + "".join(f"{s}:{s}x,{s}y\n" for s in stems) + "@second\nonly:one\n",
        encoding="utf-8",
    )
    tables = load(path)
    assert [tables["first"].get(s) for s in stems] == [f"{s}x,{s}y" for s in stems]
    assert tables["first"].get("w001") == tables["first"].get("w199") == tables["first"].get("only") == ""
    assert tables["second"].get("only") == "one"
    assert tables["second"].get("w000") == ""
