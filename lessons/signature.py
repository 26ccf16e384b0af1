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

import re
from dataclasses import dataclass

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
TIMESTAMP = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T _]\d{2}[:_]\d{2}(?:[:_]\d{2}(?:[.,_]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b"
    r"|\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b"
)
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>`]+", re.IGNORECASE)
ADDRESS = re.compile(
    r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"  # IPv4, with a port
    r"|(?<![\w:])\[?(?:[0-9a-fA-F]{0,4}:){2,7}[0-9a-fA-F]{0,4}\]?(?::\d+)?"  # IPv6 (::1, :::3000, [::1]:80)
)
HEX = re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{7,40}\b")
# A path: something with a slash or backslash between name characters, or a bare file name with an extension.
PATH = re.compile(
    r"(?:[A-Za-z]:)?(?:[~.]{0,2}[\\/])?(?:[\w.@+-]+[\\/])+[\w.@+-]*"
    r"|\b[\w-]+\.(?:py|pyc|js|mjs|cjs|ts|tsx|jsx|json|c|h|cc|cpp|hpp|rs|go|java|class|jar|rb|pl|pm|php|cs|kt|"
    r"swift|sh|toml|ya?ml|lock|cfg|ini|txt|md|html|css|o|so|a|dll|exe|log|cmake|gradle|xml|sql|csv)\b"
)
POSITION = re.compile(r"(?<=\S):\d+(?::\d+)?\b")
QUOTED = re.compile(r"'([^'\n]{1,80})'|\"([^\"\n]{1,80})\"|`([^`\n]{1,80})`|‘([^’\n]{1,80})’|“([^”\n]{1,80})”")
NUMBER = re.compile(r"(?<![A-Za-z])[-+]?\d+(?:\.\d+)*")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*|[A-Za-z]+\d+[A-Za-z0-9]*")
SPACE = re.compile(r"\s+")

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
    return ANSI.sub("", text)


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


def evidence_words(text: str) -> frozenset[str]:
    """Lower-cased words of the text (dotted names also split into their parts), minus noise words."""
    text = strip_ansi(text)
    text = HEX.sub(" ", ADDRESS.sub(" ", URL.sub(" ", UUID.sub(" ", TIMESTAMP.sub(" ", text)))))
    # A path's folders are where it happened to run; its file name (Makefile, package.json) may matter.
    text = PATH.sub(lambda m: " " + re.split(r"[\\/]", m.group(0).rstrip("\\/"))[-1] + " ", text)
    words: set[str] = set()
    for word in [*WORD.findall(text), *_quoted_words(text)]:
        lowered = word.lower()
        parts = [lowered, *lowered.split(".")] if "." in lowered and not lowered.startswith("sym:") else [lowered]
        for part in parts:
            if part.startswith("sym:") or (len(part) > 1 and part not in NOISE_WORDS and not HEX.fullmatch(part)):
                words.add(part)
    return frozenset(words)


def shape(text: str) -> str:
    """The text with its variable parts replaced by placeholders, lower-cased, white space folded."""
    text = strip_ansi(text)
    text = UUID.sub(" <uuid> ", text)
    text = TIMESTAMP.sub(" <time> ", text)
    text = URL.sub(" <url> ", text)
    text = ADDRESS.sub(" <addr> ", text)
    text = POSITION.sub(" <pos> ", text)
    text = QUOTED.sub(_generalize_quote, text)
    text = PATH.sub(" <path> ", text)
    text = HEX.sub(" <hex> ", text)
    text = NUMBER.sub(" <n> ", text)
    return SPACE.sub(" ", text).strip().lower()


def signature(text: str) -> Signature:
    return Signature(shape=shape(text), evidence=evidence_words(text))


def quoted_words(text: str) -> frozenset[str]:
    """The lower-cased words inside quotes: names the message mentions (a key, a file, a builtin)."""
    return frozenset(w.lower() for w in _quoted_words(strip_ansi(text)) if not w.startswith("sym:"))
