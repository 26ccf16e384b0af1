"""Error text -> signature: what stays the same when the same error happens again elsewhere.

The same failure reappears with other paths, file and module names, line numbers, ports, addresses, PIDs,
timestamps, quoting styles and colour codes around it. A signature has two parts:

- the **shape**: the text with every such variable part replaced by a placeholder (`<path>`, `<n>`, `<q>`...),
  lower-cased and with white space folded; fuzzy matching compares shapes;
- the **evidence**: the words of the text (quoted identifiers included) that survive as tokens. A word that few
  lessons contain (`NoneType`, `E0382`, `EADDRINUSE`, `print`) is strong evidence when the query has it too;
  ranking weighs words by their rarity across lessons (see ranking.py), so user-chosen names that differ between
  occurrences simply add nothing, while a builtin or reserved name that matters still counts.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from memory_graph.search import stem

# Every pattern runs in time linear in the text: a match attempt scans a run of characters only from the run's
# start, never again from each position inside it. (`\b[a-z][a-z0-9+.-]*://`, tried at every word boundary of a
# 64 KB run of `a.a.a.` that never reaches a `://`, rescans the rest of the run each time: hours for 1 MB.)
# The guards below skip only starts whose outcome an earlier start in the same run already had, so what the
# patterns match is what the plain ones matched. `pre`, where a pattern has it, is text before the match
# proper that the pattern consumes to get to it, and is put back unchanged.
CSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
ANSI = re.compile(CSI.pattern + r"|\x1b\][^\x07]*\x07")


def word_start(chars: str) -> str:
    """`\\b` then one of `chars` (a character class that only holds word characters), written as that character
    and a look-behind: a pattern that starts with a class lets the regex engine skip every position that holds none
    of its characters, while one that starts with `\\b` is tried at every position (TIMESTAMP over a 200-line log:
    0.26 -> 0.13 ms); an alternative that starts with one fails at once on any other character."""
    return rf"{chars}(?<!\w{chars})"


_HEX_DIGIT = "[0-9a-fA-F]"
_DIGIT = r"\d"
UUID = re.compile(
    rf"{word_start(_HEX_DIGIT)}{_HEX_DIGIT}{{7}}-{_HEX_DIGIT}{{4}}-{_HEX_DIGIT}{{4}}-{_HEX_DIGIT}{{4}}-{_HEX_DIGIT}{{12}}\b"
)
TIMESTAMP = re.compile(
    rf"{word_start(_DIGIT)}"
    r"(?:\d{3}-\d{2}-\d{2}[T _]\d{2}[:_]\d{2}(?:[:_]\d{2}(?:[.,_]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b"
    r"|\d:\d{2}:\d{2}(?:[.,]\d+)?\b)"
)
# A scheme is the run of scheme characters before `://`, from its first letter at a word boundary. The run is
# entered only at its start; the atomic group takes that first letter and never tries a later one, which would
# end the run at the same place.
URL = re.compile(
    r"(?<![a-z0-9+.-])(?P<pre>(?>[a-z0-9+.-]*?(?=\b[a-z])))[a-z][a-z0-9+.-]*+://[^\s'\"<>`]+", re.IGNORECASE
)
ADDRESS = re.compile(
    r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"  # IPv4, with a port
    # IPv6 (::1, :::3000, [::1]:80): with a "::" or all eight groups, so `name.c:7:43:` stays a file:line:col.
    r"|(?<![\w:])\[?(?=[0-9a-fA-F:]*::|(?:[0-9a-fA-F]{1,4}:){7}[0-9a-fA-F])(?:[0-9a-fA-F]{0,4}:){2,7}[0-9a-fA-F]{0,4}\]?"
    r"(?::\d+)?"
)
HEX = re.compile(rf"{word_start('0')}x[0-9a-fA-F]+\b|{word_start('[0-9a-f]')}[0-9a-f]{{6,39}}\b")
EXTENSIONS = [
    "py",
    "pyc",
    "js",
    "mjs",
    "cjs",
    "ts",
    "tsx",
    "jsx",
    "json",
    "c",
    "h",
    "cc",
    "cpp",
    "hpp",
    "rs",
    "go",
    "java",
    "class",
    "jar",
    "rb",
    "pl",
    "pm",
    "php",
    "cs",
    "kt",
    "swift",
    "sh",
    "toml",
    "yaml",
    "yml",
    "lock",
    "cfg",
    "ini",
    "txt",
    "md",
    "html",
    "css",
    "o",
    "so",
    "a",
    "dll",
    "exe",
    "log",
    "cmake",
    "gradle",
    "xml",
    "sql",
    "csv",
]
EXTENSION_TERMS = frozenset(EXTENSIONS)
# Right after a file name matched by the second branch, a `-` continues the same run of name characters (foo.py-x.js
# holds two file names); a start there is allowed too. Look-behinds must have a fixed width: one per length.
_AFTER_FILE_NAME = "|".join(
    rf"(?<=\.(?:{'|'.join(e for e in EXTENSIONS if len(e) == size)}))" for size in sorted({len(e) for e in EXTENSIONS})
)
# A path: something with a slash or backslash between name characters, or a bare file name with an extension.
# The first branch starts where a run of name characters starts, outside such a run (at `~` or a slash), at a drive
# letter or at a `.~/` prefix. The second starts where a run of name-or-dash characters starts (the dashes leading
# it, before the word boundary, are its `pre`) or right after a file name it matched.
PATH = re.compile(
    r"(?:(?<![\w.@+-])|(?![\w.@+-])|(?=[A-Za-z]:|\.~[\\/]))"
    r"(?:[A-Za-z]:)?(?:[~.]{0,2}[\\/])?(?:[\w.@+-]++[\\/])+[\w.@+-]*+"
    rf"|(?:(?<![\w-])(?P<pre>-*+)|(?=-)(?:{_AFTER_FILE_NAME}))"
    rf"\b[\w-]++\.(?:{'|'.join(EXTENSIONS)})\b"
)
POSITION = re.compile(r"(?<=\S):\d+(?::\d+)?\b")
# Possessive: the run stops at the closing quote, a newline or 80 characters, and a shorter run cannot end at a
# closing quote either; giving characters back would only double the cost of every unclosed quote.
QUOTED = re.compile(r"'([^'\n]{1,80}+)'|\"([^\"\n]{1,80}+)\"|`([^`\n]{1,80}+)`|‘([^’\n]{1,80}+)’|“([^”\n]{1,80}+)”")
NUMBER = re.compile(r"(?<![A-Za-z])[-+]?\d+(?:\.\d+)*")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*|[A-Za-z]+\d+[A-Za-z0-9]*")
SPACE = re.compile(r"\s+")
# The parts of a compound name: NullPointer, HTTPServer, utf8Decode (a run of capitals before a capitalised word
# is an acronym of its own).
HUMP = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# Text that every match of a pattern contains one of: a text with none of them is not searched (a fast `in`
# instead of a failed try at every position).
_NEEDED: dict[re.Pattern[str], tuple[str, ...]] = {
    UUID: ("-",),
    TIMESTAMP: ("-", ":"),
    URL: ("://",),
    ADDRESS: (".", ":"),
    POSITION: (":",),
    PATH: ("/", "\\", "."),
}


def _runs_holding_needs(*patterns: re.Pattern[str]) -> re.Pattern[str]:
    """The runs of non-space characters that hold a character one of the patterns needs."""
    chars = re.escape("".join(sorted({needed[0] for pattern in patterns for needed in _NEEDED[pattern]})))
    return re.compile(rf"(?<!\S)[^\s{chars}]*+[{chars}]\S*+")


# Patterns tried only in the runs of non-space characters that hold one of their needed characters (a run tried
# alone, then put back). Their matches hold no white space, and what their look-arounds and `\b` read at a run's
# edge fails or passes alike on white space and on the text's end: replacing in each run gives the text that
# replacing in the whole gave, without trying the pattern at every position of the runs that have none of the
# characters. (PATH tried at each position of a 200-line log cost 1.3 ms of the 3 spent on its evidence; each
# position of the run search costs a few times less.) Not TIMESTAMP: a date and its time are apart by a space. A
# run is told by the first character of each of the pattern's needed texts (every match holds one of them).
_RUNS = {pattern: _runs_holding_needs(pattern) for pattern in (URL, ADDRESS, PATH)}

# Words so common in error output that they say nothing about which error it is.
NOISE_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "and",
        "or",
        "not",
        "no",
        "is",
        "are",
        "was",
        "be",
        "been",
        "it",
        "this",
        "that",
        "as",
        "its",
        "error",
        "errors",
        "err",
        "fatal",
        "warning",
        "warn",
        "info",
        "debug",
        "note",
        "hint",
        "help",
        "failed",
        "failure",
        "fail",
        "exception",
        "line",
        "column",
        "file",
        "files",
        "col",
        "pos",
        "position",
        "char",
        "exit",
        "code",
        "status",
    ]
)


@dataclass(frozen=True)
class Signature:
    shape: str
    evidence: frozenset[str]


def strip_ansi(text: str) -> str:
    if "\x1b" not in text:
        return text
    # An OSC sequence (ESC ]) ends at a BEL: past the last BEL none can match, and trying there would scan the
    # rest of the text from every ESC ]. Only CSI sequences are looked for in that part.
    end = text.rfind("\x07") + 1
    return ANSI.sub("", text[:end]) + CSI.sub("", text[end:])


def _replacement(
    pattern: re.Pattern[str], placeholder: str | Callable[[str], str]
) -> str | Callable[[re.Match[str]], str]:
    """What `pattern.sub` replaces a match with: the placeholder (or a function of the text matched), after the
    `pre` text a pattern consumes on the way to its match (see URL, PATH)."""
    keep = "pre" in pattern.groupindex
    if isinstance(placeholder, str):
        # A template, expanded without a Python call per match; an unmatched group expands to nothing.
        return ("\\g<pre>" if keep else "") + placeholder.replace("\\", "\\\\")

    def replacement(match: re.Match[str]) -> str:
        pre = (match.group("pre") or "") if keep else ""
        return pre + placeholder(match.group(0)[len(pre) :])

    return replacement


def _needed_in(pattern: re.Pattern[str], text: str) -> bool:
    return any(needle in text for needle in _NEEDED.get(pattern, ("",)))


def _replace(pattern: re.Pattern[str], text: str, placeholder: str | Callable[[str], str]) -> str:
    """`pattern.sub` with a placeholder (see _replacement), tried only where the pattern can match (_NEEDED, _RUNS)."""
    if not _needed_in(pattern, text):
        return text
    replacement = _replacement(pattern, placeholder)
    runs = _RUNS.get(pattern)
    if runs is None:
        return pattern.sub(replacement, text)
    return runs.sub(lambda run: pattern.sub(replacement, run.group()), text)


def _file_name(path: str) -> str:
    # A path's folders are where it happened to run; its file name (Makefile, package.json) may matter. (Sliced,
    # not split by a regex: a text of a.a.a... holds a "file name" every 2 characters.)
    trimmed = path.rstrip("\\/")
    return " " + trimmed[max(trimmed.rfind("/"), trimmed.rfind("\\")) + 1 :] + " "


def _quoted_inner(match: re.Match[str]) -> str:
    return next(g for g in match.groups() if g is not None)


def _quoted_words(text: str) -> list[str]:
    """Words inside quotes, plus quoted punctuation as a symbol token (`':'` -> `sym::`)."""
    found: list[str] = []
    for match in QUOTED.finditer(text):
        inner = _quoted_inner(match)
        words = WORD.findall(inner)
        found.extend(words)
        if not words and inner.strip():
            found.append("sym:" + inner.strip())
    return found


def _generalize_quote(match: re.Match[str]) -> str:
    # Quoted punctuation (expected ':', unexpected token '<') is syntax, part of the error's shape;
    # a quoted name is whatever the user called something.
    inner = _quoted_inner(match)
    if not re.search(r"\w", inner) and inner.strip():
        return f" '{inner.strip()}' "
    return " <q> "


# A run holding a character URL, ADDRESS or PATH needs, or else a HEX match (in the other runs: a run is taken
# whole from its start, before any position inside it is tried).
_PLACE_RUN_OR_HEX = re.compile(rf"(?P<run>{_runs_holding_needs(URL, ADDRESS, PATH).pattern})|{HEX.pattern}")
_RUN_PLACES: list[tuple[re.Pattern[str], str | Callable[[str], str]]] = [
    (URL, " "),
    (ADDRESS, " "),
    (HEX, " "),
    (PATH, _file_name),
]
# (pattern, replacement, the texts one of which a match holds: none for HEX) for each of _RUN_PLACES
_RUN_REPLACEMENTS = [(p, _replacement(p, placeholder), _NEEDED.get(p, ())) for p, placeholder in _RUN_PLACES]


def _without_run_places(match: re.Match[str]) -> str:
    text = match.group("run")
    if text is None:
        return " "  # a HEX match
    for pattern, replacement, needed in _RUN_REPLACEMENTS:
        # (Loops, not any() over a generator: this runs for every such run of a log, and the call is its cost.)
        for needle in needed:
            if needle in text:
                text = pattern.sub(replacement, text)
                break
        else:
            if not needed:
                text = pattern.sub(replacement, text)
    return text


def _without_evidence_places(text: str) -> str:
    """The text with its timestamps, UUIDs, URLs, addresses and hex numbers blanked and each path cut to its file
    name: each pattern replaced over the whole text in that order."""
    for pattern in (TIMESTAMP, UUID):
        text = _replace(pattern, text, " ")
    # URL, ADDRESS, HEX and PATH, in that order, in one pass: in each run holding a character URL, ADDRESS or
    # PATH needs, all four (the run tried alone, as in _RUNS: one run search and one Python call per run instead
    # of one per pattern); in the other runs, HEX alone.
    return _PLACE_RUN_OR_HEX.sub(_without_run_places, text)


def evidence_words(text: str) -> frozenset[str]:
    """Lower-cased words of the text (dotted names also split into their parts), minus noise words."""
    text = _without_evidence_places(strip_ansi(text))
    words: set[str] = set()
    # Each word once (a log repeats most of its words), in the order first met: the set is built as before.
    for word in dict.fromkeys([*WORD.findall(text), *_quoted_words(text)]):
        words.update(word_terms(word))
    return frozenset(words)


def word_terms(word: str) -> tuple[str, ...]:
    """word_terms, cached for words of ordinary length (a 1 MB blob in a log is not kept alive by the cache)."""
    return _cached_word_terms(word) if len(word) <= MAX_CACHED_WORD else _word_terms(word)


MAX_CACHED_WORD = 64
# A punctuation character's name, where it names nothing else: a lesson written in words ("missing colon",
# "unbalanced braces") then explains an error quoting the character (expected ':', missing '}': a `sym:` term). The
# name stays a word of its own and the character's term is added beside it, so a quoted character counts once.
# Names are matched by stem ("braces" is "brace"); "parentheses" stems apart from "parenthesis" and is listed too.
PUNCTUATION_NAMES = {
    "colon": ":",
    "semicolon": ";",
    "comma": ",",
    "parenthesis": "()",
    "parentheses": "()",
    "paren": "()",
    "brace": "{}",
    "bracket": "[]",
    "backtick": "`",
    "backslash": "\\",
    "apostrophe": "'",
    "ampersand": "&",
    "asterisk": "*",
    "tilde": "~",
    "caret": "^",
    "hyphen": "-",
}
PUNCTUATION_TERMS = {stem(name): tuple(f"sym:{char}" for char in chars) for name, chars in PUNCTUATION_NAMES.items()}


@lru_cache(maxsize=131_072)
def _cached_word_terms(word: str) -> tuple[str, ...]:
    return _word_terms(word)


def _word_terms(word: str) -> tuple[str, ...]:
    """The evidence terms of one word: itself lower-cased and stemmed (so "indented" meets "indentation"), the
    parts of a dotted, snake_case or compound name (`ArrayIndexOutOfBoundsException` also says array, index and
    bounds), and an error class's initials (AIOOBE, NPE: how people write them), minus noise words."""
    if word.startswith("sym:"):
        return (word,)
    terms: list[str] = []
    for part in [word, *word.split(".")] if "." in word else [word]:
        pieces = [piece for piece in part.split("_") if piece] if "_" in part else [part]
        humps = [hump for piece in pieces for hump in HUMP.findall(piece)]
        # Split only into real words: "CMake" or "FindQt6" would give a letter or a digit alone.
        if len(humps) >= 2 and all(len(hump) >= 2 for hump in humps):
            terms.extend(hump.lower() for hump in humps)
            if len(humps) >= 3 and IDENTITY.fullmatch(part):
                terms.append("".join(hump[0] for hump in humps).lower())
        terms.append(part.lower())
    found = tuple(
        stem(term) if term.isalpha() else term
        for term in terms
        if len(term) > 1 and term not in NOISE_WORDS and not HEX.fullmatch(term)
    )
    named = [symbol for term in found for symbol in PUNCTUATION_TERMS.get(term, ())]
    return (*found, *named) if named else found


