"""The substring index finds exactly what a plain scan finds (the reference's semantics, plus words in any order)."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memory_graph import search as search_module
from memory_graph.search import FIELD_SEPARATOR, PlaceMap, SubstringIndex, query_terms
from memory_graph.storage import as_read_back

ALPHABET = st.sampled_from(list("abcAB xyz-_.'é1İßΣ"))
TEXT = st.text(ALPHABET, max_size=14)


def brute_force(docs: dict[str, list[str]], query: str) -> set[str]:
    phrase, words = query.lower(), query.lower().split()
    found = set()
    for name, fields in docs.items():
        text = FIELD_SEPARATOR.join(fields).lower()
        if phrase in text or (len(words) > 1 and all(w in text for w in words)):
            found.add(name)
    return found


@settings(max_examples=300, deadline=None)
@example(
    docs={"1": [""]}, queries=["A A"], removed=0, slice_size=1, restored=False, block=4096
)  # a repeated word is still two words
@given(
    docs=st.dictionaries(
        st.text(ALPHABET, min_size=1, max_size=6), st.lists(TEXT, min_size=1, max_size=3), max_size=12
    ),
    queries=st.lists(TEXT, min_size=1, max_size=5),
    removed=st.integers(min_value=0, max_value=3),
    slice_size=st.sampled_from([1, 3, 1000]),
    restored=st.booleans(),
    block=st.sampled_from([1, 2, 3, 4096]),
)
def test_the_index_agrees_with_a_scan(
    docs: dict, queries: list[str], removed: int, slice_size: int, restored: bool, block: int
) -> None:
    kept, search_module.TEXT_BLOCK = search_module.TEXT_BLOCK, block  # a restore's texts in blocks of `block`
    try:
        scanned_alike(docs, queries, removed, slice_size, restored)
    finally:
        search_module.TEXT_BLOCK = kept


def scanned_alike(docs: dict, queries: list[str], removed: int, slice_size: int, restored: bool) -> None:
    index = SubstringIndex()
    for name, fields in docs.items():
        index.put(name, fields)
    while index.index_some(slice_size):
        pass
    if restored:  # as a restart holds it: the texts joined, the maps of places as their tables
        index, live = SubstringIndex(), index
        index.restore_state(as_read_back(live.snapshot_state()))
    for name in list(docs)[:removed]:
        index.remove(name)
        del docs[name]
    for name in list(docs)[:1]:  # a changed document is reindexed
        docs[name] = [*docs[name], "changed text"]
        index.put(name, docs[name])
    for query in [*queries, "changed", "chang", ""]:
        assert set(index.matching(query)) == brute_force(docs, query), query


def reference_order(docs: dict[str, list[str]], query: str, scores: dict[str, float], order: list[str]) -> list[str]:
    """The substring tier's order, written out as its rule reads (search._substring_order must agree)."""
    phrase = query.lower()

    def key(name: str) -> tuple:
        lowered = name.lower()
        whole = any(phrase in field.lower() for field in docs[name])
        tier = 0 if name == query else 1 if lowered == phrase else 2 if lowered.startswith(phrase) else 3
        return (0 if whole else 1, tier, -scores.get(name, 0.0), 0 if phrase in lowered else 1, order.index(name))

    return sorted(brute_force(docs, query), key=key)


