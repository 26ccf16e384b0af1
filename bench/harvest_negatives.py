"""Harvest real error output that no errors-dev.json lesson covers: negatives for fitting the abstention.

    .venv/bin/python bench/harvest_negatives.py   # writes bench/data/harvested-negatives.json

Each case really runs a tool on this machine (python3, node, gcc, sh, sqlite3, git, perl, jq, tar) in a scratch
folder and keeps its output: the last line that names an error is the message, the whole output is the log.
The cases are chosen to be kinds of error that none of the 26 errors-dev.json classes is, and are not taken from
negatives-dev.json (which stays for measuring only).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data" / "harvested-negatives.json"
PY = [sys.executable, "-c"]
# (id, error type, command); run by the shell in a scratch folder.
CASES: list[tuple[str, str, list[str]]] = [
    ("py-attr-none", "runtime", [*PY, "x = None\nx.strip()"]),
    ("py-import", "runtime", [*PY, "import nonexistent_mod_xyz"]),
    ("py-type-add", "runtime", [*PY, "1 + 'a'"]),
    ("py-value-int", "runtime", [*PY, "int('abc')"]),
    ("py-index", "runtime", [*PY, "[][3]"]),
    ("py-name", "runtime", [*PY, "print(undefined_thing)"]),
    ("py-fnf", "runtime", [*PY, "open('/nonexistent/file.txt')"]),
    ("py-perm", "runtime", [*PY, "open('/proc/1/mem', 'rb').read()"]),
    ("py-isdir", "runtime", [*PY, "open('/tmp')"]),
    ("py-assert", "runtime", [*PY, "assert 1 == 2, 'totals differ'"]),
    ("py-unpack", "runtime", [*PY, "a, b = [1, 2, 3]"]),
    ("py-args", "runtime", [*PY, "def f(a): pass\nf(1, 2)"]),
    ("py-iter", "runtime", [*PY, "for x in 5: pass"]),
    ("py-hash", "runtime", [*PY, "{[1]: 2}"]),
    ("py-stopiter", "runtime", [*PY, "next(iter([]))"]),
    ("py-sqrt", "runtime", [*PY, "import math; math.sqrt(-1)"]),
    ("py-encode", "runtime", [*PY, "'\u00e9'.encode('ascii')"]),
    ("py-modattr", "runtime", [*PY, "import os; os.nothing_here"]),
    ("py-unbound", "runtime", [*PY, "def f():\n    print(v)\n    v = 1\nf()"]),
    ("py-fstring", "syntax", [*PY, "f'{'"]),
    ("py-eol", "syntax", [*PY, "x = 'abc"]),
    ("py-return-outside", "syntax", [*PY, "return 5"]),
    ("py-date", "runtime", [*PY, "import datetime; datetime.date(2020, 13, 1)"]),
    ("py-regex", "runtime", [*PY, "import re; re.compile('(')"]),
    ("py-memoryview", "runtime", [*PY, "memoryview('text')"]),
    ("node-ref", "runtime", ["node", "-e", "foo.bar()"]),
    ("node-type", "runtime", ["node", "-e", "null.x"]),
    ("node-notfunc", "runtime", ["node", "-e", "const a = {}; a.run()"]),
    ("node-module", "runtime", ["node", "-e", "require('left-pad-nope')"]),
    ("node-range", "runtime", ["node", "-e", "new Array(-1)"]),
    ("node-const", "runtime", ["node", "-e", "const a = 1; a = 2"]),
    ("node-enoent", "runtime", ["node", "-e", "require('fs').readFileSync('/nope.txt')"]),
    ("gcc-undeclared", "build", ["sh", "-c", "printf 'int main(){return y;}' > a.c && gcc -c a.c"]),
    ("gcc-header", "build", ["sh", "-c", "printf '#include <nothere.h>\\n' > b.c && gcc -c b.c"]),
    ("gcc-undefref", "build", ["sh", "-c", "printf 'int g(void);int main(){return g();}' > c.c && gcc c.c"]),
    ("gcc-semicolon", "build", ["sh", "-c", "printf 'int main(){int x = 1 return x;}' > d.c && gcc -c d.c"]),
    ("sh-notfound", "shell", ["sh", "-c", "no_such_command_xyz"]),
    ("sh-cd", "shell", ["sh", "-c", "cd /no/such/dir"]),
    ("sh-perm", "shell", ["sh", "-c", "touch s.sh && ./s.sh"]),
    ("bash-unbound", "shell", ["bash", "-uc", "echo $UNSET_VAR_XYZ"]),
    ("bash-badsub", "shell", ["bash", "-c", "echo ${x"]),
    ("sqlite-table", "database", ["sqlite3", ":memory:", "select * from missing_table;"]),
    ("sqlite-syntax", "database", ["sqlite3", ":memory:", "selec 1;"]),
    ("sqlite-unique", "database", ["sqlite3", ":memory:", "create table t(a unique); insert into t values(1),(1);"]),
    ("git-pathspec", "git", ["sh", "-c", "git init -q r && cd r && git add nothing.txt"]),
    ("git-branch", "git", ["sh", "-c", "git init -q r2 && cd r2 && git checkout no-such-branch"]),
    ("git-clone", "git", ["git", "clone", "/no/such/repo.git"]),
    ("perl-div", "runtime", ["perl", "-e", "my $x = 1 / 0;"]),
    ("perl-syntax", "syntax", ["perl", "-e", "if (1) { print 1"]),
    ("jq-parse", "tool", ["sh", "-c", "echo '{bad' | jq ."]),
    ("tar-missing", "tool", ["tar", "xf", "missing.tar"]),
    ("ls-missing", "shell", ["ls", "/no/such/path"]),
]
ERROR_LINE = re.compile(r"error|exception|fatal|denied|not found|no such|cannot|undefined|invalid|refused", re.I)


def key_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    hits = [line for line in lines if ERROR_LINE.search(line)]
    return (hits or lines or [""])[-1]


def main() -> int:
    queries = []
    with tempfile.TemporaryDirectory() as folder:
        for case_id, kind, command in CASES:
            run = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=60, check=False)
            output = (run.stdout + run.stderr).strip()
            if run.returncode == 0 or not output:
                print(f"skip {case_id}: no error", file=sys.stderr)
                continue
            queries.append(
                {
                    "id": f"harv-{case_id}",
                    "expected": None,
                    "command": command,
                    "errorPattern": {"type": kind, "message": key_line(output), "context": ""},
                    "log": f"$ {' '.join(command)}\n{output}",
                }
            )
    about = "Real error output harvested on this machine by bench/harvest_negatives.py; no errors-dev.json class."
    OUT.write_text(json.dumps({"about": about, "lessons": [], "queries": queries}, indent=1) + "\n", encoding="utf-8")
    print(f"{len(queries)} negatives -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