def _without_places(text: str) -> str:
    """The text without colours, and with where and when it happened replaced: UUIDs, timestamps, URLs, addresses
    and ports, line:col positions."""
    text = strip_ansi(text)
    text = _replace(UUID, text, " <uuid> ")
    text = _replace(TIMESTAMP, text, " <time> ")
    text = _replace(URL, text, " <url> ")
    text = _replace(ADDRESS, text, " <addr> ")
    return _replace(POSITION, text, " <pos> ")


def shape(text: str) -> str:
    """The text with its variable parts replaced by placeholders, lower-cased, white space folded."""
    text = _without_places(text)
    text = QUOTED.sub(_generalize_quote, text)
    text = _replace(PATH, text, " <path> ")
    text = HEX.sub(" <hex> ", text)
    text = NUMBER.sub(" <n> ", text)
    return SPACE.sub(" ", text).strip().lower()


def twin_key(text: str) -> str:
    """What two lessons about the same error at another place or time share exactly: the text with only its
    places and times generalised (folders, line:col positions, addresses and ports, hex addresses, UUIDs,
    timestamps), the words, numbers, quoted names and file names kept. `exit code 137` and `exit code 1`, or
    `'config.yaml'` and `'train.csv'`, are different lessons."""
    text = _replace(PATH, _without_places(text), _file_name)
    text = HEX.sub(" <hex> ", text)
    return SPACE.sub(" ", text).strip().lower()