@settings(max_examples=200, deadline=None)
@given(
    docs=st.dictionaries(
        st.text(ALPHABET, min_size=1, max_size=6), st.lists(TEXT, min_size=1, max_size=3), min_size=1, max_size=12
    ),
    queries=st.lists(TEXT, min_size=1, max_size=4),
)
def test_the_substring_tier_is_ordered_by_its_rule(docs: dict, queries: list[str]) -> None:
    index = SubstringIndex()
    for name, fields in docs.items():
        index.put(name, [name, *fields])
    while index.index_some(1000):
        pass
    order = list(docs)
    fields = {name: [name, *docs[name]] for name in docs}
    # Words of a document in another order (matched as scattered words, below the documents holding the phrase),
    # and a name's start (the prefix tier).
    shuffled = [" ".join(reversed(f"{name} {' '.join(docs[name])}".split())) for name in order[:3]]
    for query in [*queries, *shuffled, *(name[:2] for name in order[:2])]:
        first, _ = index.search_tiers(query, lambda name: [], order.index)
        # The word scores the tier orders by, as search_tiers computes them (keyed by document there).
        terms = [] if FIELD_SEPARATOR in query else query_terms(query)
        by_doc, _ = index._scores(index._term_weights(terms)) if terms else ({}, {})
        scores = {index._names[doc] or "": score for doc, score in by_doc.items()}
        assert first == reference_order(fields, query, scores, order), query


def test_the_whole_phrase_comes_before_its_words_found_apart() -> None:
    """The reference's own matches (the phrase inside one field) lead, even when an entity holding the words apart,
    in its name, scores higher and was created first."""
    index = SubstringIndex()
    index.put("beta alpha", ["beta alpha", "note", "alpha"])
    index.put("x", ["x", "note", "an alpha beta test"])
    while index.index_some(1000):
        pass
    order = ["beta alpha", "x"]
    first, _ = index.search_tiers("Alpha Beta", lambda name: [], order.index)
    assert first == ["x", "beta alpha"]


@settings(max_examples=200, deadline=None)
@given(
    docs=st.dictionaries(
        st.text(ALPHABET, min_size=1, max_size=6), st.lists(TEXT, min_size=1, max_size=3), max_size=12
    ),
    removed=st.integers(min_value=0, max_value=12),
    rounds=st.integers(min_value=1, max_value=3),
)
def test_each_stem_knows_how_many_documents_hold_it(docs: dict, removed: int, rounds: int) -> None:
    """The count `_too_common` and idf read at every search is the number of live documents in the stem's
    postings, through posting, reposting, removal and the compaction that drops the dead (`_held`, kept beside the
    postings): a removed or replaced document holds nothing, though its postings stay until the compaction."""
    index = SubstringIndex()

    def live_holders() -> list[int]:
        return [len({doc for doc in postings if index._names[doc] is not None}) for postings in index._postings]

    for round_number in range(rounds):
        for name, fields in docs.items():
            index.put(name, [*fields, f"round {round_number}"])
        while index.index_some(3):
            pass
        for name in list(docs)[:removed]:
            index.remove(name)
        assert list(index._held) == live_holders()
    index._compact()  # (a memory compacts once its dead documents outnumber 4,096 and the live)
    assert list(index._held) == live_holders() == [len(set(postings)) for postings in index._postings]
    restored = SubstringIndex()
    restored.restore_state(as_read_back(index.snapshot_state()))
    assert list(restored._held) == list(index._held)


def test_a_stem_is_one_whichever_of_its_words_comes_first() -> None:
    for first, second in (("deploys", "deploy"), ("deploy", "deploys"), ("running", "run"), ("run", "running")):
        index = SubstringIndex()
        index.put("A", ["A", "t", f"it {first}"])
        index.index_some(1)
        index.put("B", ["B", "t", f"it {second}"])
        index.index_some(1)
        stems = index._stems
        assert len(stems) == len(set(stems)), (first, second, stems)
        stem_of = index._stem_of_word
        assert stem_of[index._word_ids[first]] == stem_of[index._word_ids[second]]
        assert index._stem_id(stems[stem_of[index._word_ids[first]]]) == stem_of[index._word_ids[first]]
        for query in (first, second):  # each finds both, by the stem they share
            assert set(index.search(query, lambda name: (), lambda name: 0)) == {"A", "B"}


