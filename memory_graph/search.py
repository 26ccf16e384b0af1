"""search_nodes: the reference's case-insensitive substring match, made fast and ranked.

An entity matches a query when the lower-cased query is a substring of its lower-cased name, entityType, one
of its observations (what the reference does) or a lesson's error text; a query of several words also matches
when every word appears somewhere in the entity, in any order.

Speed without changing that meaning: every entity's searchable text is split into words (runs of `\\w`), and
every distinct word is indexed by its 3-letter pieces. Any substring of a text contains its longest run of
word characters inside one of the text's words, so the entities holding the words that contain the query's
longest run are a complete candidate set; each candidate is then checked with a plain substring test. Queries
without a run of three word characters scan every entity, which is still a few milliseconds at 100k.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

WORD = re.compile(r"\w+")
GRAM = 3
FIELD_SEPARATOR = "\x00"  # cannot occur in a query that matters, so no match spans two fields
_EMPTY: frozenset[str] = frozenset()


def _grams(word: str) -> set[str]:
    return {word[i : i + GRAM] for i in range(len(word) - GRAM + 1)}


class SubstringIndex:
    """Finds the documents (entity names) whose text contains a query; see the module docstring."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._words_of: dict[str, set[str]] = {}
        self._docs_with_word: dict[str, set[str]] = {}
        self._words_with_gram: dict[str, set[str]] = {}
        # Word indexing is deferred to the first search: loading a 100k-entity graph should not pay for it.
        self._unindexed: set[str] = set()

    def put(self, name: str, fields: Iterable[str]) -> None:
        text = FIELD_SEPARATOR.join(fields).lower()
        if self._texts.get(name) == text:
            return
        self.remove(name)
        self._texts[name] = text
        self._unindexed.add(name)

    def _index_pending(self) -> None:
        for name in self._unindexed:
            self._index_words(name, self._texts[name])
        self._unindexed.clear()

    def index_some(self, count: int) -> bool:
        """Index up to `count` pending documents; True while some remain (lets a caller build in slices)."""
        for _ in range(min(count, len(self._unindexed))):
            name = self._unindexed.pop()
            self._index_words(name, self._texts[name])
        return bool(self._unindexed)

    def _index_words(self, name: str, text: str) -> None:
        words = set(WORD.findall(text))
        self._words_of[name] = words
        for word in words:
            docs = self._docs_with_word.get(word)
            if docs is None:
                docs = self._docs_with_word[word] = set()
                for gram in _grams(word):
                    self._words_with_gram.setdefault(gram, set()).add(word)
            docs.add(name)

    def remove(self, name: str) -> None:
        if self._texts.pop(name, None) is None:
            return
        if name in self._unindexed:
            self._unindexed.discard(name)
            return
        for word in self._words_of.pop(name):
            docs = self._docs_with_word[word]
            docs.discard(name)
            if not docs:
                del self._docs_with_word[word]
                for gram in _grams(word):
                    holders = self._words_with_gram[gram]
                    holders.discard(word)
                    if not holders:
                        del self._words_with_gram[gram]

    def _candidates(self, fragment: str) -> set[str] | None:
        """Documents that may contain `fragment` (lower-cased), or None when the index cannot narrow."""
        runs = WORD.findall(fragment)
        longest = max(runs, key=len, default="")
        if len(longest) < GRAM:
            return None
        holders = sorted((self._words_with_gram.get(g, _EMPTY) for g in _grams(longest)), key=len)
        words = set(holders[0]).intersection(*holders[1:]) if holders[0] else set()
        found: set[str] = set()
        for word in words:
            if longest in word:
                found.update(self._docs_with_word[word])
        return found

    def matching(self, query: str) -> list[str]:
        """Names whose text contains the whole query, or (several words) every word of it; unordered."""
        if self._unindexed:
            self._index_pending()
        phrase = query.lower()
        words = phrase.split()
        pool = self._candidates(phrase)
        if len(words) > 1 and pool is not None:
            # Phrase matches, plus entities holding every word: the intersection of the narrowable words.
            narrowed = [c for c in map(self._candidates, words) if c is not None]
            pool = pool | set.intersection(*narrowed) if narrowed else None
        texts = self._texts
        names: Iterable[str] = texts if pool is None else pool
        if len(words) > 1:
            return [n for n in names if phrase in texts[n] or all(w in texts[n] for w in words)]
        return [n for n in names if phrase in texts[n]]


def match_tier(query: str, name: str, entity_type: str, observations: Sequence[str]) -> int:
    """0 is best: exact name, name prefix, name part, type, observation, other text, words in any order."""
    q = query.lower()
    lowered = name.lower()
    if lowered == q:
        return 0
    if lowered.startswith(q):
        return 1
    if q in lowered:
        return 2
    if q in entity_type.lower():
        return 3
    if any(q in o.lower() for o in observations):
        return 4
    return 5
