"""Build memory_graph/thesaurus.txt, the word relations search_nodes expands a query with, from Princeton WordNet 3.0.

Run once when changing the method (`apt-get install wordnet-base`, then
`.venv/bin/python bench/make_thesaurus.py /usr/share/wordnet`); the generated file is committed, so the
server needs neither WordNet nor any download. For each common noun and verb (one WordNet has seen tagged in
text), its two most frequent senses give: synonyms (the sense's other words) and near words (the words of its
direct hypernyms and hyponyms). Everything is stored as search.py's stems, single words only, common ones only.
WordNet's licence (Princeton, BSD-like) allows redistribution with its notice, kept in the file's header.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_graph.search import STOP_WORDS, WORD, stem
from memory_graph.thesaurus import write_tables

SENSES = 2
MAX_NEAR = 24
POINTERS = {"@", "@i", "~", "~i", "+"}  # hypernyms, hyponyms, derivations ("teacher" and "teach")
HYPONYMS = {"~", "~i"}
KIND_DEPTH = 3
MAX_KINDS = 300
MAX_DEFINED = 200
POS_SHARE = 0.1
POS_MIN_USES = 10  # fewer tagged uses of the other part of speech say nothing about which one is usual


@lru_cache(maxsize=1)
def tagged_counts(folder: Path) -> dict[str, dict[str, int]]:
    """lemma -> part of speech ("n", "v") -> how often its senses were seen tagged in text (cntlist.rev)."""
    counts: dict[str, dict[str, int]] = {}
    for line in (folder / "cntlist.rev").read_text(encoding="utf-8").splitlines():
        sense_key, _, count = line.split()
        lemma, _, rest = sense_key.partition("%")
        pos = {"1": "n", "2": "v"}.get(rest[:1])
        if pos is not None:
            by_pos = counts.setdefault(lemma, {})
            by_pos[pos] = by_pos.get(pos, 0) + int(count)
    return counts


@lru_cache(maxsize=2)
def read_index(folder: Path, pos: str) -> dict[str, list[str]]:
    """lemma -> its tagged (common) senses' synset offsets, most frequent first. A lemma whose senses in this part
    of speech were seen tagged under POS_SHARE as often as in the other (seen at least POS_MIN_USES times) is
    left out of it: "dog" the verb (2 uses against 42 of the noun) would bring "track" and "follow" to a question
    about a pet."""
    counts = tagged_counts(folder)
    other = "v" if pos == "noun" else "n"
    senses: dict[str, list[str]] = {}
    for line in (folder / f"index.{pos}").read_text(encoding="utf-8").splitlines():
        if line.startswith(" "):
            continue
        parts = line.split()
        lemma, pointer_count = parts[0], int(parts[3])
        tagged = int(parts[5 + pointer_count])
        offsets = parts[6 + pointer_count :]
        seen = counts.get(lemma, {})
        if seen.get(other, 0) >= POS_MIN_USES and seen.get(pos[0], 0) < POS_SHARE * seen[other]:
            continue
        if lemma.isalpha():
            senses[lemma] = offsets[: min(SENSES, max(tagged, 1))]
    return senses


Synset = tuple[list[str], list[tuple[str, str]], list[tuple[str, str]], str]


@lru_cache(maxsize=1)
def all_synsets(folder: Path) -> dict[tuple[str, str], Synset]:
    """Every noun and verb synset (each table reads them: read once)."""
    return {**read_data(folder, "noun"), **read_data(folder, "verb")}


def read_data(folder: Path, pos: str) -> dict[tuple[str, str], Synset]:
    """synset offset -> (its words, the offsets of its hypernyms, hyponyms and derivations, the offsets of its
    hyponyms alone, its definition)."""
    synsets: dict[tuple[str, str], Synset] = {}
    for line in (folder / f"data.{pos}").read_text(encoding="utf-8").splitlines():
        if line.startswith(" "):
            continue
        head, _, gloss = line.partition(" | ")
        parts = head.split()
        count = int(parts[3], 16)
        words = [parts[4 + 2 * i].lower() for i in range(count)]
        rest = parts[4 + 2 * count :]
        pointers = [rest[1 + 4 * i : 5 + 4 * i] for i in range(int(rest[0]))]
        linked = [(p[2], p[1]) for p in pointers if p[0] in POINTERS and p[2] in "nv"]
        hyponyms = [(p[2], p[1]) for p in pointers if p[0] in HYPONYMS and p[2] in "nv"]
        definition = gloss.split('; "', 1)[0].split(";", 1)[0]
        synsets[(pos[0], parts[0])] = (words, linked, hyponyms, definition)
    return synsets


def relations(folder: Path) -> dict[str, tuple[set[str], set[str]]]:
    table: dict[str, tuple[set[str], set[str]]] = {}
    synsets = all_synsets(folder)
    for pos in ("noun", "verb"):
        common = read_index(folder, pos)
        for lemma, offsets in common.items():
            key = stem(lemma)
            if key in STOP_WORDS or len(key) < 3:
                continue
            same, near = table.setdefault(key, (set(), set()))
            for offset in offsets:
                words, linked, _, _ = synsets[(pos[0], offset)]
                same.update(stem(w) for w in words if w.isalpha())
                for other in linked:
                    if other in synsets:
                        near.update(stem(w) for w in synsets[other][0] if w.isalpha())
            same.discard(key)
            near.difference_update(same | {key})
    return table


def kinds(folder: Path, table: dict[str, tuple[set[str], set[str]]]) -> dict[str, set[str]]:
    """stem -> the words of its kinds two and three levels down (a dog's hounds' beagles), beyond its near words:
    what a memory names ("Beagle") is often a kind of what a person asks about ("the dog")."""
    synsets = all_synsets(folder)
    found: dict[str, set[str]] = {}
    for pos in ("noun", "verb"):
        for lemma, offsets in read_index(folder, pos).items():
            key = stem(lemma)
            if key not in table:
                continue
            same, near = table[key]
            words = found.setdefault(key, set())
            level = [(pos[0], offset) for offset in offsets]
            for depth in range(KIND_DEPTH):
                level = [child for synset in level for child in synsets[synset][2] if child in synsets]
                if depth == 0:
                    continue
                deeper = {stem(w) for synset in level for w in synsets[synset][0] if w.isalpha()}
                deeper -= same | near | {key}
                if len(words | deeper) > MAX_KINDS:
                    break  # a word with that many kinds ("person") is too general to stand for any of them
                words |= deeper
    return {key: words for key, words in found.items() if words}


def defined(folder: Path) -> dict[str, set[str]]:
    """definition word -> the words WordNet defines with it ("gland" -> hyperthyroidism, "an overactive thyroid
    gland"), over the common senses of every noun and verb; a word used in more than MAX_DEFINED definitions
    ("person", "act") names no particular thing and is left out."""
    synsets = all_synsets(folder)
    found: dict[str, set[str]] = {}
    for pos in ("noun", "verb"):
        seen: set[tuple[str, str]] = set()
        for offsets in read_index(folder, pos).values():
            for offset in offsets:
                if (pos[0], offset) in seen:
                    continue
                seen.add((pos[0], offset))
                words, _, _, definition = synsets[(pos[0], offset)]
                lemmas = {stem(w) for w in words if w.isalpha() and w not in STOP_WORDS and len(w) >= 3}
                for word in WORD.findall(definition.lower()):
                    key = stem(word)
                    if word in STOP_WORDS or key in STOP_WORDS or len(key) < 3 or not key.isalpha():
                        continue
                    found.setdefault(key, set()).update(lemmas - {key})
    return {key: words for key, words in found.items() if 0 < len(words) <= MAX_DEFINED}


def main(folder: Path) -> None:
    table = relations(folder)
    lines = []
    for key, (same, near) in sorted(table.items()):
        if same or near:
            lines.append(f"{key}:{','.join(sorted(same))}|{','.join(sorted(near)[:MAX_NEAR])}")
    kind_lines = [f"{key}:{','.join(sorted(words))}" for key, words in sorted(kinds(folder, table).items())]
    defined_lines = [f"{key}:{','.join(sorted(words))}" for key, words in sorted(defined(folder).items())]
    copyright_file = folder.parent / "doc" / "wordnet-base" / "copyright"
    text = copyright_file.read_text(encoding="utf-8").split("License: WordNet3.0\n", 1)[1].split("\n\n", 1)[0]
    notice = "\n".join(line[1:].replace(".", "", 1) if line == " ." else line[1:] for line in text.splitlines())
    target = Path(__file__).resolve().parents[1] / "memory_graph" / "thesaurus.txt"
    write_tables(target, notice, {"relations": lines, "kinds": kind_lines, "defined": defined_lines})
    print(
        f"{len(lines)} entries, {len(kind_lines)} kinds, {len(defined_lines)} defined, "
        f"{target.stat().st_size / 1e6:.2f} MB"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/usr/share/wordnet"))