@settings(max_examples=300, deadline=None)
@given(
    keys=st.lists(st.text(ALPHABET, max_size=4), max_size=40),
    steps=st.lists(st.tuples(st.booleans(), st.text(ALPHABET, max_size=4)), max_size=30),
    restore=st.booleans(),
)
def test_a_place_map_finds_what_a_dict_finds(keys: list[str], steps: list[tuple[bool, str]], restore: bool) -> None:
    """A PlaceMap (a table kept in the snapshot, then a dict of what was placed since) answers as a dict of each
    key's live place does, as SubstringIndex uses it: a key is placed at the end of the list, and goes by being
    popped and its item in the list set to None; its table read back from bytes is the same map."""
    places: list[str | None] = []
    model: dict[str, int] = {}
    for key in keys:
        if key not in model:
            model[key] = len(places)
            places.append(key)
    table = PlaceMap.of(places)
    assert len(table.table()) >= 2 * len(places)
    mapped = PlaceMap.restored(places, table.table().tobytes()) if restore else table
    for add, key in steps:
        if add and key not in model:
            mapped[key] = model[key] = len(places)
            places.append(key)
        elif not add and key in model:
            assert mapped.pop(key) == model.pop(key)
            places[places.index(key)] = None
        else:
            assert mapped.pop(key) is None if not add else mapped.get(key) == model[key]
    for key in {*keys, *(key for _, key in steps), "absent"}:
        assert mapped.get(key) == model.get(key)
    assert list(mapped.items()) == sorted(model.items(), key=lambda item: item[1])
    again = PlaceMap.restored(places, mapped.table().tobytes())
    assert list(again.items()) == list(mapped.items())
    copied = mapped.copy(places[:])  # (a snapshot's copy: the table shared, or made again when first read)
    places.append("late")  # a key placed after the copy is not the copy's
    mapped["late"] = len(places) - 1
    assert copied.get("late") is None and list(copied.items()) == list(again.items())


def test_a_damaged_place_table_is_refused() -> None:
    places = ["a", "b", "c"]
    table = PlaceMap.of(places).table()
    full = array("i", [1] * len(table))  # every slot taken: a probe for a key not there would never end
    for damaged in (table[:-1], array("i", [0] * 2), array("i", [*table[:-1], 9]), full):
        with pytest.raises(ValueError):
            PlaceMap.restored(places, damaged.tobytes())


def test_a_restore_of_a_restore_after_entities_came_and_went_again() -> None:
    """Every name placed after a restore and then removed leaves the restored table as it was but the list of
    names longer: the next snapshot must not keep a table too small for that list (its restore refused it)."""

    def round_trip(index: SubstringIndex) -> SubstringIndex:
        fresh = SubstringIndex()
        fresh.restore_state(as_read_back(index.snapshot_copy().snapshot_state()))
        return fresh

    live = SubstringIndex()
    live.put("keep", ["keep", "thing"])
    live.index_some(10)
    restored = round_trip(live)
    for i in range(40):
        restored.put(f"temp{i}", [f"temp{i}", "x"])
        restored.remove(f"temp{i}")
    again = round_trip(restored)
    assert again.matching("thing") == ["keep"] and again.matching("temp") == []
    copied = restored._doc_of.copy(restored._names[:]).copy(restored._names[:])  # a copy of a copy not yet made
    assert copied.get("keep") == 0


def test_a_wide_character_widens_only_its_own_block_of_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A string holds every character at the width of its widest: one emoji among a restored index's texts must
    not make them all take 4 bytes a character (joined in one string, it did)."""
    monkeypatch.setattr(search_module, "TEXT_BLOCK", 2)
    live = SubstringIndex()
    for i, body in enumerate(["plain", "text", "a \U0001f600 smile", "more", "end"]):
        live.put(f"N{i}", [f"N{i}", "t", body])
    live.index_some(10)
    restored = SubstringIndex()
    restored.restore_state(as_read_back(live.snapshot_state()))
    assert [block.isascii() for block in restored._texts._blocks] == [True, False, True]
    assert restored.matching("\U0001f600 smile") == ["N2"]
    assert sorted(restored.matching("e")) == ["N1", "N2", "N3", "N4"]