def signature(text: str) -> Signature:
    return Signature(shape=shape(text), evidence=evidence_words(text))


# An error's identity: what names the kind of failure rather than where it happened. Exception and error class
# names (`ZeroDivisionError`, `java.lang.NullPointerException`, `ParseIntError`), compiler and tool codes
# (`E0382`, `TS2304`, `C2065`, `SQLSTATE 42P01`), and errno names (`ENOENT`, `EADDRINUSE`).
IDENTITY = re.compile(
    r"\b[A-Z][A-Za-z0-9]*(?:Error|Exception|Warning|Fault|Panic)\b"
    r"|\b[A-Z]{1,4}\d{3,5}\b"
    r"|\bE[A-Z0-9]{3,15}\b"
)
# Errno names are the platform's own (ENOENT, EADDRINUSE), not any capitalised word (ERROR, EMPTY, ENTRY); the
# bare words Error and Exception name no particular error.
ERRNO_NAMES = frozenset(errno.errorcode.values())
GENERIC_IDENTITIES = frozenset({"error", "exception", "warning", "fault", "panic"})


def identity_words(text: str) -> frozenset[str]:
    """The identity tokens of an error text, lower-cased (see IDENTITY)."""
    found = set()
    for token in IDENTITY.findall(strip_ansi(text)):
        errno_like = token.isupper() and token.startswith("E") and token.isalpha()
        if (errno_like and token not in ERRNO_NAMES) or token.lower() in GENERIC_IDENTITIES:
            continue
        found.add(token.lower())
    return frozenset(found)


def quoted_words(text: str) -> frozenset[str]:
    """The terms (word_terms) of the words inside quotes: names the message mentions (a key, a file, a builtin)."""
    return frozenset(t for w in _quoted_words(strip_ansi(text)) if not w.startswith("sym:") for t in word_terms(w))


def slot_words(text: str) -> frozenset[str]:
    """The terms of the names a text mentions, which another occurrence of the same error words differently: its
    quoted words and the names of the files it mentions (`deploy.sh`, `q.sql`: the user's choice)."""
    text = strip_ansi(text)
    names: set[str] = set()
    if any(needle in text for needle in _NEEDED[PATH]):
        for match in PATH.finditer(text):
            found = match.group(0)[len(match.group("pre") or "") :]
            # The name is the user's; its extension (sh, sql) says what kind of file it is, and stays evidence.
            names.update(t for w in WORD.findall(_file_name(found)) for t in word_terms(w) if t not in EXTENSION_TERMS)
    return quoted_words(text) | names
