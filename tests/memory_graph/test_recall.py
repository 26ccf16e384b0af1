"""search_nodes finds what people mean: each tier on a small hand-made memory, the reference's matches always first,
and the recall bar on the shared corpus over stdio."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_graph import search
from memory_graph.graph import GraphService
from memory_graph.model import Entity, ObservationAddition, Relation
from memory_graph.search import MAX_RANKED, SubstringIndex, stem
from tests.conftest import SHARED, needed

ROOT = Path(__file__).resolve().parents[2]
EVALUATOR = SHARED / "tools" / "recall_eval.py"
CORPUS = SHARED / "data" / "recall-dev.json"

MEMORY = [
    ("Maria Silva", "person", ["Works as a nurse", "Lives in Lisbon", "Drinks oat milk coffee every morning"]),
    ("Acme Clinic", "organization", ["Private clinic near the river"]),
    ("João Pereira", "person", ["Runs the night shift"]),
    ("São Paulo", "place", ["City in Brazil where Maria grew up"]),
    ("Kiln", "equipment", ["Replaced the heating elements in March"]),
    ("Tea habits", "preference", ["Prefers genmaicha in the afternoon"]),
    ("Retirement account", "finance", ["RRIF opened in 2020"]),
    ("Rex", "pet", ["Terrified of thunder"]),
    ("Garden", "place", ["Tomatoes and basil"]),
]
RELATIONS = [("Maria Silva", "Acme Clinic", "works_at"), ("João Pereira", "Maria Silva", "manages")]


@pytest.fixture
def memory(graph: GraphService) -> GraphService:
    graph.create_entities([Entity(name=n, entityType=t, observations=o) for n, t, o in MEMORY])
    graph.create_relations([Relation(**{"from": a, "to": b, "relationType": t}) for a, b, t in RELATIONS])
    return graph


def names(graph: GraphService, query: str) -> list[str]:
    return [e.name for e in graph.search_nodes(query).entities]


def test_a_question_finds_its_entity_and_the_relation_it_asks_about(memory: GraphService) -> None:
    found = names(memory, "where does Maria work?")
    assert found[0] == "Maria Silva"
    assert "Acme Clinic" in found[1:4]  # one hop over works_at, below the entity it hangs from


def test_question_and_stop_words_alone_find_nothing(memory: GraphService) -> None:
    assert names(memory, "who is it?") == []


def test_words_in_any_order_and_other_forms(memory: GraphService) -> None:
    assert names(memory, "coffee with oat milk")[0] == "Maria Silva"
    assert names(memory, "replacing heating element")[0] == "Kiln"
    assert names(memory, "nurses")[0] == "Maria Silva"


def test_accents_are_folded(memory: GraphService) -> None:
    assert names(memory, "Sao Paulo")[0] == "São Paulo"
    assert names(memory, "joao")[0] == "João Pereira"


def test_misspelt_words_find_the_nearest_known_ones(memory: GraphService) -> None:
    assert names(memory, "Lisbn")[0] == "Maria Silva"
    assert names(memory, "genmaicah")[0] == "Tea habits"
    assert names(memory, "Marai Silva")[0] == "Maria Silva"


def test_kinds_and_definitions_stand_in_for_a_missing_word(graph: GraphService) -> None:
    # Nothing says "dog" or "lung": a retriever is a kind of dog three levels down in WordNet, and pneumonia is
    # defined with "lung". Each ranks below an entity that holds the word itself.
    graph.create_entities(
        [
            Entity(name="Bruno", entityType="pet", observations=["Golden retriever, four years old"]),
            Entity(name="Health history", entityType="health", observations=["Had pneumonia in 2019"]),
            Entity(name="Dog park", entityType="place", observations=["Off-leash area by the river"]),
            Entity(name="Garden", entityType="place", observations=["Tomatoes and basil"]),
        ]
    )
    assert names(graph, "our dog")[:2] == ["Dog park", "Bruno"]
    assert names(graph, "lung")[0] == "Health history"
    assert "Garden" not in names(graph, "lung")


def test_a_name_spelt_as_it_sounds_finds_it(graph: GraphService) -> None:
    graph.create_entities(
        [
            Entity(name="Steven Adler", entityType="person", observations=["Plays drums"]),
            Entity(name="Stefan Zweig", entityType="person", observations=["Wrote novellas"]),
            Entity(name="Stella Maris", entityType="boat", observations=["Moored at the marina"]),
        ]
    )
    # "stephen" is 77% like "steven" (under the spelling cutoff) but sounds the same (s315), nearest first;
    # "stella" (s340) neither sounds nor is spelt like it.
    assert names(graph, "Stephen") == ["Steven Adler", "Stefan Zweig"]


def test_a_stop_word_never_stands_in_for_an_unknown_word(graph: GraphService) -> None:
    graph.create_entities([Entity(name="Relocation", entityType="event", observations=["Moved from Lyon in 2019"])])
    # "firm" sounds like "from" (f650) and is 75% like it, but a stop word says nothing about what is asked.
    assert names(graph, "firm") == []
    assert names(graph, "Lyonn") == ["Relocation"]


def test_a_word_that_only_sounds_alike_is_a_last_resort(graph: GraphService) -> None:
    graph.create_entities(
        [
            Entity(name="Clinic file", entityType="health", observations=["Medical records since 2010"]),
            Entity(name="Pie", entityType="recipe", observations=["Meat and onions"]),
        ]
    )
    # "media" is 83% like "medical": "meat" (66%, but m300 like "media") is not also taken.
    assert names(graph, "media") == ["Clinic file"]


def test_a_stop_word_as_stemmed_is_neither_a_correction_nor_a_relation(graph: GraphService) -> None:
    graph.create_entities(
        [
            Entity(name="Keys", entityType="note", observations=["Spare keys are over there"]),
            Entity(name="Stretching", entityType="habit", observations=["I should stretch more"]),
        ]
    )
    assert names(graph, "thermos") == []  # "thermo" is 80% like "ther", the stem of "there"
    assert names(graph, "arm") == []  # WordNet relates "shoulder", which stems like "should"


def test_a_deleted_entity_leaves_no_word_in_the_way_of_a_correction(graph: GraphService) -> None:
    graph.create_entities(
        [
            Entity(name="Moka pot", entityType="kitchen", observations=["Makes coffee on the stove"]),
            Entity(name="Mochi", entityType="food", observations=["Rice cake"]),
        ]
    )
    graph.warm_up()  # indexed: the deleted entity's postings stay until the index compacts
    graph.delete_entities(["Mochi"])
    # "mochi" is 80% like "mocha" and no longer held by anyone: the sound-alike "moka" is the answer.
    assert names(graph, "Mocha") == ["Moka pot"]


def test_a_word_only_a_deleted_entity_held_is_corrected_like_any_unknown_word(graph: GraphService) -> None:
    graph.create_entities([Entity(name="Lisbon", entityType="city", observations=["capital of Portugal"])])
    graph.warm_up()
    graph.create_entities([Entity(name="Note", entityType="memo", observations=["typo Lisbn in an old note"])])
    graph.delete_entities(["Note"])
    assert names(graph, "Lisbn") == ["Lisbon"]


def test_an_often_edited_entity_is_not_one_more_holder_of_its_words_per_edit(graph: GraphService) -> None:
    """Each edit posts the entity anew; its old versions must not count as holders, or after a few edits its
    own words are "held by most entities" and left out of the ranking."""
    graph.create_entities(
        [Entity(name=f"Filler {i}", entityType="note", observations=[f"nothing {i}"]) for i in range(25)]
        + [
            Entity(name="default_user", entityType="person", observations=["plays the violin"]),
            Entity(name="Zed", entityType="person", observations=["keeps a zebra"]),
        ]
    )
    graph.warm_up()
    before = names(graph, "violins zebras")
    for i in range(20):
        graph.add_observations([ObservationAddition(entityName="default_user", contents=[f"fact number {i}"])])
    assert sorted(before) == sorted(names(graph, "violins zebras")) == ["Zed", "default_user"]


def test_the_name_spelt_as_asked_comes_first_among_names_equal_but_for_case(graph: GraphService) -> None:
    graph.create_entities(
        [Entity(name=n, entityType="person", observations=[]) for n in ("alice", "ALICE", "Alice Cooper", "Alice")]
    )
    assert names(graph, "Alice")[0] == "Alice" and names(graph, "ALICE")[0] == "ALICE"
    assert names(graph, "alice")[0] == "alice"


def test_a_stop_word_after_a_possessive_is_a_noun(graph: GraphService) -> None:
    graph.create_entities(
        [Entity(name="Testament", entityType="document", observations=["Last will signed at the notary in 2021"])]
    )
    assert names(graph, "where is the user's will?") == ["Testament"]
    assert names(graph, "where is my will") == ["Testament"]
    assert names(graph, "what will it be?") == []  # the auxiliary says nothing


def test_soundex_codes() -> None:
    # The textbook examples of American Soundex.
    assert [search.sounds(w) for w in ("robert", "rupert", "rubin", "ashcraft", "tymczak", "pfister")] == [
        "r163",
        "r163",
        "r150",
        "a261",
        "t522",
        "p236",
    ]
    assert search.sounds("2024") == "2024"  # not a word: sounds like nothing else
    assert search.sounds("петров") == "петров" != search.sounds("петренко")  # no code outside a-z


def test_partial_names_match_as_substrings(memory: GraphService) -> None:
    assert names(memory, "Silv")[0] == "Maria Silva"
    assert names(memory, "retire")[0] == "Retirement account"


def test_a_whole_word_ranks_ahead_of_a_piece_of_one(memory: GraphService) -> None:
    # The reference returns both ("terrified" holds "rrif"); the acronym itself comes first.
    assert names(memory, "RRIF") == ["Retirement account", "Rex"]


def test_the_exact_name_comes_first(memory: GraphService) -> None:
    assert names(memory, "kiln")[0] == "Kiln"


def test_reference_matches_come_first_in_the_reference_tier(memory: GraphService) -> None:
    found = names(memory, "in")  # a substring of many texts, and a stop word
    reference = [n for n, t, o in MEMORY if any("in" in f.lower() for f in [n, t, *o])]
    assert sorted(found[: len(reference)]) == sorted(reference)


def test_ranked_matches_are_capped(graph: GraphService) -> None:
    many = [Entity(name=f"note {i}", entityType="note", observations=[f"tomato soup {i}"]) for i in range(40)]
    graph.create_entities(many)
    assert len(names(graph, "soups of tomatoes")) == MAX_RANKED


def test_results_carry_no_score(memory: GraphService) -> None:
    dumped = memory.search_nodes("where does Maria work?").model_dump(by_alias=True, exclude_none=True)
    assert set(dumped) == {"entities", "relations"}
    assert all(set(e) == {"name", "entityType", "observations"} for e in dumped["entities"])


def test_the_light_stemmer_joins_word_forms() -> None:
    assert stem("replacing") == stem("replaced") == stem("replace") == stem("replaces")
    assert stem("classes") == stem("class") and stem("studies") == stem("study")
    assert stem("running") == stem("run") and stem("Montréal".lower()) == stem("montreal")
    assert stem("2025") == "2025"


def test_a_short_word_keeps_its_e_so_it_stays_its_own_word() -> None:
    assert stem("pipe") != stem("pip") and stem("note") != stem("not") and stem("code") != stem("cod")
    assert stem("piping") == stem("pipes") == stem("pipe") and stem("noted") == stem("notes") == stem("note")
    assert stem("hoping") == stem("hope") != stem("hopping") == stem("hop")
    assert stem("writing") == stem("writer") == stem("write") and stem("coding") == stem("code")
    # "notes" once stemmed to the stop word "not" and vanished from the query.
    assert search.query_terms("the notes about pipes") == ["note", "pipe"]


def test_not_yet_indexed_entities_are_found_by_a_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    warm, cold = SubstringIndex(), SubstringIndex()
    for index in (warm, cold):
        for name, kind, observations in MEMORY:
            index.put(name, [name, kind, *observations])
    while warm.index_some(3):
        pass
    monkeypatch.setattr(search, "SEARCH_SLICE", 0)  # no search indexes anything: `cold` stays all pending
    for query in ["where does Maria work?", "Kiln", "RRIF", "heating elements replaced", "basil"]:
        assert cold.search(query, lambda _: [], lambda n: 0)[:1] == warm.search(query, lambda _: [], lambda n: 0)[:1]
    assert cold.index_some(0)  # still pending


def test_changed_entities_are_compacted_away_and_found_as_they_are_now() -> None:
    index, docs = SubstringIndex(), {}
    for round_ in ("first", "second", "third"):  # 6,000 dead documents: more than the live, so postings are compacted
        for i in range(3000):
            docs[f"e{i}"] = [f"e{i}", "note", f"{round_} draft {i}"]
            index.put(f"e{i}", docs[f"e{i}"])
        while index.index_some(1000):
            pass
    for i in range(0, 3000, 2):
        index.remove(f"e{i}")
        del docs[f"e{i}"]
    assert len(index._names) < 6000  # renumbered
    for query in ["third draft 7", "second", "e4", "draft 2999", "note"]:
        words = query.split()
        expected = {n for n, fields in docs.items() if all(w in " ".join(fields) for w in words)}
        assert set(index.matching(query)) == expected, query
    assert index.search("thrid drafts 2999", lambda _: [], lambda n: 0)[0] == "e2999"


WORDS = st.sampled_from(["tea", "Tea", "oat", "milk", "oats", "café", "cafe", "milks", "xy", "t", "a b", "ea"])
FIELDS = st.lists(st.lists(WORDS, min_size=1, max_size=4).map(" ".join), min_size=2, max_size=4)


@settings(max_examples=150, deadline=None)
@given(docs=st.dictionaries(st.text("abcdé", min_size=1, max_size=4), FIELDS, max_size=10), query=WORDS)
def test_everything_the_reference_matches_comes_back_first(docs: dict[str, list[str]], query: str) -> None:
    index = SubstringIndex()
    for name, fields in docs.items():
        index.put(name, [name, *fields])
    order = {name: i for i, name in enumerate(docs)}
    found = index.search(query, lambda _: [], order.__getitem__)
    reference = {n for n, fields in docs.items() if any(query.lower() in f.lower() for f in [n, *fields])}
    assert set(found[: len(reference)]) == reference
    assert len(found) == len(set(found))


@settings(max_examples=100, deadline=None)
@given(
    edits=st.lists(
        st.tuples(st.sampled_from(["ann", "bo", "cy", "di"]), st.one_of(st.none(), FIELDS), st.booleans()),
        max_size=30,
    )
)
def test_an_edited_index_counts_each_words_holders_as_one_built_afresh(
    edits: list[tuple[str, list[str] | None, bool]],
) -> None:
    """Puts and removes, indexed as they come or in a later slice: how many live documents hold each stem (what
    idf and "too common" read) is what an index built from the live documents alone says."""
    index, live = SubstringIndex(), {}
    for name, fields, index_now in edits:
        if fields is None:
            index.remove(name)
            live.pop(name, None)
        else:
            index.put(name, [name, *fields])
            live[name] = fields
        if index_now:
            while index.index_some(5):
                pass
    fresh = SubstringIndex()
    for name, fields in live.items():
        fresh.put(name, [name, *fields])
    for built in (index, fresh):
        while built.index_some(5):
            pass

    def holders(built: SubstringIndex) -> dict[str, int]:
        return {stem: held for stem, held in zip(built._stems, built._held, strict=True) if held}

    assert holders(index) == holders(fresh)


@pytest.mark.slow
def test_the_recall_bar_over_stdio(tmp_path: Path) -> None:
    needed(EVALUATOR.exists() and CORPUS.exists(), f"the shared recall evaluator or corpus is not in {SHARED}")
    out = tmp_path / "recall.json"
    server = f"{sys.executable} -m memory_graph"
    run = subprocess.run(
        [sys.executable, str(EVALUATOR), "--server", server, "--data", str(CORPUS), "--out", str(out), "--passes", "1"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "MEMORY_SEMANTIC": "off"},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    rows = {m.group(1): m.groups()[1:] for m in re.finditer(r"^(\w+)\s+\d+\s+([\d.]+)\s+([\d.]+)", run.stdout, re.M)}
    assert float(rows["exact"][0]) == 1.0, run.stdout  # hit@1
    summary = json.loads(out.read_text(encoding="utf-8"))
    assert summary  # the per-query results were written
    assert float(rows["overall"][1]) >= RECALL_BAR, run.stdout  # hit@5


# The bar for the default install (docs/benchmarks.md: 0.887 measured), so a regression fails.
RECALL_BAR = 0.88
