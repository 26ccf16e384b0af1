# ruff: noqa: E501  (the cases are data: source files, commands and lesson texts are kept on one line each)
"""Harvest a FITTING corpus of real error output: lessons (3 styles per class), positive and negative queries, and
distractor lessons, for the error->lesson retrieval system.

    .venv/bin/python bench/harvest_lessons.py   # writes bench/data/harvested-lessons.json (runs as root for psql)

Every message and log below comes from really running a tool (python, gcc/g++, ld, rustc, cargo, javac/java, node,
npm, git, bash/sh, make, perl, sqlite3, psql/postgres, jq, tar, pip, cmake, openssl, curl, mvn) in a scratch folder
under /tmp, with short timeouts and no network.  Only the *situations* (source files, commands) are written here; the
error text is whatever the tool printed.  Scratch paths are replaced by /home/user/<project>.

The error kinds of the evaluation sets (errors-dev / negatives-dev) are excluded: see EXCLUDED below, which is also
checked against every harvested key line.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "data" / "harvested-lessons.json"
SCRATCH = Path("/tmp/harvest-scratch")
HOME = SCRATCH / "home"
REMOTES = SCRATCH / "remotes"
PGDIR = SCRATCH / "pg"
PGPORT = "5432"
PGBIN = "/usr/lib/postgresql/15/bin"
VENV = str(HERE.parent / ".venv")

ENV = {
    "PATH": f"{VENV}/bin:/root/.cargo/bin:/usr/local/bin:/usr/bin:/bin",
    "HOME": str(HOME),
    "USER": "user",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TERM": "dumb",
    "NO_COLOR": "1",
    "RUSTUP_HOME": "/root/.rustup",
    "CARGO_HOME": "/root/.cargo",
    "CARGO_TERM_COLOR": "never",
    "CARGO_NET_OFFLINE": "true",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_DATE": "2025-03-14T09:26:53+0000",
    "GIT_COMMITTER_DATE": "2025-03-14T09:26:53+0000",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PIP_NO_INDEX": "1",
    "npm_config_update_notifier": "false",
    "npm_config_fund": "false",
    "npm_config_audit": "false",
    "npm_config_offline": "true",
    "PGHOST": str(PGDIR),
    "PGPORT": PGPORT,
    "PGUSER": "postgres",
    "MAVEN_OPTS": "-Xshare:auto",
}

# Kinds of error that belong to the evaluation sets: none may appear in this fitting corpus.
EXCLUDED = re.compile(
    r"missing separator|No rule to make target|No matching distribution|IndentationError|TabError|JSONDecodeError"
    r"|KeyError|RecursionError|maximum recursion|Maximum call stack|expected ':'|UnicodeDecodeError|can't decode"
    r"|ZeroDivisionError|division by zero|divide by zero|/ by zero|not a git repository|CONFLICT \(|Automatic merge failed"
    r"|\[rejected\]|non-fast-forward|detached HEAD|not currently on a branch|would be overwritten"
    r"|ArrayIndexOutOfBounds|IndexOutOfBounds|index out of bounds|NullPointerException|EADDRINUSE|address already in use"
    r"|JSON\.parse|in JSON at position|Missing script|Global symbol|E0308|mismatched types|E0382|moved value"
    r"|unwrap\(\)|find_package|heap-buffer-overflow|AddressSanitizer|OverflowError|math range error|BrokenPipe"
    r"|TimeoutExpired|timed out after|MissingSectionHeader|PicklingError|Can't pickle|float NaN|HTTP Error 404"
    r"|line continuation character",
    re.I,
)


# --------------------------------------------------------------------------------------------------- running cases
def setup_scratch() -> None:
    if SCRATCH.exists():
        shutil.rmtree(SCRATCH)
    HOME.mkdir(parents=True)
    REMOTES.mkdir()
    (HOME / ".gitconfig").write_text(
        "[user]\n\tname = Dev User\n\temail = dev@example.com\n[init]\n\tdefaultBranch = main\n"
        "[advice]\n\tdetachedHead = false\n[color]\n\tui = never\n",
        encoding="utf-8",
    )


def clean(text: str, casedir: Path, proj: str) -> str:
    text = text.replace(str(casedir), f"/home/user/{proj}")
    text = text.replace(str(REMOTES), "/srv/git")
    text = text.replace(str(HOME), "/home/user")
    text = text.replace(str(PGDIR), "/var/run/postgresql")
    text = text.replace(str(SCRATCH), "/home/user/tmp")
    text = text.replace(VENV, "/home/user/.venv")
    text = text.replace("/root/.pyenv/versions/3.11.7", "/usr/local")
    text = text.replace("/root/.cargo", "/home/user/.cargo").replace("/root/.rustup", "/home/user/.rustup")
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d_\d\d_\d\d_\d{3}Z", "2025-03-14T09_26_53_589Z", text)  # npm log names
    text = re.sub(r"(?m)^[0-9A-F]{12,16}:error:", "40F7C1E2B27F0000:error:", text)  # openssl thread ids
    text = re.sub(r"\bcc[A-Za-z0-9]{6}\.o\b", "ccXXXXXX.o", text)  # gcc temporaries
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)  # colour codes
    text = re.sub(r"after \d+ ms:", "after 0 ms:", text)  # curl timings
    text = re.sub(r"in \d+\.\d+s\b", "in 0.02s", text)  # pytest timings
    return text


# Files are written and processes started under one lock: a fork in another thread while a script is still open
# for writing would make executing that script fail with "Text file busy".
SPAWN_LOCK = threading.Lock()


def sh(cmd: str, cwd: Path, timeout: float) -> tuple[int, str]:
    with SPAWN_LOCK:
        proc = subprocess.Popen(
            ["bash", "-c", cmd],
            cwd=cwd,
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:  # the harness' own timeout, never kept as data
        os.killpg(proc.pid, 9)
        proc.communicate()
        return -999, ""


def run_case(case: dict) -> dict:
    """Write the files, run hidden setup, visible preceding steps, then the failing command."""
    casedir = SCRATCH / "cases" / case["id"]
    casedir.mkdir(parents=True)
    with SPAWN_LOCK:
        for rel, content in case.get("files", {}).items():
            mode = None
            if isinstance(content, tuple):
                content, mode = content
            p = casedir / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(content, encoding="utf-8")
            if mode is not None:
                p.chmod(mode)
            os.utime(p, (1741944413, 1741944413))  # fixed mtime, so that `ls -l` output is reproducible
    cwd = casedir / case.get("cwd", ".")
    cwd.mkdir(parents=True, exist_ok=True)
    timeout = case.get("timeout", 20)
    for step in case.get("setup", []):
        rc, out = sh(step.replace("@REMOTES@", str(REMOTES)), cwd, timeout)
        if rc != 0:
            return {**case, "ok": False, "why": f"setup failed: {step}: {out[-300:]}"}
    log_parts = []
    proj = case.get("proj", "proj")
    for step in case.get("pre", []):
        rc, out = sh(step, cwd, timeout)
        log_parts.append(f"$ {step}\n{clean(out, casedir, proj)}".rstrip("\n"))
    rc, out = sh(case["run"], cwd, timeout)
    out = clean(out, casedir, proj).rstrip()
    log_parts.append(f"$ {case['run']}\n{out}")
    if rc == 0 or rc == -999 or not out.strip():
        return {**case, "ok": False, "why": f"rc={rc} out={out[-300:]!r}"}
    key = find_key(out, case.get("key"), case.get("fam", "gen"), case.get("mode"))
    if not key:
        return {**case, "ok": False, "why": f"no key line for /{case.get('key')}/ in {out[-400:]!r}"}
    return {**case, "ok": True, "out": out, "log": "\n".join(log_parts), "msg": key}


AUTO_KEY = {
    "node": (r"^[A-Z]\w*(Error|Exception)\b( \[\w+\])?:|^Error\b", "first"),
    "java": (r"^Exception in thread|^Error:|^error:", "first"),
    "rust": (r"^error(\[E\d+\])?:", "first"),
    "cc": (r"(fatal )?error:|undefined reference|multiple definition", "first"),
    "javac": (r": error:|^error:", "first"),
    "git": (r"^(fatal|error):", "first"),
    "pg": (r"ERROR:|FATAL:|^psql: error", "first"),
    "make": (r"\*\*\*", "first"),
    "gen": (
        r"error|exception|fatal|denied|not found|no such|cannot|can't|couldn't|could not|unable|undefined|invalid"
        r"|refused|unknown|failed|unexpected|not allowed|illegal|bad |missing|unrecognized|expected|not defined"
        r"|refusing|must |extra operand|conflicting|too many|requires|not in |exists|not permitted|mismatch",
        "first",
    ),
}


def find_key(out: str, key: str | None, fam: str, mode: str | None) -> str:
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    if key is None and fam == "py":
        return lines[-1] if lines else ""
    pat, default_mode = AUTO_KEY.get(fam, AUTO_KEY["gen"]) if key is None else (key, "first")
    hits = [i for i, ln in enumerate(lines) if re.search(pat, ln, 0 if key else re.I)]
    if not hits:
        if key:
            return ""
        plain = [ln for ln in lines if not re.match(r"^(Try '|Usage:|usage:|\$ )", ln)]
        return (plain or lines or [""])[0]
    i = hits[-1] if (mode or default_mode) == "last" else hits[0]
    # CMake puts the message on the indented line after "CMake Error at file:line (command):"
    if lines[i].startswith("CMake Error") and lines[i].endswith(":") and i + 1 < len(lines):
        return f"{lines[i]} {lines[i + 1]}"
    return lines[i]


# ------------------------------------------------------------------------------------------------ case helpers
def py(ctx, name, code, args="", pre=(), proj="proj", **kw):
    return dict(
        ctx=ctx, files={name: code, **kw.pop("files", {})}, run=f"python3 {name}{args}", pre=list(pre), proj=proj, **kw
    )


def cmd(ctx, run, files=None, pre=(), setup=(), proj="proj", **kw):
    return dict(ctx=ctx, files=files or {}, run=run, pre=list(pre), setup=list(setup), proj=proj, **kw)


GIT_INIT = ["git init -q .", "printf 'demo\\n' > README.md", "git add README.md", "git commit -q -m 'initial commit'"]


def git(ctx, run, extra_setup=(), pre=(), proj="proj", files=None):
    return cmd(ctx, run, files=files, setup=GIT_INIT + list(extra_setup), pre=pre, proj=proj)


def with_remote(name="origin"):
    # a local bare repository stands in for the server; unique per case via the case folder name
    return [
        "git init -q --bare @REMOTES@/$(basename $PWD).git",
        f"git remote add {name} @REMOTES@/$(basename $PWD).git",
    ]


# =============================================================================================== the 47 classes
# Each class: key = regex for the key error line; rtype = category word; qtype = free-text caller label;
# A = (type, message) assistant summary of variant 0; B = (type, message) generalized; obs; verify; variants[5].
CLASSES: list[dict] = []


def C(name, key, rtype, qtype, A, B, obs, verify, variants, fam="gen", mode="first", bctx=""):
    CLASSES.append(
        dict(
            name=name,
            key=key,
            rtype=rtype,
            qtype=qtype,
            A=A,
            B=B,
            obs=obs,
            verify=verify,
            variants=variants,
            fam=fam,
            mode=mode,
            bctx=bctx,
        )
    )


# ---------------------------------------------------------------------------------------------------- Python
C(
    "PY_ATTRIBUTE_ON_NONE",
    r"^AttributeError: 'NoneType' object has no attribute",
    "runtime",
    "python error",
    (
        "python exception",
        "The version parser blew up because re.match() found nothing and returned None, then we called .group(1) on it",
    ),
    ("python", "AttributeError: 'NoneType' object has no attribute '<attribute>'"),
    [
        "A value that was expected to be an object is None, usually because a function returned None: a regex that did not match, dict.get() of a missing key, a function without a return statement, or an in-place method such as list.sort().",
        "Fix: trace where the None comes from and either handle the None case explicitly (if value is None: ...) or make the producer return the object.",
    ],
    ("python3 <script>.py", "the script runs to the end", ["exit code 0", "no 'NoneType' object has no attribute"]),
    [
        py(
            "parsing a version string with a regex",
            "version.py",
            r"""import re

line = "version=unknown"
m = re.match(r"version=(\d+)", line)
print("major:", m.group(1))
""",
        ),
        py(
            "reading optional settings from a config dict",
            "settings.py",
            r"""cfg = {"host": "db.internal", "user": "app"}
port = cfg.get("port")
print("connecting on", port.strip())
""",
            proj="billing",
        ),
        py(
            "loader function forgot to return its list",
            "load_items.py",
            r"""def load_items(path):
    items = [line.strip() for line in ["a", "b"]]
    items.sort()

items = load_items("items.txt")
items.append("c")
print(items)
""",
            pre=["ls"],
            proj="inventory",
        ),
        py(
            "sorting names and reversing the result",
            "names.py",
            r"""names = ["carol", "alice", "bob"]
ordered = names.sort()
ordered.reverse()
print(ordered)
""",
        ),
        py(
            "reading a tag from an XML response",
            "parse_feed.py",
            r"""import xml.etree.ElementTree as ET

doc = ET.fromstring("<feed><entry><title>x</title></entry></feed>")
updated = doc.find("updated")
print(updated.text)
""",
            proj="feedreader",
        ),
    ],
    fam="py",
    mode="last",
    bctx="running a Python script",
)

C(
    "PY_MODULE_NOT_FOUND",
    r"^ModuleNotFoundError: No module named",
    "dependency",
    "python import",
    (
        "python import error",
        "App wouldn't start: flask isn't installed in this virtualenv, so `import flask` failed on line 1",
    ),
    ("python", "ModuleNotFoundError: No module named '<module>'"),
    [
        "The imported package is not installed in the interpreter that runs the code (wrong virtualenv, missing pip install, or a misspelled name), or a local package is not on sys.path.",
        "Fix: install the package into the same interpreter (python3 -m pip install <package>) or activate the right venv, and for local packages run from the project root or fix the package layout.",
    ],
    ("python3 -c 'import <module>'", "the import succeeds silently", ["exit code 0", "no ModuleNotFoundError"]),
    [
        py("starting a small web app", "app.py", "from flask import Flask\n\napp = Flask(__name__)\n", proj="webapp"),
        py(
            "script uploading backups to S3",
            "backup.py",
            "import os\nimport boto3\n\ns3 = boto3.client('s3')\n",
            proj="ops",
        ),
        py(
            "loading environment variables from .env",
            "manage.py",
            "import sys\nfrom dotenv import load_dotenv\n\nload_dotenv()\n",
            pre=["python3 --version"],
            proj="api",
        ),
        py(
            "importing a project helper package from a sub folder",
            "scripts/report.py",
            "from myapp.utils import format_row\n\nprint(format_row([1, 2]))\n",
            proj="reports",
        ),
        py(
            "scraping a page with BeautifulSoup",
            "scrape.py",
            "import re\nfrom bs4 import BeautifulSoup\n",
            proj="scraper",
        ),
    ],
    fam="py",
    mode="last",
    bctx="importing a module in Python",
)

C(
    "PY_STR_CONCAT_TYPE",
    r"^TypeError: can only concatenate",
    "runtime",
    "python type error",
    (
        "python exception",
        'report.py crashed building the summary line: it concatenated "Total: " with an int instead of formatting it',
    ),
    ("python", 'TypeError: can only concatenate <type> (not "<other type>") to <type>'),
    [
        "The + operator was used between a str (or list) and a value of another type, e.g. a number or None; Python does not convert implicitly.",
        "Fix: convert explicitly (str(n), f-strings, list(...)) or use the same type on both sides, and check for None values before concatenating.",
    ],
    ("python3 <script>.py", "the line is printed", ["exit code 0", "no can only concatenate"]),
    [
        py(
            "printing a summary line in a report",
            "report.py",
            """orders = [12, 30, 7]
total = sum(orders)
print("Total: " + total)
""",
            proj="sales",
        ),
        py(
            "building a file name with a float version",
            "release.py",
            """version = 2.5
archive = "release-" + version + ".tar.gz"
print(archive)
""",
        ),
        py(
            "logging a message that contains an optional user name",
            "log_user.py",
            """def current_user():
    return None

msg = "logged in as " + current_user()
print(msg)
""",
            proj="auth",
        ),
        py(
            "appending a tuple of defaults to a list of args",
            "args.py",
            """args = ["--verbose"]
defaults = ("--color", "never")
print(args + defaults)
""",
            pre=["ls"],
            proj="cli",
        ),
        py(
            "joining a path prefix with a list of parts",
            "paths.py",
            """prefix = "/srv/data/"
parts = ["2024", "logs"]
print(prefix + parts)
""",
        ),
    ],
    fam="py",
    mode="last",
    bctx="string building in Python",
)

C(
    "PY_NAME_NOT_DEFINED",
    r"^NameError: name '.*' is not defined",
    "runtime",
    "python name error",
    (
        "python exception",
        "Typo: the script referenced `conifg` instead of `config`, so Python raised NameError at startup",
    ),
    ("python", "NameError: name '<name>' is not defined"),
    [
        "A name is used that was never assigned or imported in that scope: a typo, a missing import, or a variable defined only in another function or branch.",
        "Fix: correct the spelling, add the missing import or assignment before the use, and run a linter (pyflakes) to catch undefined names.",
    ],
    (
        "python3 -m pyflakes <script>.py && python3 <script>.py",
        "no undefined name reported and the script runs",
        ["exit code 0", "no NameError"],
    ),
    [
        py(
            "starting a service that reads its config",
            "server.py",
            """config = {"port": 8080}

def start():
    print("listening on", conifg["port"])

start()
""",
            proj="service",
        ),
        py(
            "computing statistics with numpy",
            "stats.py",
            """values = [1, 2, 3, 4]
mean = np.mean(values)
print(mean)
""",
            proj="analysis",
        ),
        py(
            "logging inside a worker function",
            "worker.py",
            """import logging

def work(job):
    logger.info("processing %s", job)

work("job-1")
""",
            pre=["python3 --version"],
        ),
        py(
            "using a variable defined in another function",
            "pipeline.py",
            """def collect():
    results = [1, 2, 3]

def summarize():
    return len(results)

collect()
print(summarize())
""",
            proj="etl",
        ),
        py(
            "timestamping a backup file name",
            "stamp.py",
            """import time

name = "backup-" + datetime.now().strftime("%Y%m%d")
print(name)
""",
        ),
    ],
    fam="py",
    mode="last",
    bctx="running a Python script",
)

C(
    "PY_FILE_NOT_FOUND",
    r"^FileNotFoundError: \[Errno 2\]",
    "runtime",
    "python io error",
    (
        "python exception",
        "Loading data/input.csv failed with FileNotFoundError - the script was run from the wrong directory so the relative path didn't resolve",
    ),
    ("python", "FileNotFoundError: [Errno 2] No such file or directory: '<path>'"),
    [
        "The program opened a path that does not exist, most often a relative path resolved against an unexpected working directory, a missing generated file, or a missing parent folder.",
        "Fix: build paths relative to the script (Path(__file__).parent / ...), create the file or its directory first (os.makedirs(..., exist_ok=True)), or pass the correct path.",
    ],
    (
        "ls -l <path> && python3 <script>.py",
        "the file exists and the script reads it",
        ["exit code 0", "no FileNotFoundError"],
    ),
    [
        py(
            "loading a CSV of measurements",
            "load.py",
            """import csv

with open("data/input.csv", newline="") as fh:
    rows = list(csv.reader(fh))
print(len(rows))
""",
            proj="measure",
        ),
        py(
            "reading the YAML configuration at startup",
            "main.py",
            """def read_config(path="config.yaml"):
    with open(path) as fh:
        return fh.read()

print(read_config())
""",
            pre=["ls"],
            proj="bot",
        ),
        py(
            "listing build artifacts",
            "collect.py",
            """import os

for name in os.listdir("build/output"):
    print(name)
""",
            proj="builder",
        ),
        py(
            "reading settings with pathlib",
            "settings.py",
            """from pathlib import Path

text = Path("settings.json").read_text()
print(len(text))
""",
            proj="desktop",
        ),
        py(
            "copying a report into an output folder",
            "publish.py",
            """import shutil

shutil.copy("report.txt", "out/report.txt")
""",
            files={"report.txt": "ok\n"},
            proj="publisher",
        ),
    ],
    fam="py",
    mode="last",
    bctx="opening files in Python",
)

C(
    "PY_INT_INVALID_LITERAL",
    r"^ValueError: invalid literal for int\(\) with base",
    "runtime",
    "python value error",
    ("python", "int() choked on the quantity column: one cell was '12a' so the import aborted with ValueError"),
    ("python", "ValueError: invalid literal for int() with base <n>: '<text>'"),
    [
        "int() was given a string that is not a whole number in the given base: stray letters, empty strings, whitespace inside the number, decimals like '3.5', or a hex string parsed with base 10.",
        "Fix: validate or clean the input first (strip, skip empty values), parse decimals with float() or Decimal, pass the right base (int(s, 16)), and catch ValueError to report the bad row.",
    ],
    ("python3 -c 'print(int(\"42\"))'", "42", ["42", "no ValueError"]),
    [
        py(
            "importing order quantities from text",
            "import_orders.py",
            """rows = ["3", "12a", "7"]
total = 0
for q in rows:
    total += int(q)
print(total)
""",
            proj="shop",
        ),
        py(
            "reading a port number from an empty environment variable",
            "port.py",
            """import os

port = int(os.environ.get("APP_PORT", ""))
print(port)
""",
        ),
        py(
            "parsing a price as an integer",
            "prices.py",
            """price = "3.5"
cents = int(price) * 100
print(cents)
""",
            proj="pricing",
        ),
        py(
            "parsing a hex colour without the base",
            "colors.py",
            """value = "0x1F"
print(int(value))
""",
            pre=["ls"],
            proj="theme",
        ),
        py(
            "parsing an octal permission string",
            "perms.py",
            """mode = "0o9"
print(int(mode[2:], 8))
""",
            proj="deploy",
        ),
    ],
    fam="py",
    mode="last",
    bctx="converting text to numbers in Python",
)

C(
    "PY_MISSING_REQUIRED_ARG",
    r"^TypeError: .*missing \d+ required",
    "runtime",
    "python call error",
    (
        "python exception",
        "connect() was called with only the host; the port parameter has no default, so Python raised a missing-argument TypeError",
    ),
    ("python", "TypeError: <function>() missing <n> required positional argument: '<param>'"),
    [
        "A function or method was called with fewer arguments than its signature requires, e.g. after a signature change, calling an instance method on the class (no self), or forgetting a keyword-only argument.",
        "Fix: pass the missing argument(s) or give the parameter a default value, and call methods on an instance rather than on the class.",
    ],
    ("python3 <script>.py", "the call succeeds", ["exit code 0", "no missing required argument"]),
    [
        py(
            "opening a database connection",
            "db.py",
            """def connect(host, port):
    return f"{host}:{port}"

print(connect("db.local"))
""",
            proj="orm",
        ),
        py(
            "creating a user object",
            "models.py",
            """class User:
    def __init__(self, name, email):
        self.name = name
        self.email = email

u = User("bob")
""",
            proj="accounts",
        ),
        py(
            "drawing a point",
            "geometry.py",
            """def move(point, dx, dy):
    return (point[0] + dx, point[1] + dy)

print(move((0, 0)))
""",
            pre=["python3 --version"],
        ),
        py(
            "calling an API client that needs a token",
            "client.py",
            """def fetch(url, *, token):
    return url, token

fetch("https://api.example.com/items")
""",
            proj="sdk",
        ),
        py(
            "calling a method on the class instead of an instance",
            "greet.py",
            """class Greeter:
    def greet(self):
        return "hi"

print(Greeter.greet())
""",
        ),
    ],
    fam="py",
    mode="last",
    bctx="calling a Python function",
)

C(
    "PY_UNPACK_NOT_ENOUGH",
    r"^ValueError: not enough values to unpack",
    "runtime",
    "python value error",
    (
        "python",
        "Parsing 'key=value' lines: one line had no '=' so split() gave one element and the two-name unpacking failed",
    ),
    ("python", "ValueError: not enough values to unpack (expected <n>, got <m>)"),
    [
        "A tuple-unpacking assignment or for-loop target expects more values than the iterable provides, typically a split() on a line without the separator or rows of uneven length.",
        "Fix: check the length before unpacking, use str.partition() or split with maxsplit and a default, or skip malformed rows.",
    ],
    ("python3 <script>.py", "all rows are unpacked", ["exit code 0", "no not enough values to unpack"]),
    [
        py(
            "parsing key=value lines of a properties file",
            "props.py",
            """lines = ["name=demo", "debug", "port=80"]
for line in lines:
    key, value = line.split("=")
    print(key, value)
""",
            proj="props",
        ),
        py(
            "unpacking RGB colour tuples",
            "colors.py",
            """colors = [(255, 0, 0), (0, 255)]
for r, g, b in colors:
    print(r, g, b)
""",
            proj="paint",
        ),
        py(
            "splitting a date string",
            "dates.py",
            """stamp = "2024-05"
year, month, day = stamp.split("-")
print(year, month, day)
""",
            pre=["ls"],
        ),
        py(
            "unpacking a function result",
            "bounds.py",
            """row = ("ann", 31)
name, age, city, email = row
print(name, city)
""",
            proj="charts",
        ),
        py(
            "reading host:port pairs",
            "hosts.py",
            """pairs = ["db:5432:tcp", "cache:6379"]
for entry in pairs:
    host, port, proto = entry.split(":")
""",
            proj="netcheck",
        ),
    ],
    fam="py",
    mode="last",
    bctx="tuple unpacking in Python",
)

C(
    "PY_UNTERMINATED_STRING",
    r"^SyntaxError: unterminated string literal",
    "syntax",
    "python syntax error",
    ("python syntax error", "greeting.py didn't even compile: the string on line 2 was missing its closing quote"),
    ("python", "SyntaxError: unterminated string literal (detected at line <n>)"),
    [
        "A string literal is opened with a quote that is not closed on the same line, often because of a missing quote, an apostrophe inside a single-quoted string, or a backslash escaping the closing quote.",
        "Fix: close the string, use the other quote type or escape inner quotes, and use triple quotes for multi-line text; python3 -m py_compile <file> confirms the fix.",
    ],
    ("python3 -m py_compile <script>.py", "no output", ["exit code 0", "no SyntaxError"]),
    [
        py(
            "running a greeting script",
            "greeting.py",
            """name = "World"
print("Hello, + name)
""",
        ),
        py(
            "message with an apostrophe in single quotes",
            "notify.py",
            """# send notifications to users

def notify(user):
    text = 'it's done, ' + user
    return text

notify("ann")
""",
            proj="alerts",
        ),
        py(
            "Windows path ending in a backslash",
            "paths.py",
            """import os

BASE = "C:\\data\\"
print(os.path.join(BASE, "x"))
""",
            pre=["python3 --version"],
            proj="winpaths",
        ),
        py(
            "SQL query string split over two lines",
            "query.py",
            """import sqlite3

conn = sqlite3.connect(":memory:")
sql = "SELECT id, name
       FROM users"
conn.execute(sql)
""",
            proj="dbtools",
        ),
        py(
            "dict literal with a missing quote",
            "labels.py",
            """LABELS = {
    "ok": "All good",
    "warn": "Check this,
    "err": "Broken",
}
""",
        ),
    ],
    fam="py",
    mode="last",
    bctx="compiling Python source",
)

# ---------------------------------------------------------------------------------------------------- C / C++
CC = "gcc -Wall -c"
C(
    "GCC_UNDECLARED_IDENTIFIER",
    r"error: ['‘].*['’] undeclared",
    "build",
    "C compile error",
    ("C compile error", "gcc stopped on main.c: `totl` was a typo for `total`, reported as undeclared in main()"),
    ("gcc", "error: ‘<identifier>’ undeclared (first use in this function)"),
    [
        "A C identifier is used that has no declaration in scope: a typo, a variable declared in another block, a macro or constant that was never defined, or a standard name whose header (errno.h, stdbool.h) was not included.",
        "Fix: declare the variable before use, fix the spelling, or #include the header that defines the name (gcc's note often names it).",
    ],
    ("gcc -Wall -c <file>.c", "compiles without errors", ["exit code 0", "no undeclared"]),
    [
        cmd(
            "compiling a small summing program",
            f"{CC} main.c",
            files={
                "main.c": r"""#include <stdio.h>

int main(void) {
    int total = 0;
    for (int i = 0; i < 10; i++)
        total += i;
    printf("%d\n", totl);
    return 0;
}
"""
            },
        ),
        cmd(
            "buffer helper in a utility module",
            f"{CC} util.c",
            files={
                "util.c": r"""#include <stdlib.h>

char *make_buffer(void) {
    return malloc(buffer_size);
}
"""
            },
            proj="libutil",
        ),
        cmd(
            "line reader that uses an undefined MAX_LEN macro",
            f"{CC} reader.c",
            files={
                "reader.c": r"""#include <stdio.h>

int read_line(FILE *f) {
    char line[MAX_LEN];
    return fgets(line, sizeof line, f) != NULL;
}
"""
            },
            pre=["ls"],
            proj="reader",
        ),
        cmd(
            "error reporting without errno.h",
            f"{CC} io.c",
            files={
                "io.c": r"""#include <stdio.h>

int report(void) {
    if (errno != 0)
        return -1;
    return 0;
}
"""
            },
            proj="netd",
        ),
        cmd(
            "boolean flag in C without stdbool.h",
            f"{CC} flags.c",
            files={
                "flags.c": r"""int verbose(int level) {
    int on = true;
    return on && level > 1;
}
"""
            },
        ),
    ],
    bctx="compiling C with gcc",
)

C(
    "GCC_HEADER_NOT_FOUND",
    r"fatal error: .*: No such file or directory",
    "build",
    "C compile error",
    (
        "C compile error",
        "Build of main.c failed right at the top: config.h is generated by ./configure, which hadn't been run yet",
    ),
    ("gcc", "fatal error: <header>: No such file or directory"),
    [
        "The preprocessor could not find an #included header: the development package of a library is not installed, the include path (-I) is missing, or the header is generated by a configure/build step that has not run.",
        "Fix: install the library's -dev package, add the right -I<dir> (or pkg-config --cflags), or run the step that generates the header, then rebuild.",
    ],
    ("gcc -c <file>.c", "compiles without errors", ["exit code 0", "no fatal error"]),
    [
        cmd(
            "building before running configure",
            f"{CC} main.c",
            files={"main.c": '#include <stdio.h>\n#include "config.h"\n\nint main(void) { return 0; }\n'},
            proj="tool",
        ),
        cmd(
            "HTTP client needing libcurl headers",
            f"{CC} fetch.c",
            files={"fetch.c": "#include <curl/curl.h>\n\nint main(void) { return 0; }\n"},
            proj="fetcher",
        ),
        cmd(
            "header in a sub folder without -I",
            f"{CC} src/buffer.c",
            files={"src/buffer.c": '#include "strbuf.h"\n\nint x;\n', "include/strbuf.h": "int y;\n"},
            pre=["ls -R"],
            proj="strlib",
        ),
        cmd(
            "C++ code using boost",
            "g++ -c algo.cpp",
            files={"algo.cpp": "#include <boost/algorithm/string.hpp>\n\nint main() { return 0; }\n"},
            proj="textalgo",
        ),
        cmd(
            "postgres client program",
            f"{CC} pgclient.c",
            files={"pgclient.c": "#include <stdlib.h>\n#include <libpq-fe.h>\n\nint main(void) { return 0; }\n"},
            proj="pgclient",
        ),
    ],
    bctx="compiling C/C++ sources",
)

C(
    "LD_UNDEFINED_REFERENCE",
    r"undefined reference to",
    "build",
    "linker error",
    (
        "linker error",
        "Link step failed: main.c calls compute_total() from the header, but stats.c (which defines it) wasn't passed to gcc",
    ),
    ("ld", "undefined reference to `<symbol>'"),
    [
        "The linker found a call to a symbol that no linked object or library defines: a source file or library missing from the link line (-lm, -lfoo), a declared but never implemented function or method, or a missing main().",
        "Fix: add the object file or -l<library> that defines the symbol (libraries after the objects that use them) or implement the missing function, then relink.",
    ],
    ("gcc <objects>.o -o app && ./app", "links and runs", ["exit code 0", "no undefined reference"]),
    [
        cmd(
            "linking a program without the file that defines the function",
            "gcc main.o -o app",
            pre=[f"{CC} main.c"],
            files={
                "main.c": '#include "stats.h"\n\nint main(void) { return compute_total(3); }\n',
                "stats.h": "int compute_total(int n);\n",
            },
            proj="stats",
        ),
        cmd(
            "math program without -lm",
            "gcc area.o -o area",
            pre=["gcc -c area.c"],
            files={
                "area.c": r"""#include <math.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    double r = atof(argv[argc - 1]);
    return (int) sqrt(r);
}
"""
            },
            proj="geometry",
        ),
        cmd(
            "C++ class whose method was never implemented",
            "g++ main.o -o parser",
            pre=["g++ -c main.cpp"],
            files={
                "main.cpp": r"""#include <string>

class Parser {
public:
    int parse(const std::string &text);
};

int main() {
    Parser p;
    return p.parse("x = 1");
}
"""
            },
            proj="parser",
        ),
        cmd(
            "building a library file as an executable",
            "gcc list.o -o list",
            pre=["gcc -c list.c"],
            files={
                "list.c": r"""int list_len(int *xs, int n) {
    int c = 0;
    for (int i = 0; i < n; i++) c += xs[i] != 0;
    return c;
}
"""
            },
            proj="libds",
        ),
        cmd(
            "virtual method without a definition",
            "g++ shapes.o -o shapes",
            pre=["g++ -c shapes.cpp"],
            files={
                "shapes.cpp": r"""class Shape {
public:
    Shape() {}
    virtual double area() const;
};

int main() {
    Shape s;
    return 0;
}
"""
            },
            proj="shapes",
        ),
    ],
    bctx="linking with gcc/ld",
)

C(
    "GPP_NO_MATCHING_FUNCTION",
    r"error: no matching function for call to",
    "build",
    "C++ compile error",
    ("C++ compile error", "g++ rejected calc.cpp: both add() overloads take two arguments but it was called with one"),
    ("g++", "error: no matching function for call to ‘<function>(<argument types>)’"),
    [
        "No overload of the called function or constructor accepts the given argument types or count: too few/many arguments, mixed types for a template like std::max, a missing default constructor, or passing the wrong element type.",
        "Fix: match a declared signature (convert the arguments, add the missing ones, give template arguments explicitly) or add the overload/constructor you need; read the 'candidate' notes g++ prints.",
    ],
    ("g++ -c <file>.cpp", "compiles without errors", ["exit code 0", "no matching function"]),
    [
        cmd(
            "overloaded calculator helper called with one argument",
            "g++ -c calc.cpp",
            files={
                "calc.cpp": r"""int add(int a, int b) { return a + b; }
double add(double a, double b) { return a + b; }

int main() {
    return add(1);
}
"""
            },
            proj="calc",
        ),
        cmd(
            "std::max with an int and a double",
            "g++ -c limits.cpp",
            files={
                "limits.cpp": r"""#include <algorithm>

int main() {
    double m = std::max(1, 2.5);
    return (int) m;
}
"""
            },
            proj="limits",
        ),
        cmd(
            "class without a default constructor",
            "g++ -c point.cpp",
            files={
                "point.cpp": r"""class Point {
public:
    Point(int x, int y) : x_(x), y_(y) {}
private:
    int x_, y_;
};

int main() {
    Point origin;
    return 0;
}
"""
            },
            pre=["ls"],
        ),
        cmd(
            "pushing a string into a vector of ints",
            "g++ -c ids.cpp",
            files={
                "ids.cpp": r"""#include <vector>

int main() {
    std::vector<int> ids;
    ids.push_back("7");
    return 0;
}
"""
            },
            proj="ids",
        ),
        cmd(
            "to_string on a C string",
            "g++ -c label.cpp",
            files={
                "label.cpp": r"""#include <string>

int main() {
    std::string s = std::to_string("abc");
    return s.size();
}
"""
            },
            proj="labels",
        ),
    ],
    bctx="compiling C++ with g++",
)

C(
    "GCC_EXPECTED_SEMICOLON",
    r"error: expected ['‘];['’] before",
    "syntax",
    "C syntax error",
    ("C compile error", "Missing semicolon after `x = 5` in main.c - gcc reported it at the following `return`"),
    ("gcc", "error: expected ‘;’ before ‘<token>’"),
    [
        "A statement is missing its terminating semicolon, so the compiler reports the error at the next token (the following statement, 'return', 'case' or a closing brace), which is usually on the next line.",
        "Fix: add the ';' at the end of the statement just before the reported position (look one line up), then recompile.",
    ],
    ("gcc -c <file>.c", "compiles without errors", ["exit code 0", "no expected ';'"]),
    [
        cmd(
            "tiny program returning a value",
            f"{CC} main.c",
            files={
                "main.c": r"""int main(void) {
    int x;
    x = 5
    return x;
}
"""
            },
            proj="hello",
        ),
        cmd(
            "printing a greeting",
            f"{CC} greet.c",
            files={
                "greet.c": r"""#include <stdio.h>

void greet(void) {
    printf("hi\n")
}
"""
            },
            proj="greeter",
        ),
        cmd(
            "loop counter increment",
            f"{CC} count.c",
            files={
                "count.c": r"""#include <stdio.h>

int main(void) {
    int count = 0;
    count++
    printf("%d\n", count);
    return 0;
}
"""
            },
            pre=["ls"],
            proj="counter",
        ),
        cmd(
            "C++ output statement",
            "g++ -c show.cpp",
            files={
                "show.cpp": r"""#include <iostream>

int main() {
    int x = 3;
    std::cout << x << std::endl
    return 0;
}
"""
            },
            proj="show",
        ),
        cmd(
            "switch statement with a missing semicolon after break",
            f"{CC} state.c",
            files={
                "state.c": r"""int next(int s) {
    switch (s) {
    case 1:
        s = 2;
        break
    case 2:
        s = 0;
    }
    return s;
}
"""
            },
            proj="fsm",
        ),
    ],
    bctx="compiling C/C++",
)

C(
    "LD_MULTIPLE_DEFINITION",
    r"multiple definition of",
    "build",
    "linker error",
    (
        "linker",
        "Linking failed because `counter` is defined (not just declared) in the shared header, so both a.o and b.o got a copy",
    ),
    ("ld", "multiple definition of `<symbol>'; <object>.o: first defined here"),
    [
        "The same global symbol is defined in more than one object file, typically a variable or non-inline function defined in a header included by several .c files, or the same source compiled twice into the link.",
        "Fix: keep a single definition in one .c file and put only an extern declaration (or prototype) in the header; mark header functions static inline.",
    ],
    ("gcc *.o -o app", "links without errors", ["exit code 0", "no multiple definition"]),
    [
        cmd(
            "global counter defined in a header",
            "gcc a.o b.o -o app",
            pre=["gcc -c a.c b.c"],
            files={
                "state.h": "int counter = 0;\n",
                "a.c": '#include "state.h"\nint main(void) { return counter; }\n',
                "b.c": '#include "state.h"\nvoid bump(void) { counter++; }\n',
            },
            proj="counter",
        ),
        cmd(
            "helper function defined in a header",
            "gcc main.o util.o -o tool",
            pre=["gcc -c main.c util.c"],
            files={
                "helpers.h": "int clamp(int v) { return v < 0 ? 0 : v; }\n",
                "main.c": '#include "helpers.h"\nint main(void) { return clamp(-1); }\n',
                "util.c": '#include "helpers.h"\nint use(void) { return clamp(3); }\n',
            },
            proj="tool",
        ),
        cmd(
            "same source linked twice",
            "gcc main.o parser.o parser_copy.o -o prog",
            pre=["cp parser.c parser_copy.c", "gcc -c main.c parser.c parser_copy.c"],
            files={
                "main.c": "int parse(void);\nint main(void) { return parse(); }\n",
                "parser.c": "int parse(void) { return 0; }\n",
            },
            proj="prog",
        ),
        cmd(
            "config table defined in two files",
            "gcc app.o config.o -o app",
            pre=["gcc -c app.c config.c"],
            files={
                "app.c": "int config_table[4];\nint main(void) { return config_table[0]; }\n",
                "config.c": "int config_table[4] = {1, 2, 3, 4};\n",
            },
            proj="appcfg",
        ),
        cmd(
            "C++ free function defined in a header",
            "g++ one.o two.o -o shapes",
            pre=["g++ -c one.cpp two.cpp"],
            files={
                "geom.hpp": "double area(double r) { return 3.14 * r * r; }\n",
                "one.cpp": '#include "geom.hpp"\nint main() { return (int) area(1); }\n',
                "two.cpp": '#include "geom.hpp"\ndouble twice(double r) { return 2 * area(r); }\n',
            },
            proj="shapes",
        ),
    ],
    bctx="linking C/C++ objects",
)

# ---------------------------------------------------------------------------------------------------- Rust
RC = "rustc --edition 2021 --color never"
CARGO_INIT = ["cargo init -q --vcs none --bin --name {n} ."]


def rs(ctx, name, code, proj="proj", pre=()):
    return cmd(ctx, f"{RC} {name}", files={name: code}, proj=proj, pre=pre)


def cargo(ctx, crate, code, run="cargo build", proj=None, pre=()):
    return cmd(
        ctx,
        run,
        files={"src/main.rs": code},
        setup=[s.format(n=crate) for s in CARGO_INIT],
        proj=proj or crate,
        pre=pre,
        timeout=60,
    )


C(
    "RUST_E0425_UNRESOLVED_VALUE",
    r"^error\[E0425\]",
    "build",
    "rust compile error",
    (
        "rust compile error",
        "cargo build failed in the summing loop: `totl` is a typo of `total`, rustc says it can't find the value (E0425)",
    ),
    ("rustc", "error[E0425]: cannot find value `<name>` in this scope"),
    [
        "An identifier is used that is not bound in the current scope: a typo, a variable declared in an inner block or another function, or a constant/static that was never imported with use.",
        "Fix: correct the name (rustc often suggests the similar one), declare it in an enclosing scope before use, or import it with use; then cargo build again.",
    ],
    ("cargo build", "Finished dev profile", ["Finished", "no error[E0425]"]),
    [
        cargo(
            "summing a vector in a small cargo project",
            "summer",
            r"""fn main() {
    let values = vec![1, 2, 3];
    let mut total = 0;
    for v in &values {
        total += v;
    }
    println!("{}", totl);
}
""",
        ),
        rs(
            "printing a counter declared inside an if block",
            "counter.rs",
            r"""fn main() {
    if std::env::args().count() > 0 {
        let count = 3;
        println!("{}", count);
    }
    println!("{}", count);
}
""",
            proj="counter",
        ),
        rs(
            "using a config value from another function",
            "config.rs",
            r"""fn load() {
    let timeout_ms = 500;
    let _ = timeout_ms;
}

fn main() {
    load();
    println!("{}", timeout_ms);
}
""",
            proj="svc",
        ),
        rs(
            "referencing a constant that was never defined",
            "limits.rs",
            r"""fn check(n: usize) -> bool {
    n < MAX_ITEMS
}

fn main() {
    println!("{}", check(3));
}
""",
            pre=["rustc --version"],
        ),
        cargo(
            "building a CLI that prints the parsed port",
            "portcli",
            r"""fn main() {
    let args: Vec<String> = std::env::args().collect();
    println!("{} {}", args.len(), port);
}
""",
            run="cargo run -q",
        ),
    ],
    fam="rust",
    bctx="compiling Rust",
)

C(
    "RUST_E0597_NOT_LIVE_LONG_ENOUGH",
    r"^error\[E0597\]",
    "build",
    "rust borrow checker",
    (
        "rust borrow checker",
        "cargo build failed: borrowed value does not live long enough in the name-collecting loop - we pushed &s into a Vec that outlives each iteration's String",
    ),
    ("rust borrow checker", "error[E0597]: `<var>` does not live long enough"),
    [
        "A reference to a local value is stored somewhere (an outer variable, a Vec, a HashMap) that lives longer than the value itself, so the value is dropped while still borrowed.",
        "Fix: store owned data (String, clone, to_owned) instead of references, or move the owner to an outer scope that lives at least as long as the borrow.",
    ],
    ("cargo build", "Finished dev profile", ["Finished", "no error[E0597]"]),
    [
        cargo(
            "collecting formatted names into a Vec<&str>",
            "names",
            r"""fn main() {
    let mut names: Vec<&str> = Vec::new();
    for i in 0..3 {
        let s = format!("item{}", i);
        names.push(&s);
    }
    println!("{:?}", names);
}
""",
        ),
        rs(
            "reference escaping an inner block",
            "scope.rs",
            r"""fn main() {
    let r;
    {
        let x = 5;
        r = &x;
    }
    println!("{}", r);
}
""",
        ),
        rs(
            "caching keys borrowed from a temporary String",
            "cache.rs",
            r"""use std::collections::HashMap;

fn main() {
    let mut cache: HashMap<&str, usize> = HashMap::new();
    {
        let key = String::from("config");
        cache.insert(&key, 1);
    }
    println!("{}", cache.len());
}
""",
            proj="cache",
        ),
        rs(
            "keeping a slice of a line read in a block",
            "longest.rs",
            r"""fn main() {
    let longest: &str;
    {
        let line = String::from("hello world");
        longest = line.as_str();
    }
    println!("{}", longest);
}
""",
            pre=["rustc --version"],
            proj="text",
        ),
        cargo(
            "tokenizer keeping references to a buffer",
            "tokenizer",
            r"""fn main() {
    let mut tokens: Vec<&[u8]> = Vec::new();
    loop {
        let buf = vec![1u8, 2, 3];
        tokens.push(&buf[..]);
        if tokens.len() > 1 { break; }
    }
    println!("{}", tokens.len());
}
""",
            run="cargo check",
        ),
    ],
    fam="rust",
    bctx="compiling Rust",
)

C(
    "RUST_E0599_NO_METHOD",
    r"^error\[E0599\]",
    "build",
    "rust compile error",
    ("rust", "E0599 in the queue code: Vec has no push_back (that's C++), it's push"),
    ("rustc", "error[E0599]: no method named `<method>` found for <type> in the current scope"),
    [
        "A method is called on a type that does not have it: a name from another language or API (push_back, length), a method of a trait that is not implemented or not imported with use, or a method called on the wrong type (e.g. on an Option instead of its content).",
        "Fix: use the type's actual method (check the docs or rustc's suggestion), bring the trait into scope with use, implement it, or unwrap/convert to the right type first.",
    ],
    ("cargo build", "Finished dev profile", ["Finished", "no error[E0599]"]),
    [
        rs(
            "queue implemented on a Vec",
            "queue.rs",
            r"""fn main() {
    let mut queue = vec![1, 2];
    queue.push_back(3);
    println!("{:?}", queue);
}
""",
            proj="queue",
        ),
        rs(
            "string length with a method from another language",
            "strlen.rs",
            r"""fn main() {
    let s = String::from("hello");
    println!("{}", s.length());
}
""",
        ),
        cargo(
            "calling a method a struct does not implement",
            "settings",
            r"""struct Config {
    path: String,
}

fn main() {
    let c = Config { path: "app.toml".into() };
    c.load();
    println!("{}", c.path);
}
""",
        ),
        rs(
            "len on an integer",
            "digits.rs",
            r"""fn main() {
    let n: i32 = 12345;
    println!("{}", n.len());
}
""",
            pre=["ls"],
            proj="digits",
        ),
        rs(
            "get on an Option",
            "opt.rs",
            r"""fn main() {
    let maybe = Some(3);
    println!("{}", maybe.get());
}
""",
            proj="options",
        ),
    ],
    fam="rust",
    bctx="compiling Rust",
)

C(
    "RUST_E0502_MUT_WHILE_BORROWED",
    r"^error\[E0502\]",
    "build",
    "rust borrow checker",
    (
        "rust borrow checker",
        "Borrow error: kept `first = &v[0]` alive across v.push(4), so rustc refused the mutable borrow",
    ),
    ("rust borrow checker", "error[E0502]: cannot borrow `<var>` as mutable because it is also borrowed as immutable"),
    [
        "A shared reference into a value is still in use (used later) while the code tries to mutate the value, e.g. pushing to a Vec while holding a reference to an element, or modifying a collection while iterating over it.",
        "Fix: end the shared borrow before mutating (copy/clone the needed data, restructure so the reference is last used earlier), or collect changes and apply them after the loop.",
    ],
    ("cargo build", "Finished dev profile", ["Finished", "no error[E0502]"]),
    [
        rs(
            "holding a reference to the first element while pushing",
            "first.rs",
            r"""fn main() {
    let mut v = vec![1, 2, 3];
    let first = &v[0];
    v.push(4);
    println!("{}", first);
}
""",
        ),
        rs(
            "appending to a list while iterating it",
            "dup.rs",
            r"""fn main() {
    let mut list = vec![1, 2];
    for x in &list {
        list.push(*x);
    }
}
""",
            proj="dups",
        ),
        cargo(
            "editing a String while a slice is alive",
            "greeting",
            r"""fn main() {
    let mut s = String::from("hello");
    let word = &s[0..2];
    s.push_str(" world");
    println!("{}", word);
}
""",
        ),
        rs(
            "inserting into a map while holding a value",
            "scores.rs",
            r"""use std::collections::HashMap;

fn main() {
    let mut scores: HashMap<String, i32> = HashMap::new();
    scores.insert("a".into(), 1);
    let a = scores.get("a").unwrap_or(&0);
    scores.insert("b".into(), 2);
    println!("{}", a);
}
""",
            pre=["rustc --version"],
            proj="scores",
        ),
        rs(
            "clearing a buffer while a borrow is alive",
            "buffer.rs",
            r"""fn main() {
    let mut buffer = vec![0u8; 4];
    let head = &buffer[..2];
    buffer.clear();
    println!("{:?}", head);
}
""",
            proj="io",
        ),
    ],
    fam="rust",
    bctx="compiling Rust",
)

C(
    "CARGO_MANIFEST_NOT_FOUND",
    r"could not find `Cargo\.toml`",
    "build",
    "cargo",
    (
        "cargo",
        "Ran cargo build from the repo root instead of the crate folder, so cargo couldn't find a Cargo.toml anywhere up the tree",
    ),
    ("cargo", "error: could not find `Cargo.toml` in `<dir>` or any parent directory"),
    [
        "cargo was run in a directory that is not inside a Cargo package or workspace (wrong working directory, crate in a sub folder, or the manifest was never created).",
        "Fix: cd into the crate folder, pass --manifest-path <dir>/Cargo.toml, or create the package with cargo init.",
    ],
    (
        "cargo metadata --no-deps --format-version 1 >/dev/null",
        "no output",
        ["exit code 0", "no could not find `Cargo.toml`"],
    ),
    [
        cmd(
            "building from the repository root",
            "cargo build",
            pre=["ls"],
            files={"crates/core/README": "x\n"},
            proj="monorepo",
        ),
        cmd(
            "running tests in the docs folder",
            "cargo test",
            cwd="docs",
            files={"docs/index.md": "# docs\n"},
            proj="engine",
        ),
        cmd("running the binary in a fresh checkout", "cargo run", proj="cli-tool"),
        cmd(
            "checking a folder of scripts",
            "cargo check",
            cwd="scripts",
            files={"scripts/x.sh": "echo\n"},
            proj="website",
        ),
        cmd("formatting code outside the crate", "cargo fmt --check", pre=["cargo --version"], proj="rustbook"),
    ],
    bctx="running cargo",
)


# ---------------------------------------------------------------------------------------------------- Java
def jv(ctx, name, code, proj="proj", pre=()):
    return cmd(ctx, f"javac {name}", files={name: code}, proj=proj, pre=pre, timeout=60)


def jrun(ctx, cls, code, proj="proj"):
    return cmd(
        ctx, f"java -cp out {cls}", files={f"{cls}.java": code}, pre=[f"javac -d out {cls}.java"], proj=proj, timeout=60
    )


C(
    "JAVAC_CANNOT_FIND_SYMBOL",
    r"error: cannot find symbol",
    "build",
    "java compile error",
    ("java compile error", "javac failed on Main.java: `totl` isn't declared - just a typo of `total`"),
    ("javac", "<File>.java:<line>: error: cannot find symbol"),
    [
        "javac could not resolve a name: a misspelled variable, method or class, a missing import (java.util.List, Scanner), or a method that does not exist on that type; the 'symbol:' and 'location:' lines name it.",
        "Fix: fix the spelling, add the import or declaration, or call a method that exists on the type, then recompile.",
    ],
    ("javac <File>.java", "no output", ["exit code 0", "no cannot find symbol"]),
    [
        jv(
            "compiling a summing program",
            "Main.java",
            r"""public class Main {
    public static void main(String[] args) {
        int total = 0;
        for (int i = 0; i < 3; i++) total += i;
        System.out.println(totl);
    }
}
""",
        ),
        jv(
            "using List without importing it",
            "Inventory.java",
            r"""public class Inventory {
    private List<String> items;

    public int size() { return items.size(); }
}
""",
            proj="inventory",
        ),
        jv(
            "calling a helper method that was renamed",
            "Report.java",
            r"""public class Report {
    static String header() { return "REPORT"; }

    public static void main(String[] args) {
        System.out.println(printHeader());
    }
}
""",
            proj="reports",
            pre=["ls"],
        ),
        jv(
            "reading input with Scanner without the import",
            "Prompt.java",
            r"""public class Prompt {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        System.out.println(in.nextLine());
    }
}
""",
        ),
        jv(
            "misspelled String type",
            "Greeter.java",
            r"""public class Greeter {
    public static void main(String[] args) {
        Strin name = "world";
        System.out.println("hello " + name);
    }
}
""",
            proj="greeter",
        ),
    ],
    fam="javac",
    bctx="compiling Java",
)

C(
    "JAVAC_INCOMPATIBLE_TYPES",
    r"error: incompatible types",
    "build",
    "java compile error",
    (
        "java compile error",
        "Order.java didn't compile - assigned the String quantity straight to an int, javac says String cannot be converted to int",
    ),
    ("javac", "<File>.java:<line>: error: incompatible types: <type> cannot be converted to <type>"),
    [
        "A value of one type is assigned, returned or passed where another type is required and Java has no implicit conversion, e.g. String to int, double to int (possible lossy conversion), or Object to a concrete type.",
        "Fix: convert explicitly (Integer.parseInt, String.valueOf, a cast such as (int) d) or change the declared type, and use generics to avoid raw Object values.",
    ],
    ("javac <File>.java", "no output", ["exit code 0", "no incompatible types"]),
    [
        jv(
            "storing a parsed quantity",
            "Order.java",
            r"""public class Order {
    public static void main(String[] args) {
        String qty = "3";
        int quantity = qty;
        System.out.println(quantity);
    }
}
""",
            proj="orders",
        ),
        jv(
            "rounding a price into an int",
            "Price.java",
            r"""public class Price {
    public static void main(String[] args) {
        double price = 9.99;
        int cents = price * 100;
        System.out.println(cents);
    }
}
""",
            proj="pricing",
        ),
        jv(
            "assigning a number to a String label",
            "Label.java",
            r"""public class Label {
    public static void main(String[] args) {
        String label = 42;
        System.out.println(label);
    }
}
""",
            pre=["javac -version"],
        ),
        jv(
            "reading from a raw list",
            "Names.java",
            r"""import java.util.ArrayList;
import java.util.List;

public class Names {
    public static void main(String[] args) {
        List names = new ArrayList();
        names.add("ann");
        String first = names.get(0);
        System.out.println(first);
    }
}
""",
            proj="names",
        ),
        jv(
            "returning a boolean from an int method",
            "Check.java",
            r"""public class Check {
    static int isValid(String s) {
        return s.isEmpty();
    }

    public static void main(String[] args) {
        System.out.println(isValid("x"));
    }
}
""",
            proj="validator",
        ),
    ],
    fam="javac",
    bctx="compiling Java",
)

C(
    "JAVA_CLASS_CAST_EXCEPTION",
    r"java\.lang\.ClassCastException",
    "runtime",
    "java exception",
    (
        "java runtime exception",
        "Main crashed with ClassCastException: the map value was a String and we cast it to Integer",
    ),
    ("java", 'Exception in thread "main" java.lang.ClassCastException: class <A> cannot be cast to class <B>'),
    [
        "An object was cast to a type it is not an instance of, typically values taken from raw collections or Object-typed maps, or a downcast to the wrong subclass.",
        "Fix: use generics so the compiler checks the types, test with instanceof before casting, or convert the value (Integer.valueOf(String)) instead of casting it.",
    ],
    (
        "javac -d out *.java && java -cp out <Main>",
        "program output without exception",
        ["exit code 0", "no ClassCastException"],
    ),
    [
        jrun(
            "reading a setting from an Object map",
            "Main",
            r"""import java.util.HashMap;
import java.util.Map;

public class Main {
    public static void main(String[] args) {
        Map<String, Object> settings = new HashMap<>();
        settings.put("retries", "3");
        Integer retries = (Integer) settings.get("retries");
        System.out.println(retries);
    }
}
""",
        ),
        jrun(
            "summing values from a raw list",
            "Totals",
            r"""import java.util.ArrayList;
import java.util.List;

public class Totals {
    @SuppressWarnings("unchecked")
    public static void main(String[] args) {
        List values = new ArrayList();
        values.add(5);
        String first = (String) values.get(0);
        System.out.println(first);
    }
}
""",
            proj="totals",
        ),
        jrun(
            "downcasting an animal to the wrong subclass",
            "Zoo",
            r"""public class Zoo {
    static class Animal {}
    static class Dog extends Animal {}
    static class Cat extends Animal {}

    public static void main(String[] args) {
        Animal a = new Cat();
        Dog d = (Dog) a;
        System.out.println(d);
    }
}
""",
            proj="zoo",
        ),
        jrun(
            "casting toArray() result to String[]",
            "Tags",
            r"""import java.util.ArrayList;
import java.util.List;

public class Tags {
    public static void main(String[] args) {
        List<String> tags = new ArrayList<>();
        tags.add("a");
        String[] arr = (String[]) (Object[]) tags.toArray();
        System.out.println(arr.length);
    }
}
""",
            proj="tags",
        ),
        jrun(
            "treating a TreeMap as a HashMap",
            "Registry",
            r"""import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

public class Registry {
    static Map<String, Integer> build() { return new TreeMap<>(); }

    public static void main(String[] args) {
        HashMap<String, Integer> m = (HashMap<String, Integer>) build();
        System.out.println(m.size());
    }
}
""",
            proj="registry",
        ),
    ],
    fam="java",
    bctx="running a Java program",
)

C(
    "JAVA_NUMBER_FORMAT_EXCEPTION",
    r"java\.lang\.NumberFormatException",
    "runtime",
    "java exception",
    ("java", 'Integer.parseInt("12a") in Main threw NumberFormatException while reading the quantity argument'),
    ("java", 'Exception in thread "main" java.lang.NumberFormatException: For input string: "<text>"'),
    [
        "Integer.parseInt / Long.parseLong / Double.parseDouble received text that is not a valid number: letters, empty strings, surrounding spaces, decimals for an int parser, or values outside the type's range.",
        "Fix: validate and trim the input before parsing, use the right parser (Long, BigInteger, Double), and catch NumberFormatException to report the bad value.",
    ],
    ("javac -d out *.java && java -cp out <Main> 42", "the parsed number", ["exit code 0", "no NumberFormatException"]),
    [
        jrun(
            "parsing a quantity from text",
            "Main",
            r"""public class Main {
    public static void main(String[] args) {
        String qty = "12a";
        int n = Integer.parseInt(qty);
        System.out.println(n * 2);
    }
}
""",
        ),
        jrun(
            "reading an empty port setting",
            "Server",
            r"""public class Server {
    public static void main(String[] args) {
        String port = System.getProperty("server.port", "");
        System.out.println(Integer.parseInt(port));
    }
}
""",
            proj="server",
        ),
        jrun(
            "parsing a timestamp into an int",
            "Clock",
            r"""public class Clock {
    public static void main(String[] args) {
        int millis = Integer.parseInt("3000000000");
        System.out.println(millis);
    }
}
""",
            proj="clock",
        ),
        jrun(
            "parsing a padded id",
            "Lookup",
            r"""public class Lookup {
    public static void main(String[] args) {
        Integer id = Integer.valueOf(" 42");
        System.out.println(id);
    }
}
""",
            proj="lookup",
        ),
        jrun(
            "parsing a price that is not a number",
            "Cart",
            r"""public class Cart {
    public static void main(String[] args) {
        double price = Double.parseDouble("N/A");
        System.out.println(price);
    }
}
""",
            proj="cart",
        ),
    ],
    fam="java",
    bctx="running a Java program",
)


# ---------------------------------------------------------------------------------------------------- Node / npm
def js(ctx, name, code, proj="proj", pre=(), files=None):
    return cmd(ctx, f"node {name}", files={name: code, **(files or {})}, proj=proj, pre=pre)


C(
    "NODE_REFERENCE_ERROR",
    r"^ReferenceError: .* is not defined",
    "runtime",
    "javascript error",
    ("node error", "server.js crashed on the first request: `conifg` typo -> ReferenceError"),
    ("node", "ReferenceError: <name> is not defined"),
    [
        "A variable is used that was never declared in any enclosing scope: a typo, a missing require/import, a browser global (window, document) in Node, or a CommonJS global (require, __dirname) inside an ES module.",
        "Fix: declare or import the name, fix the spelling, and in ES modules use import / import.meta.url instead of require and __dirname.",
    ],
    ("node <file>.js", "runs without ReferenceError", ["exit code 0", "no ReferenceError"]),
    [
        js(
            "starting an HTTP handler",
            "server.js",
            r"""const config = { port: 3000 };

function handler() {
  return conifg.port;
}
console.log(handler());
""",
            proj="api",
        ),
        js(
            "calling a fetch helper that was never imported",
            "sync.js",
            r"""async function main() {
  const rows = await fetchRows('/users');
  console.log(rows.length);
}
main();
""",
            proj="sync",
        ),
        js(
            "require inside an ES module",
            "build.mjs",
            r"""const fs = require('fs');
console.log(fs.existsSync('dist'));
""",
            proj="bundler",
            pre=["node --version"],
        ),
        js(
            "__dirname inside an ES module",
            "paths.mjs",
            r"""import path from 'path';
console.log(path.join(__dirname, 'public'));
""",
            proj="static-site",
        ),
        js(
            "browser code run under node",
            "widget.js",
            r"""const width = window.innerWidth;
console.log(width);
""",
            proj="widget",
        ),
    ],
    fam="node",
    bctx="running JavaScript with node",
)

C(
    "NODE_NOT_A_FUNCTION",
    r"^TypeError: .* is not a function",
    "runtime",
    "javascript type error",
    ("node", "Array has no .contains() in JS - used includes() instead; the filter step threw 'is not a function'"),
    ("node", "TypeError: <expr>.<method> is not a function"),
    [
        "A value is called as a function but is not one: a method name from another language or API (contains, reverse on strings), a property that is undefined or a plain value, or a module/function that returns something else than expected (e.g. no promise, so .then is missing).",
        "Fix: call the real method (includes, split('').reverse()), check what the value is (console.log(typeof x)), and fix the import/export or return value so it is a function.",
    ],
    ("node <file>.js", "runs without TypeError", ["exit code 0", "no is not a function"]),
    [
        js(
            "filtering allowed roles",
            "roles.js",
            r"""const allowed = ['admin', 'editor'];
const role = 'viewer';
if (allowed.contains(role)) console.log('ok');
""",
            proj="auth",
        ),
        js(
            "reversing a string",
            "reverse.js",
            r"""const word = 'hello';
console.log(word.reverse());
""",
        ),
        js(
            "calling a method on a plain object",
            "jobs.js",
            r"""const job = { name: 'cleanup', run: 'daily' };
job.run();
""",
            proj="scheduler",
        ),
        js(
            "then() on a function that returns an array",
            "users.js",
            r"""function getUsers() {
  return ['ann', 'bob'];
}
getUsers().then((u) => console.log(u));
""",
            proj="users",
            pre=["node --version"],
        ),
        js(
            "importing a module object as a function",
            "main.js",
            r"""const logger = require('./logger');
logger('starting');
""",
            files={"logger.js": "module.exports = { log: (m) => console.log(m) };\n"},
            proj="app",
        ),
    ],
    fam="node",
    bctx="running JavaScript with node",
)

C(
    "NODE_READ_PROPERTY_OF_UNDEFINED",
    r"^TypeError: Cannot read properties of (undefined|null)",
    "runtime",
    "javascript type error",
    (
        "node error",
        "Crash reading config.db.host - the db section wasn't in the config object so config.db was undefined",
    ),
    ("node", "TypeError: Cannot read properties of undefined (reading '<property>')"),
    [
        "A property is read from a value that is undefined or null: a missing key in a nested object, an array element past the end, an API result that is null, or an async value that is not there yet.",
        "Fix: check the chain (optional chaining obj?.a?.b, defaults with ??), make sure the data is loaded/awaited before use, and validate the shape of config or responses.",
    ],
    ("node <file>.js", "runs without TypeError", ["exit code 0", "no Cannot read properties"]),
    [
        js(
            "reading the database host from config",
            "db.js",
            r"""const config = { port: 5432 };
const host = config.db.host;
console.log(host);
""",
            proj="dbsvc",
        ),
        js(
            "reading the name of a missing array element",
            "list.js",
            r"""const users = [{ name: 'ann' }];
console.log(users[3].name);
""",
        ),
        js(
            "result object of a lookup that returned null",
            "lookup.js",
            r"""function find(id) {
  return null;
}
const account = find(7);
console.log(account.balance);
""",
            proj="bank",
        ),
        js(
            "reading response headers of an undefined response",
            "client.js",
            r"""let response;
function onDone() {
  console.log(response.headers);
}
onDone();
""",
            proj="httpclient",
            pre=["ls"],
        ),
        js(
            "destructuring options passed as undefined",
            "render.js",
            r"""function render(opts) {
  return opts.theme.color;
}
console.log(render({}));
""",
            proj="ui",
        ),
    ],
    fam="node",
    bctx="running JavaScript with node",
)

C(
    "NODE_CANNOT_FIND_MODULE",
    r"^Error: Cannot find module",
    "dependency",
    "node module error",
    (
        "node module error",
        "node server.js failed immediately: express wasn't installed (no node_modules yet, forgot npm install)",
    ),
    ("node", "Error: Cannot find module '<module>'"),
    [
        "require() could not resolve a module: the package is not installed in node_modules (npm install not run, wrong folder), a relative path is wrong or missing its file, or the entry script path itself does not exist.",
        "Fix: run npm install <package> (or npm install in the project root), correct the relative path ('./lib/x' vs '../lib/x'), and check the file name and extension.",
    ],
    ("node -e \"require.resolve('<module>')\"", "no output", ["exit code 0", "no Cannot find module"]),
    [
        js(
            "starting an express server",
            "server.js",
            "const express = require('express');\nconst app = express();\n",
            proj="web",
        ),
        js(
            "requiring a helper by a wrong relative path",
            "src/index.js",
            "const helper = require('./lib/helper');\nhelper();\n",
            proj="tooling",
        ),
        js(
            "using lodash in a script",
            "chunk.js",
            "const _ = require('lodash');\nconsole.log(_.chunk([1, 2, 3], 2));\n",
            pre=["ls"],
        ),
        cmd(
            "running an entry script that does not exist",
            "node server.js",
            files={"index.js": "console.log('hi')\n"},
            proj="svc",
        ),
        js(
            "loading database settings from a folder",
            "migrate.js",
            "const cfg = require('./db/config');\nconsole.log(cfg);\n",
            proj="migrations",
        ),
    ],
    fam="node",
    bctx="running node",
)

C(
    "NPM_PACKAGE_JSON_MISSING",
    r"npm error enoent Could not read package\.json",
    "dependency",
    "npm",
    (
        "npm",
        "npm run build failed because I was one folder too high - no package.json in the repo root, it's under frontend/",
    ),
    (
        "npm",
        "npm error enoent Could not read package.json: Error: ENOENT: no such file or directory, open '<dir>/package.json'",
    ),
    [
        "npm was run in a directory that has no package.json (wrong working directory, monorepo sub package, or the project was never initialised).",
        "Fix: cd into the folder that contains package.json (or use npm --prefix <dir>), or create one with npm init.",
    ],
    ("test -f package.json && npm run <script>", "the script runs", ["exit code 0", "no Could not read package.json"]),
    [
        cmd(
            "building the frontend from the repo root",
            "npm run build",
            pre=["ls"],
            files={"frontend/src/app.js": "x\n"},
            proj="shop",
        ),
        cmd("running tests in the docs folder", "npm test", cwd="docs", proj="portal"),
        cmd("starting the dev server in a fresh folder", "npm start", proj="dashboard"),
        cmd(
            "linting from the backend folder",
            "npm run lint",
            cwd="backend",
            files={"backend/main.py": "x\n"},
            proj="fullstack",
        ),
        cmd("running a custom script in a scratch folder", "npm run dev", pre=["npm --version"], proj="landing"),
    ],
    bctx="running npm",
)

# ---------------------------------------------------------------------------------------------------- git
C(
    "GIT_PATHSPEC_NO_MATCH",
    r"^error: pathspec '.*' did not match",
    "vcs",
    "git error",
    (
        "git",
        "git checkout feature/login failed - the branch only existed on the remote under another name, locally git treated it as a path",
    ),
    ("git", "error: pathspec '<name>' did not match any file(s) known to git"),
    [
        "git checkout/commit was given a name that is neither a local branch, a remote-tracking branch nor a tracked path: a typo, a branch that exists only on the remote and was not fetched, or an untracked file.",
        "Fix: list branches with git branch -a (git fetch first), correct the name, or git add the file before committing/checking it out.",
    ],
    ("git branch -a && git checkout <branch>", "Switched to branch", ["Switched to branch", "no pathspec"]),
    [
        git("switching to a feature branch", "git checkout feature/login", pre=["git branch"], proj="webapp"),
        git("restoring a file that was never committed", "git checkout -- config/local.yml", proj="service"),
        git(
            "checking out a release branch with a typo",
            "git checkout relase-1.2",
            extra_setup=["git branch release-1.2"],
            pre=["git branch"],
        ),
        git("committing only one file", "git commit -m 'fix typo' docs/guide.md", proj="docs"),
        git(
            "switching to a hotfix branch",
            "git checkout hotfix/payment-rounding",
            pre=["git log --oneline"],
            proj="payments",
        ),
    ],
    fam="git",
    bctx="using git",
)

C(
    "GIT_BRANCH_ALREADY_EXISTS",
    r"^fatal: a branch named '.*' already exists",
    "vcs",
    "git error",
    ("git", "Tried to create develop again with git branch - it already existed from last sprint"),
    ("git", "fatal: a branch named '<branch>' already exists"),
    [
        "A branch is being created (git branch, checkout -b, switch -c, branch -m) with a name that is already used by a local branch.",
        "Fix: switch to the existing branch (git switch <branch>), pick another name, or deliberately reset it with git switch -C / git branch -f.",
    ],
    ("git branch --list <branch>", "the branch is listed once", ["exit code 0"]),
    [
        git("creating the develop branch", "git branch develop", extra_setup=["git branch develop"], proj="platform"),
        git(
            "starting work on the API feature",
            "git checkout -b feature/api",
            extra_setup=["git branch feature/api"],
            pre=["git branch"],
            proj="api",
        ),
        git("creating a hotfix branch with switch", "git switch -c hotfix", extra_setup=["git branch hotfix"]),
        git(
            "renaming a branch onto an existing name",
            "git branch -m old-ui new-ui",
            extra_setup=["git branch old-ui", "git branch new-ui"],
            proj="frontend",
        ),
        git(
            "recreating a release branch",
            "git checkout -b release/2.0",
            extra_setup=["git branch release/2.0"],
            pre=["git status --short --branch"],
            proj="mobile",
        ),
    ],
    fam="git",
    bctx="using git",
)

C(
    "GIT_AMBIGUOUS_ARGUMENT",
    r"^fatal: ambiguous argument",
    "vcs",
    "git error",
    (
        "git",
        "git log origin/main failed: no remote had been fetched in this clone, so origin/main wasn't a known revision",
    ),
    ("git", "fatal: ambiguous argument '<rev>': unknown revision or path not in the working tree."),
    [
        "The revision given to git log/diff/reset/show does not exist in this repository (typo, branch or tag not fetched, hash from another repo, or HEAD~N going past the first commit) and it is not a file path either.",
        "Fix: check the name with git branch -a / git tag / git log --oneline, git fetch the missing refs, and separate paths from revisions with --.",
    ],
    ("git rev-parse --verify <rev>", "a commit hash", ["exit code 0"]),
    [
        git("comparing with the remote main", "git log origin/main --oneline", proj="tools"),
        git("diffing against a release tag", "git diff v1.0", pre=["git tag"], proj="library"),
        git("undoing the last three commits", "git reset --hard HEAD~3", pre=["git log --oneline"]),
        git("showing a commit hash copied from chat", "git show 1a2b3c4d", proj="infra"),
        git(
            "listing commits of a misspelled branch",
            "git log devlop..main",
            extra_setup=["git branch develop"],
            proj="site",
        ),
    ],
    fam="git",
    bctx="using git",
)

C(
    "GIT_NO_UPSTREAM_BRANCH",
    r"^fatal: The current branch .* has no upstream branch",
    "vcs",
    "git push",
    (
        "git",
        "First push of feature/search failed: the new branch has no upstream yet; needed git push -u origin feature/search",
    ),
    ("git", "fatal: The current branch <branch> has no upstream branch."),
    [
        "git push without arguments was run on a branch that has no upstream (tracking) branch configured, typically a newly created local branch.",
        "Fix: push once with git push -u origin <branch> (or --set-upstream), or enable push.autoSetupRemote so new branches get an upstream automatically.",
    ],
    (
        "git push -u origin <branch> && git status -sb",
        "branch is tracking origin/<branch>",
        ["set up to track", "exit code 0"],
    ),
    [
        git(
            "first push of a feature branch",
            "git push",
            extra_setup=[*with_remote(), "git checkout -q -b feature/search"],
            proj="searchapp",
        ),
        git(
            "pushing a bug fix branch",
            "git push",
            extra_setup=[*with_remote(), "git checkout -q -b fix/login-redirect"],
            pre=["git status -sb"],
            proj="portal",
        ),
        git(
            "pushing a release branch",
            "git push",
            extra_setup=[*with_remote(), "git checkout -q -b release-2.4"],
            pre=["git remote -v"],
        ),
        git(
            "pushing work in progress to a fork",
            "git push",
            extra_setup=[*with_remote("fork"), "git checkout -q -b wip-cache"],
            proj="cachelib",
        ),
        git(
            "pushing a docs branch",
            "git push",
            extra_setup=[*with_remote(), "git checkout -q -b docs-update"],
            proj="handbook",
        ),
    ],
    fam="git",
    bctx="git push",
)


# ---------------------------------------------------------------------------------------------------- shell
def script(ctx, name, body, run=None, mode=0o755, proj="proj", pre=(), files=None):
    return cmd(ctx, run or f"./{name}", files={name: (body, mode), **(files or {})}, proj=proj, pre=pre)


C(
    "SHELL_COMMAND_NOT_FOUND",
    r": (command )?not found$",
    "shell",
    "shell error",
    (
        "shell",
        "build.sh died at step 3: docker-compose isn't installed on this box (only the docker compose plugin would be)",
    ),
    ("bash", "<script>: line <n>: <command>: command not found"),
    [
        "The shell could not find the program in PATH: it is not installed, it is installed in a directory not on PATH (e.g. ~/.local/bin, node_modules/.bin), or its name is misspelled.",
        "Fix: install the tool or call it by full path / through npx, add its directory to PATH, or fix the spelling; command -v <name> shows whether it is found.",
    ],
    ("command -v <command>", "the path of the command", ["exit code 0"]),
    [
        script(
            "running the build script",
            "build.sh",
            "#!/bin/bash\necho 'building images'\ndocker-compose build\n",
            proj="stack",
        ),
        cmd("starting the Django app with a typo", "bash -c 'pyhton3 manage.py runserver'", proj="django-site"),
        script(
            "installing frontend dependencies",
            "setup.sh",
            '#!/usr/bin/env bash\nset -e\ncd "$(dirname "$0")"\nyarn install --frozen-lockfile\n',
            pre=["ls"],
            proj="spa",
        ),
        cmd("running a dev server under sh", "sh -c 'nodemon server.js'", proj="chat"),
        script("Gradle build in CI", "ci.sh", '#!/bin/bash\n\necho "== build =="\ngradle assemble\n', proj="android"),
    ],
    bctx="running a shell script",
)

C(
    "BASH_UNBOUND_VARIABLE",
    r": unbound variable$",
    "shell",
    "bash error",
    ("shell", "deploy.sh aborted under set -u: DEPLOY_ENV was never exported in that terminal"),
    ("bash", "<script>: line <n>: <VAR>: unbound variable"),
    [
        "The script runs with set -u (nounset, often via set -euo pipefail) and expands a variable or positional parameter that is not set: a missing environment variable, a missing command-line argument, or a typo.",
        'Fix: export/pass the variable, give it a default with ${VAR:-default}, or check it explicitly (: "${VAR:?must be set}") before use.',
    ],
    ("bash -n <script> && VAR=value ./<script>", "the script runs", ["exit code 0", "no unbound variable"]),
    [
        script(
            "deploying with set -u",
            "deploy.sh",
            '#!/bin/bash\nset -euo pipefail\necho "deploying to $DEPLOY_ENV"\n',
            proj="infra",
        ),
        script(
            "script called without its argument",
            "tag.sh",
            '#!/bin/bash\nset -u\nversion=$1\ngit tag "v$version"\n',
            proj="release",
        ),
        script(
            "calling an API with a token",
            "notify.sh",
            '#!/usr/bin/env bash\nset -o nounset\ncurl -s -H "Authorization: Bearer ${API_TOKEN}" https://example.invalid\n',
            pre=["ls"],
            proj="hooks",
        ),
        script(
            "cleaning the build folder",
            "clean.sh",
            '#!/bin/bash\nset -eu\nBUILD_DIR=build\nrm -rf "$BUILD_DIRS/tmp"\n',
            proj="builder",
        ),
        cmd("one-liner in strict mode", "bash -uc 'echo \"release $VERSION\"'"),
    ],
    bctx="running bash scripts",
)

C(
    "BASH_SYNTAX_UNEXPECTED_TOKEN",
    r"syntax error near unexpected token",
    "syntax",
    "bash syntax error",
    ("bash syntax error", "check.sh wouldn't parse: the if line was missing `; then`, so bash choked at `fi`"),
    ("bash", "<script>: line <n>: syntax error near unexpected token `<token>'"),
    [
        "bash met a keyword or symbol where the grammar does not allow it: a missing then/do, an extra or unbalanced fi/done/esac/parenthesis, an else without if, or Windows line endings breaking the structure.",
        "Fix: correct the control structure around the reported line (if ...; then ... fi, for ...; do ... done), and check the script with bash -n or shellcheck.",
    ],
    ("bash -n <script>", "no output", ["exit code 0", "no syntax error"]),
    [
        script("checking for a config file", "check.sh", "#!/bin/bash\nif [ -f config.env ]\n  echo found\nfi\n"),
        script(
            "looping over log files", "rotate.sh", '#!/bin/bash\nfor f in logs/*.log\n  gzip "$f"\ndone\n', proj="logs"
        ),
        script(
            "else without a matching if", "env.sh", "#!/bin/bash\necho start\n  else\n    echo other\n", proj="dotfiles"
        ),
        script(
            "function with an unbalanced parenthesis",
            "lib.sh",
            "#!/bin/bash\nsetup( {\n  echo setup\n}\nsetup\n",
            pre=["bash --version | head -n 1"],
            proj="scripts",
        ),
        script(
            "case statement missing its pattern terminator",
            "dispatch.sh",
            '#!/bin/bash\ncase "$1" in\n  start) echo starting\n  stop) echo stopping ;;\nesac\n',
            proj="svcctl",
        ),
    ],
    bctx="running bash scripts",
)

C(
    "SHELL_PERMISSION_DENIED_EXEC",
    r"Permission denied$",
    "shell",
    "shell error",
    ("shell", "./deploy.sh: Permission denied - the script was committed without the executable bit"),
    ("shell", "<shell>: <script>: Permission denied"),
    [
        "The file was executed directly but has no execute permission (checked out or created without chmod +x, or on a noexec mount).",
        "Fix: chmod +x <script> (and git update-index --chmod=+x <script> to keep it in git), or run it through the interpreter: bash <script>.",
    ],
    ("chmod +x <script> && ./<script>", "the script runs", ["exit code 0", "no Permission denied"]),
    [
        script(
            "running the deploy script",
            "deploy.sh",
            "#!/bin/bash\necho deploy\n",
            run="bash -c ./deploy.sh",
            mode=0o644,
            proj="infra",
        ),
        script(
            "running a build step under sh",
            "build.sh",
            "#!/bin/sh\necho build\n",
            run="sh -c ./build.sh",
            mode=0o644,
            pre=["ls -l"],
            proj="firmware",
        ),
        script(
            "executing a tool in bin/",
            "bin/migrate",
            "#!/usr/bin/env bash\necho migrate\n",
            run="bash -c bin/migrate",
            mode=0o644,
            proj="backend",
        ),
        script(
            "starting a server script",
            "start-server.sh",
            "#!/bin/bash\nexec python3 -m http.server\n",
            run="bash -c ./start-server.sh",
            mode=0o600,
        ),
        script(
            "running a generated test script",
            "run_tests.sh",
            "#!/bin/sh\nexit 0\n",
            run="sh -c './run_tests.sh --fast'",
            mode=0o640,
            proj="qa",
        ),
    ],
    bctx="executing scripts",
)


# ---------------------------------------------------------------------------------------------------- make
def mk(ctx, makefile, run="make", proj="proj", pre=(), files=None):
    return cmd(ctx, run, files={"Makefile": makefile, **(files or {})}, proj=proj, pre=pre)


C(
    "MAKE_RECIPE_FAILED",
    r"^make(\[\d+\])?: \*\*\* \[.*\] Error \d+",
    "build",
    "make error",
    (
        "make",
        "make test failed: the diff step in the check recipe found expected.txt and actual.txt differ, make reported Error 1",
    ),
    ("make", "make: *** [Makefile:<line>: <target>] Error <code>"),
    [
        "A command in a recipe exited with a non-zero status, so make stopped; the lines just above the *** line show which command failed and why (failing test, missing file, grep without match, exit code from a script).",
        "Fix: run the failing recipe command by hand to see its own error, fix that cause (or prefix the command with - if its failure is expected), then rerun make.",
    ],
    ("make <target>", "make finishes without ***", ["exit code 0", "no *** Error"]),
    [
        mk(
            "comparing test output",
            "check:\n\tprintf 'a\\nb\\n' > actual.txt\n\tdiff expected.txt actual.txt\n",
            run="make check",
            files={"expected.txt": "a\nc\n"},
            proj="golden",
        ),
        mk("verifying the release archive exists", "all: dist\n\ndist:\n\ttest -f dist/app.tar.gz\n", proj="packager"),
        mk(
            "failing on TODO markers",
            "lint:\n\t! grep -n TODO src.txt\n",
            run="make lint",
            files={"src.txt": "ok\nTODO: fix\n"},
            pre=["ls"],
            proj="lint",
        ),
        mk(
            "python step exiting with status 2",
            "migrate:\n\tpython3 -c 'import sys; sys.exit(2)'\n",
            run="make migrate",
            proj="dbmig",
        ),
        mk(
            "sub make in a library folder",
            "all:\n\t$(MAKE) -C lib\n",
            files={"lib/Makefile": "all:\n\texit 3\n"},
            proj="multi",
        ),
    ],
    mode="first",
    bctx="running make",
)


# ---------------------------------------------------------------------------------------------------- perl
def pl(ctx, name, code, proj="proj", pre=()):
    return cmd(ctx, f"perl {name}", files={name: code}, proj=proj, pre=pre)


C(
    "PERL_CANT_LOCATE_MODULE",
    r"^Can't locate \S+ in @INC",
    "dependency",
    "perl error",
    (
        "perl",
        "fetch.pl failed at compile time: JSON::XS isn't installed on this machine (Can't locate JSON/XS.pm in @INC)",
    ),
    ("perl", "Can't locate <Module/Path>.pm in @INC (you may need to install the <Module> module)"),
    [
        "A use/require names a Perl module that is not installed in any @INC directory, or a local module whose directory is not on @INC (missing use lib).",
        "Fix: install the module (cpanm <Module> or the distro package lib<module>-perl) or add its directory with use lib / -I, then check with perl -M<Module> -e1.",
    ],
    ("perl -M<Module> -e1", "no output", ["exit code 0", "no Can't locate"]),
    [
        pl(
            "fetching JSON from an API",
            "fetch.pl",
            "use strict;\nuse warnings;\nuse JSON::XS;\n\nprint encode_json([1]);\n",
            proj="fetcher",
        ),
        pl(
            "reading a CSV export",
            "import.pl",
            "use strict;\nuse Text::CSV;\n\nmy $csv = Text::CSV->new;\n",
            proj="importer",
        ),
        pl(
            "connecting to a database",
            "report.pl",
            "#!/usr/bin/perl\nuse strict;\nuse warnings;\nuse DBI;\n",
            pre=["perl -v | head -n 2"],
        ),
        pl(
            "loading YAML settings",
            "config.pl",
            "use strict;\nuse YAML qw(LoadFile);\n\nmy $c = LoadFile('c.yml');\n",
            proj="ops",
        ),
        pl(
            "project helper module without use lib",
            "bin/run.pl",
            "use strict;\nuse My::Helper;\n\nMy::Helper::run();\n",
            proj="perlapp",
        ),
    ],
    bctx="running perl",
)

C(
    "PERL_UNDEFINED_SUBROUTINE",
    r"^Undefined subroutine &",
    "runtime",
    "perl error",
    ("perl", "parse.pl died: parse_line() was called but the sub is named parse_row"),
    ("perl", "Undefined subroutine &<package>::<name> called at <file> line <n>."),
    [
        "A subroutine is called that is not defined in that package at run time: a typo, a sub defined in another package or module that was not imported (missing use or export), or a module that was required but does not export it.",
        "Fix: define the sub or fix its name, call it fully qualified (Pkg::name), or import it (use Module qw(name)) and make sure the module exports it.",
    ],
    (
        "perl -c <script>.pl && perl <script>.pl",
        "syntax OK and the script runs",
        ["syntax OK", "no Undefined subroutine"],
    ),
    [
        pl(
            "parsing lines of a log",
            "parse.pl",
            "use strict;\nuse warnings;\n\nsub parse_row { return split /,/, shift }\n\nmy @f = parse_line('a,b');\nprint scalar(@f), \"\\n\";\n",
            proj="logparse",
        ),
        pl("trimming input without the helper", "clean.pl", "use strict;\nmy $s = trim('  x  ');\nprint \"$s\\n\";\n"),
        pl(
            "calling a function of another package",
            "slug.pl",
            "use strict;\npackage Utils;\nsub slug { lc shift }\npackage main;\nprint Utils::slugify('Hello'), \"\\n\";\n",
            proj="blog",
        ),
        pl(
            "calling a callback by name",
            "dispatch.pl",
            "use strict;\nmy %h = (start => \\&do_start);\n$h{start}->();\n",
            pre=["perl -v | head -n 2"],
            proj="dispatcher",
        ),
        pl(
            "POSIX function that was not imported",
            "rounding.pl",
            'use strict;\nuse POSIX ();\nprint floor(2.7), "\\n";\n',
            proj="math",
        ),
    ],
    bctx="running perl",
)


# ---------------------------------------------------------------------------------------------------- sqlite3
def sq(ctx, sql, db="app.db", proj="proj", pre=(), via="file"):
    if via == "arg":
        return cmd(ctx, f"sqlite3 {db} {shlex.quote(sql)}", proj=proj, pre=pre)
    return cmd(ctx, f"sqlite3 -bail {db} < schema.sql", files={"schema.sql": sql}, proj=proj, pre=pre)


C(
    "SQLITE_NO_SUCH_TABLE",
    r"no such table: ",
    "database",
    "sqlite error",
    ("sqlite", "Query on users failed - the app.db I opened was a fresh empty file (wrong path), so no such table"),
    ("sqlite3", "Error: in prepare, no such table: <table>"),
    [
        "The SQL refers to a table that does not exist in the opened database: the schema/migrations were not run, the table name is misspelled, or sqlite3 silently created a new empty database because the file path was wrong.",
        "Fix: check the path and the schema (.tables, .schema), run the migration that creates the table, or fix the table name.",
    ],
    ("sqlite3 <db> '.tables'", "the table is listed", ["<table>", "exit code 0"]),
    [
        sq("querying users in a freshly opened database", "select * from users;", via="arg", proj="webapp"),
        sq(
            "running a report script on orders",
            "create table customers(id integer primary key);\nselect count(*) from customers;\nselect total from orders;\n",
            db="shop.db",
            proj="shop",
        ),
        sq(
            "inserting log rows before the migration",
            "insert into audit_log(msg) values ('boot');\n",
            db="audit.db",
            pre=["ls"],
        ),
        sq(
            "joining against a misspelled table",
            "create table items(id int, cat int);\ncreate table categories(id int, name text);\nselect i.id from items i join categorys c on c.id = i.cat;\n",
            db="catalog.db",
            proj="catalog",
        ),
        sq(
            "cleaning sessions with a schema prefix",
            "delete from main.sessions where expired = 1;",
            db="sessions.db",
            via="arg",
            proj="auth",
        ),
    ],
    bctx="using sqlite3",
)

C(
    "SQLITE_UNIQUE_CONSTRAINT",
    r"UNIQUE constraint failed: ",
    "database",
    "sqlite error",
    ("sqlite", "Seeding users.email failed on the second insert: the same address twice hit the UNIQUE constraint"),
    ("sqlite3", "Runtime error near line <n>: UNIQUE constraint failed: <table>.<column> (19)"),
    [
        "An INSERT or UPDATE would create a second row with the same value in a UNIQUE or PRIMARY KEY column (or column set): duplicate seed data, re-running an import, or reusing an explicit id.",
        "Fix: remove or merge the duplicate, use INSERT OR IGNORE / ON CONFLICT DO UPDATE (upsert) when re-running imports, or let the database assign the key.",
    ],
    (
        "sqlite3 <db> 'select <col>, count(*) from <table> group by <col> having count(*) > 1;'",
        "no rows",
        ["exit code 0"],
    ),
    [
        sq(
            "seeding users",
            "create table users(id integer primary key, email text unique);\ninsert into users(email) values ('ann@example.com');\ninsert into users(email) values ('ann@example.com');\n",
            proj="accounts",
        ),
        sq(
            "re-running a product import",
            "create table products(sku text primary key, name text);\ninsert into products values ('A-100', 'bolt');\ninsert into products values ('B-200', 'nut');\ninsert into products values ('A-100', 'bolt v2');\n",
            db="stock.db",
            proj="stock",
        ),
        sq(
            "enrolling a student twice",
            "create table enrollments(student_id int, course_id int, unique(student_id, course_id));\ninsert into enrollments values (1, 10);\ninsert into enrollments values (1, 10);\n",
            db="school.db",
            pre=["ls"],
        ),
        sq(
            "inserting an explicit id that exists",
            "create table tasks(id integer primary key, title text);\ninsert into tasks values (1, 'a');\ninsert into tasks values (1, 'b');\n",
            db="todo.db",
            proj="todo",
        ),
        sq(
            "renaming a tag onto an existing one",
            "create table tags(name text unique);\ninsert into tags values ('bug'), ('feature');\nupdate tags set name = 'bug' where name = 'feature';\n",
            db="tracker.db",
            proj="tracker",
        ),
    ],
    bctx="using sqlite3",
)


# ---------------------------------------------------------------------------------------------------- postgres
def pg(ctx, db, sql, proj="proj", pre=()):
    return cmd(
        ctx,
        f"psql -X -q -v ON_ERROR_STOP=1 -d {db} -f migrate.sql",
        files={"migrate.sql": sql},
        setup=[f"createdb {db}"],
        proj=proj,
        pre=pre,
        pgdb=db,
    )


C(
    "PG_RELATION_DOES_NOT_EXIST",
    r'ERROR:  relation ".*" does not exist',
    "database",
    "postgres error",
    (
        "postgres",
        'The orders report failed: psql said relation "orders" does not exist - the migration creating it hadn\'t been applied to this database',
    ),
    ("postgres", 'ERROR:  relation "<table>" does not exist'),
    [
        "The SQL names a table/view/sequence that PostgreSQL cannot find: migrations not applied, wrong database or schema (search_path), a misspelling, or a name created with quotes and different case.",
        "Fix: connect to the right database, apply the migration, qualify the name with its schema or fix search_path, and match the exact case of quoted identifiers (\\dt lists the tables).",
    ],
    ("psql -d <db> -c '\\dt'", "the table is listed", ["<table>", "exit code 0"]),
    [
        pg(
            "running the monthly orders report",
            "shop",
            "SELECT id, total FROM orders WHERE total > 100;\n",
            proj="reports",
        ),
        pg(
            "loading fixtures before the schema",
            "inventory",
            "CREATE TABLE warehouses (id int);\nINSERT INTO stock_items (sku, qty) VALUES ('A1', 5);\n",
            proj="inventory",
        ),
        pg(
            "joining invoices with a misspelled table",
            "billing",
            "CREATE TABLE invoices (id int, customer_id int);\nSELECT i.id FROM invoices i JOIN customer c ON c.id = i.customer_id;\n",
            pre=["psql --version"],
        ),
        pg(
            "writing to an audit table in another schema",
            "app",
            "INSERT INTO audit.events (kind) VALUES ('login');\n",
            proj="auditing",
        ),
        pg(
            "querying a table created with quoted mixed case",
            "crm",
            'CREATE TABLE "Contacts" (id int);\nSELECT * FROM Contacts;\n',
            proj="crm",
        ),
    ],
    fam="pg",
    bctx="running SQL on PostgreSQL",
)

C(
    "PG_DUPLICATE_KEY",
    r"ERROR:  duplicate key value violates unique constraint",
    "database",
    "postgres error",
    ("postgres", "Seed script inserted user id 1 twice, so Postgres rejected it with a users_pkey duplicate key error"),
    ("postgres", 'ERROR:  duplicate key value violates unique constraint "<constraint>"'),
    [
        "An INSERT/UPDATE would put a value (or combination) that already exists into a primary key or unique index: duplicate seed data, re-running an import, or a sequence that is behind rows inserted with explicit ids.",
        "Fix: deduplicate the data, use INSERT ... ON CONFLICT DO NOTHING/UPDATE, or reset the sequence with setval(...) to the max id; the DETAIL line shows the conflicting key.",
    ],
    ("psql -d <db> -c 'select <key>, count(*) from <table> group by 1 having count(*) > 1'", "(0 rows)", ["(0 rows)"]),
    [
        pg(
            "seeding the users table",
            "accounts",
            "CREATE TABLE users (id int PRIMARY KEY, name text);\nINSERT INTO users VALUES (1, 'ann');\nINSERT INTO users VALUES (1, 'bob');\n",
            proj="seed",
        ),
        pg(
            "registering an email twice",
            "signup",
            "CREATE TABLE members (id serial PRIMARY KEY, email text UNIQUE);\nINSERT INTO members (email) VALUES ('x@example.com');\nINSERT INTO members (email) VALUES ('x@example.com');\n",
            proj="signup",
        ),
        pg(
            "sequence behind rows inserted with explicit ids",
            "blog",
            "CREATE TABLE posts (id serial PRIMARY KEY, title text);\nINSERT INTO posts (id, title) VALUES (1, 'hello');\nINSERT INTO posts (title) VALUES ('second');\n",
            pre=["psql --version"],
        ),
        pg(
            "importing a price list twice",
            "pricing",
            "CREATE TABLE prices (sku text, region text, CONSTRAINT prices_sku_region UNIQUE (sku, region));\nINSERT INTO prices VALUES ('A', 'eu'), ('B', 'eu');\nINSERT INTO prices VALUES ('A', 'eu');\n",
            proj="pricing",
        ),
        pg(
            "moving a slug onto an existing one",
            "cms",
            "CREATE TABLE pages (slug text PRIMARY KEY);\nINSERT INTO pages VALUES ('about'), ('team');\nUPDATE pages SET slug = 'about' WHERE slug = 'team';\n",
            proj="cms",
        ),
    ],
    fam="pg",
    bctx="running SQL on PostgreSQL",
)

# ---------------------------------------------------------------------------------------------------- misc tools
C(
    "JQ_CANNOT_INDEX",
    r"Cannot index \w+ with",
    "tool",
    "jq error",
    ("jq", "jq '.name' failed because the API returns an array of users, not a single object - needed .[].name"),
    ("jq", 'jq: error (at <input>): Cannot index <type> with "<key>"'),
    [
        "The jq filter indexes a value of the wrong type: a key lookup on an array (need .[] first), on a string or number, or a numeric index on an object; the data shape differs from what the filter assumes.",
        "Fix: look at the input shape (jq 'type', jq 'keys'), iterate arrays with .[] or map(), and guard optional parts with .field? or select(type == \"object\").",
    ],
    ("jq '<filter>' <file>.json", "the selected values", ["exit code 0", "no Cannot index"]),
    [
        cmd(
            "extracting user names from an API dump",
            "jq '.name' users.json",
            files={"users.json": '[{"name": "ann"}, {"name": "bob"}]\n'},
            proj="apidump",
        ),
        cmd(
            "taking the first element of an object", "jq '.[0]' config.json", files={"config.json": '{"debug": true}\n'}
        ),
        cmd(
            "reading the id of a user that is a string",
            "jq '.user.id' event.json",
            files={"event.json": '{"user": "ann"}\n'},
            pre=["cat event.json"],
            proj="events",
        ),
        cmd(
            "summing prices of a list of numbers",
            "jq '[.items[].price] | add' order.json",
            files={"order.json": '{"items": [3, 4]}\n'},
            proj="orders",
        ),
        cmd(
            "piping kubectl-style output through jq", "echo '{\"items\": \"none\"}' | jq '.items.metadata'", proj="k8s"
        ),
    ],
    bctx="filtering JSON with jq",
)

C(
    "TAR_NOT_FOUND_IN_ARCHIVE",
    r": Not found in archive",
    "tool",
    "tar error",
    ("tar", "Extracting docs/README.md from the release tarball failed - the archive paths are prefixed with app-1.0/"),
    ("tar", "tar: <member>: Not found in archive"),
    [
        "A member name given to tar x/t is not in the archive exactly as written: the archive has a leading directory prefix (project-1.0/...), a ./ prefix, or the name is misspelled.",
        "Fix: list the archive with tar tf <archive> and use the exact stored path (or --wildcards / --strip-components).",
    ],
    ("tar tf <archive> | grep <member>", "the member path", ["exit code 0"]),
    [
        cmd(
            "extracting one file from a release tarball",
            "tar xzf release.tar.gz docs/README.md",
            setup=[
                "mkdir -p app-1.0/docs && echo hi > app-1.0/docs/README.md && tar czf release.tar.gz app-1.0 && rm -rf app-1.0"
            ],
            proj="release",
        ),
        cmd(
            "restoring a config from a backup",
            "tar xf backup.tar etc/app.conf",
            setup=["mkdir -p etc && echo x > etc/app.cnf && tar cf backup.tar etc && rm -rf etc"],
            pre=["ls"],
            proj="backup",
        ),
        cmd(
            "listing a member with a ./ prefix",
            "tar tf site.tar index.html",
            setup=["echo x > index.html && tar cf site.tar ./index.html && rm index.html"],
            proj="site",
        ),
        cmd(
            "extracting two files, one missing",
            "tar xf logs.tar logs/app.log logs/db.log",
            setup=["mkdir logs && echo a > logs/app.log && tar cf logs.tar logs && rm -rf logs"],
        ),
        cmd(
            "unpacking the schema from a dump archive",
            "tar xzf dump.tgz schema.sql",
            setup=["mkdir dump && echo x > dump/schema.sql && tar czf dump.tgz dump && rm -rf dump"],
            proj="dbdump",
        ),
    ],
    bctx="extracting tar archives",
)

C(
    "PIP_REQUIREMENTS_FILE_MISSING",
    r"^ERROR: Could not open requirements file",
    "dependency",
    "pip",
    (
        "pip",
        "pip install -r requirements-dev.txt failed - that file doesn't exist in this repo, the dev deps are in requirements/dev.txt",
    ),
    ("pip", "ERROR: Could not open requirements file: [Errno 2] No such file or directory: '<file>'"),
    [
        "pip was pointed at a requirements or constraints file that does not exist at that path: wrong working directory, a renamed file, or a nested -r include with a path relative to the wrong folder.",
        "Fix: run pip from the project root or pass the correct path (ls requirements*), and make nested -r/-c includes relative to the including file.",
    ],
    (
        "python3 -m pip install -r <file> --dry-run",
        "Would install ...",
        ["exit code 0", "no Could not open requirements file"],
    ),
    [
        cmd(
            "installing dev dependencies",
            "pip install -r requirements-dev.txt",
            files={"requirements/dev.txt": "pytest\n"},
            pre=["ls"],
            proj="pylib",
        ),
        cmd(
            "installing from a nested requirements file",
            "pip install -r requirements.txt",
            files={"requirements.txt": "-r base.txt\n"},
            proj="webapi",
        ),
        cmd(
            "installing production requirements that include a missing common file",
            "python3 -m pip install -r requirements/prod.txt",
            files={"requirements/prod.txt": "-r common.txt\ngunicorn\n"},
            proj="svc",
        ),
        cmd("CI step run from the wrong folder", "pip install -r docs/requirements.txt", cwd="ci", proj="docsite"),
        cmd(
            "installing test requirements",
            "python3 -m pip install -r test-requirements.txt",
            pre=["python3 -m pip --version"],
            proj="plugin",
        ),
    ],
    bctx="installing Python packages with pip",
)

C(
    "CMAKE_UNKNOWN_COMMAND",
    r"Unknown CMake command",
    "build",
    "cmake error",
    ("cmake", "CMake script failed at line 2: `add_exe` isn't a command, it's add_executable"),
    ("cmake", 'CMake Error at <file>:<line> (<command>): Unknown CMake command "<command>".'),
    [
        "CMake met a command name that is neither built in nor defined by an included module or function: a typo (target_link_library vs target_link_libraries), a function from a module that was not include()d, or a command from a newer CMake version.",
        "Fix: correct the name, include() the module or file that defines the function/macro before using it, or raise cmake_minimum_required / upgrade CMake.",
    ],
    ("cmake -S . -B build", "-- Configuring done", ["Configuring done", "no CMake Error"]),
    [
        cmd(
            "running a CMake script",
            "cmake -P build.cmake",
            files={"build.cmake": "cmake_minimum_required(VERSION 3.10)\nadd_exe(foo main.c)\n"},
            proj="tools",
        ),
        cmd(
            "linking a library with a typo",
            "cmake -P link.cmake",
            files={
                "link.cmake": "cmake_minimum_required(VERSION 3.10)\nset(LIBS m)\ntarget_link_library(app ${LIBS})\n"
            },
            proj="engine",
        ),
        cmd(
            "calling a helper from a module that was not included",
            "cmake -P package.cmake",
            files={
                "package.cmake": 'cmake_minimum_required(VERSION 3.10)\n\nmessage(STATUS "packaging")\nwrite_basic_package_version_file(cfg.cmake VERSION 1.0 COMPATIBILITY AnyNewerVersion)\n'
            },
            pre=["cmake --version | head -n 1"],
            proj="pkg",
        ),
        cmd(
            "configuring a project with a misspelled directive",
            "cmake -S . -B build",
            files={
                "CMakeLists.txt": "cmake_minimum_required(VERSION 3.13)\nproject(demo NONE)\n\ninclude_directory(include)\n"
            },
            proj="demo",
            timeout=60,
        ),
        cmd(
            "script using a function that is never defined",
            "cmake -P gen.cmake",
            files={"gen.cmake": "cmake_minimum_required(VERSION 3.10)\nset(OUT gen.h)\n\ngenerate_header(${OUT})\n"},
            proj="codegen",
        ),
    ],
    bctx="running cmake",
)

C(
    "OPENSSL_CANNOT_OPEN_INPUT",
    r"^Could not open file or uri for loading",
    "tool",
    "openssl",
    ("openssl", "openssl x509 couldn't open server.crt - the cert lives under certs/, I ran it from the wrong folder"),
    ("openssl", "Could not open file or uri for loading <object> from <file>"),
    [
        "openssl was given an input certificate/key/CSR path that does not exist or cannot be read (wrong directory, typo, file not generated yet).",
        "Fix: check the path (ls -l), generate the missing file first (openssl req/genpkey) or pass the right -in argument.",
    ],
    ("openssl x509 -in <cert> -noout -subject", "subject=...", ["subject=", "exit code 0"]),
    [
        cmd(
            "inspecting the server certificate",
            "openssl x509 -in server.crt -noout -subject",
            files={"certs/server.crt": "x\n"},
            proj="tls",
        ),
        cmd("checking the private key", "openssl rsa -in key.pem -check -noout", pre=["ls"], proj="vpn"),
        cmd("printing the CA certificate dates", "openssl x509 -in certs/ca.pem -noout -dates", proj="pki"),
        cmd("deriving a public key", "openssl pkey -in private/app.key -pubout", proj="signer"),
        cmd(
            "computing a certificate fingerprint",
            "openssl x509 -in chain.pem -noout -fingerprint -sha256",
            pre=["openssl version"],
            proj="mtls",
        ),
    ],
    bctx="using openssl",
)

# also Python: two more runtime classes for weight on the most common family
C(
    "PY_NOT_SUBSCRIPTABLE",
    r"^TypeError: '.*' object is not subscriptable",
    "runtime",
    "python type error",
    (
        "python exception",
        "get_user() returned None for the unknown id and the code indexed it with ['name'] - 'NoneType' object is not subscriptable",
    ),
    ("python", "TypeError: '<type>' object is not subscriptable"),
    [
        "Square-bracket indexing was applied to a value that does not support it: None returned by a function, an int or float, a function object (missing call parentheses), or a set.",
        "Fix: check that the value is the container you expect (call the function, handle None, convert a set to a list), and index only lists, tuples, dicts and strings.",
    ],
    ("python3 <script>.py", "runs without TypeError", ["exit code 0", "no not subscriptable"]),
    [
        py(
            "looking up a user by id",
            "users.py",
            """USERS = {1: {"name": "ann"}}

def get_user(uid):
    return USERS.get(uid)

print(get_user(2)["name"])
""",
            proj="users",
        ),
        py(
            "taking the first digit of a number",
            "digits.py",
            """n = 4821
print(n[0])
""",
        ),
        py(
            "indexing a function instead of its result",
            "config.py",
            """def settings():
    return {"debug": True}

print(settings["debug"])
""",
            pre=["ls"],
            proj="appcfg",
        ),
        py(
            "indexing a float measurement",
            "sensor.py",
            """reading = 21.5
print(reading[1])
""",
            proj="sensors",
        ),
        py(
            "taking the first element of a set",
            "tags.py",
            """tags = {"python", "cli"}
print(tags[0])
""",
            proj="tagger",
        ),
    ],
    fam="py",
    mode="last",
    bctx="indexing values in Python",
)


# =============================================================================================== negatives
# Real errors of kinds that no class above covers (and no evaluation kind): expected = null.
NPM_KEY = r"^npm error (?!code |errno |syscall |path |A complete log|$)"


def N(qid, qtype, ctx, run, files=None, pre=(), setup=(), proj="proj", fam="gen", key=None, **kw):
    return dict(
        id=qid,
        qtype=qtype,
        ctx=ctx,
        run=run,
        files=files or {},
        pre=list(pre),
        setup=list(setup),
        proj=proj,
        fam=fam,
        key=key,
        **kw,
    )


def NPY(qid, ctx, name, code, qtype="runtime", proj="proj", pre=()):
    return N(qid, qtype, ctx, f"python3 {name}", files={name: code}, pre=pre, proj=proj, fam="py")


NEGATIVES = [
    NPY(
        "py-unhashable",
        "grouping records by a list key",
        "group.py",
        'groups = {}\nkey = ["eu", "west"]\ngroups[key] = 1\n',
        proj="geo",
    ),
    NPY(
        "py-not-callable", "shadowing the str builtin", "fmt.py", 'str = "total"\nprint(str(5))\n', qtype="python error"
    ),
    NPY(
        "py-cannot-import-name",
        "old import from collections",
        "compat.py",
        "from collections import Mapping\n",
        qtype="dependency",
        proj="legacy",
    ),
    NPY(
        "py-module-attr",
        "timing code with a removed function",
        "bench.py",
        "import time\nstart = time.clock()\n",
        qtype="",
        proj="bench",
    ),
    NPY(
        "py-dict-changed",
        "deleting keys while iterating",
        "prune.py",
        'd = {"a": 1, "b": 0}\nfor k in d:\n    if d[k] == 0:\n        del d[k]\n',
        proj="cache",
    ),
    NPY(
        "py-assertion",
        "sanity check in a data script",
        "check.py",
        'rows = 3\nassert rows == 4, "expected 4 rows after the join"\n',
        qtype="python assertion",
    ),
    NPY(
        "py-math-domain",
        "square root of a negative variance",
        "variance.py",
        "import math\nprint(math.sqrt(-4.0))\n",
        proj="stats",
    ),
    NPY(
        "py-file-exists",
        "creating an output directory twice",
        "mkout.py",
        'import os\nos.mkdir("out")\nos.mkdir("out")\n',
        qtype="runtime",
    ),
    NPY("py-print-py2", "running a Python 2 script", "legacy.py", 'print "hello"\n', qtype="syntax", proj="old"),
    NPY("py-return-outside", "return at module level", "script.py", "x = 1\nreturn x\n", qtype="python syntax error"),
    NPY(
        "py-strptime",
        "parsing a date with the wrong format",
        "dates.py",
        'from datetime import datetime\ndatetime.strptime("2024/01/05", "%Y-%m-%d")\n',
        qtype="python value error",
    ),
    NPY("py-regex", "compiling a broken regex", "match.py", 'import re\nre.compile("(foo")\n', qtype=""),
    NPY(
        "py-unbound-local",
        "incrementing a global counter in a function",
        "counter.py",
        "counter = 0\n\ndef hit():\n    counter += 1\n\nhit()\n",
        proj="metrics",
    ),
    NPY(
        "py-unexpected-kwarg",
        "calling a function with a renamed parameter",
        "api.py",
        "def send(msg, retries=1):\n    return msg\n\nsend('x', retry=3)\n",
        qtype="python call error",
    ),
    N(
        "gcc-conflicting-types",
        "build",
        "prototype does not match the definition",
        "gcc -c calc.c",
        files={"calc.c": "int area(int w, int h);\n\ndouble area(int w, int h) { return w * h; }\n"},
        fam="cc",
    ),
    N(
        "gcc-implicit-decl",
        "C compile error",
        "calling a function without its prototype",
        "gcc -Werror=implicit-function-declaration -c run.c",
        files={"run.c": "int main(void) { return helper(2); }\n"},
        fam="cc",
        proj="runner",
    ),
    N(
        "gcc-too-few-args",
        "",
        "calling a C function with too few arguments",
        "gcc -c call.c",
        files={"call.c": "int mul(int a, int b) { return a * b; }\nint main(void) { return mul(3); }\n"},
        fam="cc",
    ),
    N(
        "gcc-no-member",
        "build",
        "accessing a field that the struct does not have",
        "gcc -c point.c",
        files={"point.c": "struct point { int x, y; };\nint z(struct point p) { return p.z; }\n"},
        fam="cc",
        proj="geom",
    ),
    N(
        "gpp-not-member-std",
        "C++ build",
        "misspelled std container",
        "g++ -c list.cpp",
        files={"list.cpp": "#include <vector>\nstd::vectr<int> v;\n"},
        fam="cc",
        proj="containers",
    ),
    N(
        "ld-cannot-find-lib",
        "linker error",
        "linking against a library that is not installed",
        "gcc main.o -o app -lyaml_cpp_missing",
        pre=["gcc -c main.c"],
        files={"main.c": "int main(void) { return 0; }\n"},
        fam="gen",
        proj="cfgapp",
    ),
    N(
        "rust-e0384",
        "rust compile error",
        "reassigning an immutable binding",
        "rustc --edition 2021 --color never count.rs",
        files={"count.rs": 'fn main() {\n    let total = 0;\n    total = 5;\n    println!("{}", total);\n}\n'},
        fam="rust",
    ),
    N(
        "rust-e0277",
        "build",
        "printing a struct without Display",
        "rustc --edition 2021 --color never show.rs",
        files={
            "show.rs": 'struct Point { x: i32 }\nfn main() {\n    let p = Point { x: 1 };\n    println!("{}", p);\n}\n'
        },
        fam="rust",
        proj="points",
    ),
    N(
        "rust-e0004",
        "rust",
        "match that misses an enum variant",
        "rustc --edition 2021 --color never state.rs",
        files={
            "state.rs": "enum State { On, Off, Unknown }\nfn f(s: State) -> u8 { match s { State::On => 1, State::Off => 0 } }\nfn main() { f(State::Unknown); }\n"
        },
        fam="rust",
        proj="fsm",
    ),
    N(
        "rust-e0596",
        "borrow checker",
        "pushing to a vector not declared mut",
        "rustc --edition 2021 --color never push.rs",
        files={"push.rs": 'fn main() {\n    let v = Vec::new();\n    v.push(1);\n    println!("{:?}", v);\n}\n'},
        fam="rust",
        proj="vecs",
    ),
    N(
        "cargo-bad-manifest",
        "cargo",
        "typo in Cargo.toml",
        "cargo build",
        files={
            "Cargo.toml": '[package]\nname = "app"\nversion = "0.1.0\nedition = "2021"\n',
            "src/main.rs": "fn main() {}\n",
        },
        fam="gen",
        proj="app",
        key=r"^error:",
    ),
    N(
        "javac-missing-return",
        "java compile error",
        "method without a return on every path",
        "javac Grade.java",
        files={
            "Grade.java": 'public class Grade {\n    static String grade(int s) {\n        if (s > 50) return "pass";\n    }\n}\n'
        },
        fam="javac",
        timeout=60,
    ),
    N(
        "javac-unreported",
        "build",
        "reading a file without handling IOException",
        "javac Reader.java",
        files={
            "Reader.java": 'import java.nio.file.*;\npublic class Reader {\n    public static void main(String[] a) {\n        Files.readString(Path.of("x.txt"));\n    }\n}\n'
        },
        fam="javac",
        timeout=60,
    ),
    N(
        "javac-public-filename",
        "",
        "public class in a file with another name",
        "javac Helpers.java",
        files={"Helpers.java": "public class Helper {}\n"},
        fam="javac",
        timeout=60,
    ),
    N(
        "java-unsupported-op",
        "java exception",
        "adding to an immutable list",
        "java -cp out Items",
        pre=["javac -d out Items.java"],
        files={
            "Items.java": 'import java.util.*;\npublic class Items {\n    public static void main(String[] a) {\n        List<String> l = List.of("a");\n        l.add("b");\n    }\n}\n'
        },
        fam="java",
        timeout=60,
    ),
    N(
        "java-concurrent-mod",
        "runtime",
        "removing from a list inside a for-each",
        "java -cp out Prune",
        pre=["javac -d out Prune.java"],
        files={
            "Prune.java": "import java.util.*;\npublic class Prune {\n    public static void main(String[] a) {\n        List<Integer> l = new ArrayList<>(List.of(1, 2, 3));\n        for (Integer i : l) if (i == 1) l.remove(i);\n    }\n}\n"
        },
        fam="java",
        timeout=60,
    ),
    N(
        "java-no-main-class",
        "java",
        "running a class that was never compiled",
        "java -cp out app.Main",
        fam="java",
        timeout=60,
    ),
    N(
        "node-const-assign",
        "javascript error",
        "reassigning a const",
        "node retry.js",
        files={"retry.js": "const attempts = 0;\nattempts = attempts + 1;\n"},
        fam="node",
    ),
    N(
        "node-tdz",
        "",
        "using a let variable before its declaration",
        "node init.js",
        files={"init.js": "console.log(settings);\nlet settings = {};\n"},
        fam="node",
    ),
    N(
        "node-class-new",
        "runtime",
        "calling a class without new",
        "node model.js",
        files={"model.js": "class Model {}\nconst m = Model();\n"},
        fam="node",
    ),
    N(
        "node-invalid-arg",
        "",
        "path.join with a number",
        "node paths.js",
        files={"paths.js": "const path = require('path');\npath.join('/srv', 42);\n"},
        fam="node",
    ),
    N(
        "npm-ci-nolock",
        "npm",
        "npm ci without a lockfile",
        "npm ci",
        files={"package.json": '{"name": "demo", "version": "1.0.0"}\n'},
        key=NPM_KEY,
        proj="demo",
    ),
    N(
        "npm-offline-notcached",
        "dependency",
        "installing a package while offline",
        "npm install --offline left-pad",
        files={"package.json": '{"name": "pad", "version": "1.0.0"}\n'},
        key=NPM_KEY,
        proj="pad",
        timeout=60,
    ),
    N(
        "git-src-refspec",
        "vcs",
        "pushing a repository with no commits",
        "git push origin main",
        setup=["git init -q .", "git remote add origin /nonexistent/remote.git"],
        fam="git",
    ),
    N(
        "git-no-such-remote",
        "git",
        "removing a remote that is not configured",
        "git remote remove upstream",
        setup=GIT_INIT,
        fam="git",
    ),
    N(
        "git-not-fully-merged",
        "",
        "deleting an unmerged branch",
        "git branch -d feature",
        setup=[
            *GIT_INIT,
            "git checkout -q -b feature",
            "echo x > f.txt",
            "git add f.txt",
            "git commit -q -m f",
            "git checkout -q main",
        ],
        fam="git",
    ),
    N(
        "git-unrelated-histories",
        "vcs",
        "merging an unrelated repository",
        "git merge other/main",
        setup=[
            *GIT_INIT,
            "git init -q ../other-$(basename $PWD)",
            "cd ../other-$(basename $PWD) && echo y > y.txt && git add y.txt && git commit -q -m y",
            "git remote add other ../other-$(basename $PWD)",
            "git fetch -q other",
        ],
        fam="git",
    ),
    N(
        "git-tag-exists",
        "git error",
        "tagging a release twice",
        "git tag v1.0",
        setup=[*GIT_INIT, "git tag v1.0"],
        fam="git",
    ),
    N(
        "git-clone-exists",
        "vcs",
        "cloning into a non-empty directory",
        "git clone -q ../src-$(basename $PWD) app",
        setup=["git init -q ../src-$(basename $PWD)", "mkdir app && touch app/x"],
        fam="git",
    ),
    N(
        "bash-bad-subst",
        "shell",
        "string replacement with a typo",
        "bash -c 'name=abc; echo ${name.upper}'",
        fam="gen",
        key=r"bad substitution",
    ),
    N(
        "bash-integer-expected",
        "",
        "numeric test on a word",
        "bash -c 'count=abc; [ \"$count\" -gt 3 ] && echo big'",
        key=r"integer expression expected",
    ),
    N(
        "bash-ambiguous-redirect",
        "shell",
        "redirecting to an empty variable",
        "bash -c 'out=; echo hi > $out'",
        key=r"ambiguous redirect",
    ),
    N(
        "bash-bad-interpreter",
        "shell",
        "script with a wrong shebang",
        "./run.sh",
        files={"run.sh": ("#!/usr/bin/bash3\necho hi\n", 0o755)},
        key=r"bad interpreter|cannot execute",
    ),
    N(
        "make-recursive-var",
        "make",
        "CFLAGS that refers to itself",
        "make",
        files={"Makefile": "CFLAGS = $(CFLAGS) -O2\n\nall:\n\t@echo $(CFLAGS)\n"},
        fam="make",
    ),
    N(
        "make-unterminated-ref",
        "build",
        "unterminated variable reference in a Makefile",
        "make",
        files={"Makefile": "OUT = $(BUILD_DIR\n\nall:\n\t@echo $(OUT)\n"},
        fam="make",
    ),
    N(
        "perl-call-method-undef",
        "perl error",
        "calling a method on an undefined object",
        "perl app.pl",
        files={"app.pl": "use strict;\nmy $db;\n$db->connect();\n"},
    ),
    N(
        "perl-not-array-ref",
        "",
        "dereferencing a hash ref as an array",
        "perl refs.pl",
        files={"refs.pl": 'use strict;\nmy $h = {a => 1};\nprint scalar(@$h), "\\n";\n'},
    ),
    N(
        "sqlite-no-column",
        "database",
        "selecting a column that was renamed",
        "sqlite3 app.db 'create table users(id int, name text); select email from users;'",
        key=r"no such column",
    ),
    N(
        "sqlite-syntax",
        "sqlite error",
        "typo in a SELECT keyword",
        "sqlite3 app.db 'selct * from t;'",
        key=r"syntax error",
    ),
    N(
        "sqlite-table-exists",
        "database",
        "running the schema twice",
        "sqlite3 -bail app.db < schema.sql",
        files={"schema.sql": "create table logs(id int);\ncreate table logs(id int);\n"},
        key=r"already exists",
    ),
    N(
        "pg-column-missing",
        "postgres error",
        "querying a column that does not exist",
        "psql -X -q -v ON_ERROR_STOP=1 -d store -f q.sql",
        files={"q.sql": "CREATE TABLE items (id int);\nSELECT price FROM items;\n"},
        fam="pg",
        setup=["createdb store"],
        pgdb="store",
    ),
    N(
        "pg-syntax",
        "database",
        "typo in a statement",
        "psql -X -q -v ON_ERROR_STOP=1 -d webapp -f q.sql",
        files={"q.sql": "SELEC 1;\n"},
        fam="pg",
        setup=["createdb webapp"],
        pgdb="webapp",
    ),
    N(
        "pg-not-null",
        "",
        "insert missing a NOT NULL column",
        "psql -X -q -v ON_ERROR_STOP=1 -d contacts -f q.sql",
        files={"q.sql": "CREATE TABLE people (id int, name text NOT NULL);\nINSERT INTO people (id) VALUES (1);\n"},
        fam="pg",
        setup=["createdb contacts"],
        pgdb="contacts",
    ),
    N(
        "jq-not-defined",
        "jq",
        "calling an undefined jq function",
        "jq 'lenght' data.json",
        files={"data.json": "[1, 2]\n"},
        key=r"^jq: error",
    ),
    N(
        "pip-invalid-req",
        "pip",
        "pip install with a malformed version specifier",
        "pip install 'requests=>2.0'",
        key=r"^ERROR",
    ),
    N(
        "pip-not-installable",
        "dependency",
        "pip install . in a folder without a project",
        "pip install .",
        key=r"^ERROR",
        proj="notes",
    ),
    N(
        "cmake-min-version",
        "cmake",
        "project needing a newer CMake",
        "cmake -P req.cmake",
        files={"req.cmake": "cmake_minimum_required(VERSION 9.0)\n"},
        key=r"CMake Error",
    ),
    N(
        "curl-refused",
        "network",
        "calling a local API that is not running",
        "curl -sS http://127.0.0.1:9/health",
        key=r"^curl:",
    ),
]


# =============================================================================================== distractors
# One real occurrence each, raw style, of kinds that neither the classes nor the negatives cover.
PY_DISTRACTORS = r"""
chr(-1)
ord("ab")
int("10", 1)
range(1, 5, 0)
[1, 2].index(5)
"abc".index("x")
[].pop()
[1].remove(3)
import math; math.factorial(-1)
import math; math.factorial(2.5)
bytes([256])
bytes.fromhex("zz")
divmod("a", 1)
round("x")
sum([], "")
max([])
min()
next([1])
list(zip([1], [1, 2], strict=True))
int(None)
float([])
complex("1+")
object.__new__(int)
isinstance(1, "int")
issubclass(1, int)
super()
open("x.txt", "rw")
open("x.txt", "w", buffering=0)
"abc".split("")
"{}".format()
"%d" % "x"
"%s %s" % ("a",)
"%s" % ("a", "b")
format(1, "z")
"-".join(5)
dict([1, 2])
dict([(1,)])
t = (1,); t[0] = 2
del "abc"[0]
memoryview("x")
bytearray("x")
int.from_bytes("ab", "big")
(1).to_bytes(1, "middle")
import struct; struct.pack("i", "x")
import struct; struct.unpack("i", b"12")
import struct; struct.pack("q?", 1)
import struct; struct.calcsize("y")
import array; array.array("z")
import base64; base64.b64decode("abc")
import binascii; binascii.unhexlify("abc")
import base64; base64.b32decode("AAAAAAA1")
import datetime; datetime.date(2021, 2, 30)
import datetime; datetime.time(25)
import datetime; datetime.datetime.fromisoformat("2020-13")
import datetime; datetime.date.today() - 1
import datetime; datetime.datetime.now() < datetime.date.today()
import datetime; datetime.datetime.now() - datetime.datetime.now(datetime.timezone.utc)
import time; time.strftime("%Y", "x")
import time; time.sleep(-1)
import calendar; calendar.monthrange(2020, 13)
import decimal; decimal.Decimal("abc")
import fractions; fractions.Fraction("x")
import statistics; statistics.mean([])
import statistics; statistics.stdev([1])
import random; random.choice([])
import random; random.randint(5, 1)
import random; random.sample([1], 2)
import itertools; itertools.islice([], -1)
import functools; functools.reduce(lambda a, b: a, [])
import collections; collections.namedtuple("P", "x x")
import collections; collections.namedtuple("P", "def")
import collections; collections.deque(maxlen=-1)
import enum; Color = enum.Enum("Color", "RED"); Color(5)
import re; re.compile("[a-")
import re; re.compile("*a")
import re; re.compile("(?P<n>a)(?P<n>b)")
import re; re.sub("a", r"\1", "a")
import re; re.compile(r"\p")
import re; re.compile("a{2,1}")
import re; re.compile("(?<=a+)b")
import ipaddress; ipaddress.ip_address("999.1.1.1")
import ipaddress; ipaddress.ip_network("10.0.0.1/24")
import ipaddress; ipaddress.IPv4Network("10.0.0.0/33")
import uuid; uuid.UUID("xyz")
import urllib.parse; urllib.parse.urlsplit("http://[::1")
import urllib.request; urllib.request.urlopen("foo")
import http.client; http.client.HTTPConnection("h:x")
import socket; socket.socket().connect(("127.0.0.1", 9))
import socket; socket.getservbyname("nosuchsvc")
import socket; socket.inet_aton("x")
import os; os.rmdir(".")
import os; os.makedirs("d/e"); open("d/e/f", "w").close(); os.rmdir("d/e")
import os; os.kill(999999, 0)
import os; os.waitpid(-1, 0)
import os; os.read(99, 1)
import os; os.environ["X"] = 1
import os; os.path.join("a", 1)
import os; os.fspath(1)
import shutil; shutil.make_archive("x", "rar")
import pathlib; pathlib.Path("a").relative_to("b")
import pathlib; pathlib.Path("").with_suffix(".x")
import pathlib; pathlib.Path("a").with_suffix("x")
import zipfile; open("n.zip", "w").write("x"); zipfile.ZipFile("n.zip")
import gzip; gzip.decompress(b"abc")
import zlib; zlib.decompress(b"abc")
import bz2; bz2.decompress(b"abc")
import lzma; lzma.decompress(b"abc")
import csv; list(csv.reader(['"a"b'], strict=True))
import csv, sys; csv.writer(sys.stdout, delimiter="")
import csv, sys; csv.DictWriter(sys.stdout, ["a"]).writerow({"a": 1, "z": 2})
import configparser; c = configparser.ConfigParser(); c.read_string("[a]\nx=1\n[a]\n")
import configparser; configparser.ConfigParser().get("x", "y")
import configparser; c = configparser.ConfigParser(); c.read_string("[a]\nx=1\n"); c.get("a", "y")
import configparser; c = configparser.ConfigParser(); c.read_string("[a]\nx=%(missing)s\n"); c.get("a", "x")
import argparse; p = argparse.ArgumentParser(prog="tool"); p.parse_args(["--x"])
import argparse; p = argparse.ArgumentParser(prog="tool"); p.add_argument("path"); p.parse_args([])
import argparse; p = argparse.ArgumentParser(prog="tool"); p.add_argument("mode", choices=["a", "b"]); p.parse_args(["x"])
import argparse; p = argparse.ArgumentParser(prog="tool"); p.add_argument("--n", type=int); p.parse_args(["--n", "x"])
import argparse; p = argparse.ArgumentParser(); p.add_argument("-x"); p.add_argument("-x")
import shlex; shlex.split('"abc')
import textwrap; textwrap.wrap("x", width=0)
import string; string.Template("$").substitute()
import locale; locale.setlocale(locale.LC_ALL, "xx_XX")
import sqlite3; sqlite3.connect(":memory:").execute("select ?", (1, 2))
import sqlite3; c = sqlite3.connect(":memory:"); c.close(); c.execute("select 1")
import sqlite3; sqlite3.connect("/nonexistent/dir/x.db")
import hashlib; hashlib.new("md6")
import hashlib; hashlib.sha256("x")
import hmac; hmac.new("k", b"m", "sha256")
import os; os.urandom(-1)
import ssl; ssl.create_default_context(cafile="/etc/hostname")
import ssl; ssl.SSLContext(99)
import xml.etree.ElementTree as ET; ET.fromstring("<a>")
import xml.etree.ElementTree as ET; ET.fromstring("<a></b>")
import xml.dom.minidom; xml.dom.minidom.parseString("<a")
import plistlib; plistlib.loads(b"x")
import tomllib; tomllib.loads("a = ")
import tomllib; tomllib.loads("a = 1\na = 2")
import wave; open("x.wav", "w").write("x"); wave.open("x.wav")
import marshal; marshal.loads(b"x")
import threading; threading.Lock().release()
import threading; t = threading.Thread(target=print); t.start(); t.start()
import queue; queue.Queue().get_nowait()
import asyncio; asyncio.run(1)
import operator; operator.itemgetter()
-"a"
[] * []
2 ** "x"
pow(2, 3, 0)
pow(2, -1, 4)
pow(2.0, 3, 5)
import math; math.comb(-1, 2)
import math; math.isqrt(-1)
[1, 2][::0]
"abc"[1.5]
[1][None]
map()
filter(1, 2, 3)
property(1, 2, 3, 4, 5)
abs("x")
vars(1)
dir(1, 2)
"{:%Y}".format(1)
"{!x}".format(1)
"{".format()
"}".format()
"%z" % 1
"abc".startswith(1)
"abc".replace(1, 2)
str.maketrans("ab", "c")
m = memoryview(b"x"); m[0] = 1
bytearray(b"a").extend(1)
float.fromhex("x")
complex(1, "x")
import datetime; datetime.datetime.strptime("2020", "%Q")
import datetime; datetime.datetime(2020, 1, 1).strftime(1)
import zoneinfo; zoneinfo.ZoneInfo("Mars/Base")
import termios; termios.tcgetattr(0)
import ctypes; ctypes.CDLL("libnope.so")
import weakref; weakref.ref(1)
import inspect; inspect.getsource(len)
import types; types.SimpleNamespace(1)
with 1: pass
raise 5
raise ValueError("x") from 5
import urllib.parse; urllib.parse.quote(1)
import urllib.parse; urllib.parse.urlencode("x")
import http.cookies; c = http.cookies.SimpleCookie(); c["a b"] = 1
import unicodedata; unicodedata.name("\x00")
import unicodedata; unicodedata.normalize("NFX", "a")
import codecs; codecs.lookup_error("nope")
import io; io.StringIO(1)
import io; io.StringIO().fileno()
f = open("w.txt", "w"); f.read()
import sys; sys.stdout.write(1)
print("a", sep=1)
input()
import decimal; decimal.getcontext().prec = 0
import statistics; statistics.harmonic_mean([-1])
import statistics; statistics.mode([])
import bisect; bisect.bisect([], 1, lo=-1)
import heapq; heapq.heappush(1, 2)
import array; array.array("i").frombytes(b"123")
import itertools; itertools.product([1], repeat=-1)
import itertools; itertools.combinations([1], -1)
import functools; functools.partial(1)
import functools; functools.lru_cache(maxsize="x")
import functools; functools.total_ordering(type("C", (), {}))
import operator; operator.attrgetter(1)
import graphlib; list(graphlib.TopologicalSorter({"a": ["b"], "b": ["a"]}).static_order())
import textwrap; textwrap.dedent(1)
import re; re.match(1, "x")
import re; re.fullmatch("(a)", "a").group(2)
import random; random.seed([1])
import random; random.choices([1], weights=[1, 2])
import uuid; uuid.UUID(int=-1)
import ipaddress; ipaddress.ip_interface("x")
import ipaddress; ipaddress.IPv4Address(2**33)
import shutil; open("x", "w").close(); shutil.chown("x", user="nosuchuser")
import os; os.execv("/bin/true", [])
import os; os.popen("true", "z")
import os; os.utime("x", times=1)
import os; os.mkdir("d"); os.rename("d", "d/sub")
import zipfile; zipfile.ZipFile("x.zip", "q")
import subprocess; subprocess.run("exit 3", shell=True, check=True)
import subprocess; subprocess.run(["true"], capture_output=True, stdout=1)
import logging; logging.basicConfig(level="LOUD")
import logging.config; logging.config.dictConfig({})
import importlib; importlib.import_module(".x")
__import__("")
exec("x", 5)
compile("x", "f", "bad")
await x
yield 1
nonlocal x
break
continue
f(x=1, x=2)
def f(a=1, b): pass
f(a=1, 2)
x = = 1
1 = x
f() = 1
del f()
(1, 2
(1, 2]
x = 0777
x = 1__0
x = 1 if True
f"{}"
f"{x!z}"
x = b"café"
async with x: pass
*a = 1
a, *b, *c = [1, 2, 3]
def f(*,): pass
from __future__ import braces
from __future__ import nope
True = 1
def f(x, x): pass
{**x for x in y}
[*x for x in y]
import typing; typing.List[int]()
isinstance([], list[int])
raise ExceptionGroup("x", [1])
==MULTI==
class P:
    def __init__(self): return 1
P()
--
class C(int, str): pass
--
class B: pass
class C(B, B): pass
--
class A: pass
class B: pass
class X(A, B): pass
class Y(B, A): pass
class Z(X, Y): pass
--
import abc
class Shape(abc.ABC):
    @abc.abstractmethod
    def area(self): ...
Shape()
--
import dataclasses
@dataclasses.dataclass
class D:
    a: int = 1
    b: int
--
import dataclasses
@dataclasses.dataclass
class D:
    x: list = []
--
import dataclasses
@dataclasses.dataclass(frozen=True)
class D:
    x: int
D(1).x = 2
--
class C:
    @property
    def x(self): return 1
C().x = 2
--
import typing
class N(typing.NamedTuple):
    x: int = 0
    y: int
--
import enum
class E(enum.Enum):
    A = 1
    A = 2
--
import enum
@enum.unique
class E(enum.Enum):
    A = 1
    B = 1
--
def g():
    yield 1
g().send(5)
--
try:
    raise ValueError
except 5:
    pass
--
def f():
    from os import *
--
def f():
    print(x)
    global x
"""

# Other tools: (tool, command, files)
T_DISTRACTORS: list[tuple] = [  # (tool, command, files[, key regex])
    ("gcc", "gcc -c r.c", {"r.c": "int f(void) { int x = 1; int x = 2; return x; }\n"}),
    (
        "gcc",
        "gcc -c m.c",
        {"m.c": "int mul(int a, int b) { return a * b; }\nint main(void) { return mul(1, 2, 3); }\n"},
    ),
    ("gcc", "gcc -c s.c", {"s.c": "struct s { int a; };\nint f(void) { int x; struct s v = {1}; x = v; return x; }\n"}),
    ("gcc", "gcc -c sub.c", {"sub.c": "int f(int x) { return x[0]; }\n"}),
    ("gcc", "gcc -c op.c", {"op.c": "struct p { int a; };\nint f(struct p v) { return v + 1; }\n"}),
    ("gcc", "gcc -c br.c", {"br.c": "int f(void) { break; return 0; }\n"}),
    ("gcc", "gcc -c case.c", {"case.c": "int f(int x) { case 1: return x; }\n"}),
    (
        "gcc",
        "gcc -c dup.c",
        {"dup.c": "int f(int x) { switch (x) { case 1: return 1; case 1: return 2; } return 0; }\n"},
    ),
    ("gcc", "gcc -c v.c", {"v.c": "void g(void);\nint f(void) { int x = g(); return x; }\n"}),
    ("gcc", "gcc -c st.c", {"st.c": "struct node;\nint f(void) { struct node n; return 0; }\n"}),
    ("gcc", "gcc -c ptr.c", {"ptr.c": "struct node;\nint f(struct node *n) { return n->value; }\n"}),
    ("gcc", "gcc -c ex.c", {"ex.c": "int f(int a) { return g(a, ); }\n"}),
    ("gcc", "gcc -c u.c", {"u.c": "uint32_t crc(void) { return 0; }\n"}),
    ("gcc", "gcc -c k.c", {"k.c": "int x;\nvoid x(void) {}\n"}),
    ("gcc", "gcc -c l.c", {"l.c": "int f(void) { goto end; return 0; }\n"}),
    ("gcc", "gcc -c e.c", {"e.c": '#ifndef __APPLE__\n#error "unsupported platform"\n#endif\n'}),
    ("gcc", "gcc -c i.c", {"i.c": "#if 1\nint x;\n"}),
    ("gcc", "gcc -c q.c", {"q.c": 'const char *s = "abc;\n'}),
    ("gcc", "gcc -c n.c", {"n.c": "int x = 12abc;\n"}),
    ("gcc", "gcc -c arr.c", {"arr.c": "int f(void) { int a[3]; int b[3]; a = b; return 0; }\n"}),
    ("gcc", "gcc -Werror=return-type -c ret.c", {"ret.c": "int f(int x) { if (x) return 1; }\n"}),
    ("gcc", "gcc -Wall -Werror -c unused.c", {"unused.c": "int f(void) { int tmp; return 0; }\n"}),
    ("gcc", "gcc -Wall -Werror -c fmt.c", {"fmt.c": '#include <stdio.h>\nvoid f(char *s) { printf("%d\\n", s); }\n'}),
    ("gcc", "gcc -c mem.c", {"mem.c": "int f(int x) { return x.field; }\n"}),
    ("gcc", "gcc -c brace.c", {"brace.c": "int a;\n{ int b; }\n"}),
    ("gcc", "gcc -c stray.c", {"stray.c": "int f(void) { return 1 @ 2; }\n"}),
    ("gcc", "gcc -c neg.c", {"neg.c": "int a[-1];\n"}),
    ("gcc", "gcc -c glob.c", {"glob.c": "int a = 1;\nint b = a;\n"}),
    ("gcc", "gcc -c call.c", {"call.c": "int f(void) { int x = 3; return x(); }\n"}),
    ("gcc", "gcc -c init.c", {"init.c": "struct p { int a; };\nint f(void) { struct p v = 5; return v.a; }\n"}),
    ("g++", "g++ -c conv.cpp", {"conv.cpp": 'int f() { int x = "abc"; return x; }\n'}),
    (
        "g++",
        "g++ -c cq.cpp",
        {"cq.cpp": "struct C { int n = 0; void inc() { n++; } };\nvoid f(const C &c) { c.inc(); }\n"},
    ),
    ("g++", "g++ -c priv.cpp", {"priv.cpp": "class Foo { int x = 1; };\nint f() { Foo a; return a.x; }\n"}),
    (
        "g++",
        "g++ -c del.cpp",
        {"del.cpp": "#include <memory>\nvoid f() { std::unique_ptr<int> a(new int); auto b = a; }\n"},
    ),
    (
        "g++",
        "g++ -c out.cpp",
        {"out.cpp": "#include <iostream>\nstruct P { int x; };\nvoid f() { P p{1}; std::cout << p; }\n"},
    ),
    ("g++", "g++ -c redef.cpp", {"redef.cpp": "class Foo {};\nclass Foo {};\n"}),
    ("g++", "g++ -c auto.cpp", {"auto.cpp": "void f() { auto x; }\n"}),
    ("g++", "g++ -c ref.cpp", {"ref.cpp": "void g(int &r);\nvoid f() { g(5); }\n"}),
    ("g++", "g++ -c tmpl.cpp", {"tmpl.cpp": "#include <vector>\nstd::vector<int, int, int> v;\n"}),
    ("g++", "g++ -c sa.cpp", {"sa.cpp": 'static_assert(sizeof(int) == 2, "size mismatch");\n'}),
    ("g++", "g++ -c cst.cpp", {"cst.cpp": "void f() { const int x; }\n"}),
    ("g++", "g++ -c ro.cpp", {"ro.cpp": "void f() { const int x = 1; x = 2; }\n"}),
    ("g++", "g++ -c nonscalar.cpp", {"nonscalar.cpp": "#include <string>\nvoid f() { std::string s = 5.0; }\n"}),
    ("g++", "g++ -c narrow.cpp", {"narrow.cpp": "void f() { double d = 3.5; int x{d}; }\n"}),
    ("g++", "g++ -c thisp.cpp", {"thisp.cpp": "int f() { return this->x; }\n"}),
    ("g++", "g++ -c virt.cpp", {"virt.cpp": "struct A { void f(); };\nvirtual void A::f() {}\n"}),
    (
        "g++",
        "g++ -std=c++17 -c override.cpp",
        {"override.cpp": "struct A { virtual void f(); };\nstruct B : A { void g() override; };\n"},
    ),
    ("rustc", "rustc --edition 2021 --color never e0369.rs", {"e0369.rs": "struct P;\nfn main() { let _ = P + P; }\n"}),
    (
        "rustc",
        "rustc --edition 2021 --color never e0560.rs",
        {"e0560.rs": "struct User { name: String }\nfn main() { let _ = User { name: String::new(), age: 3 }; }\n"},
    ),
    (
        "rustc",
        "rustc --edition 2021 --color never e0609.rs",
        {
            "e0609.rs": 'struct User { name: String }\nfn main() { let u = User { name: String::new() }; println!("{}", u.email); }\n'
        },
    ),
    (
        "rustc",
        "rustc --edition 2021 --color never e0603.rs",
        {"e0603.rs": "mod db { fn connect() {} }\nfn main() { db::connect(); }\n"},
    ),
    (
        "rustc",
        "rustc --edition 2021 --color never e0433.rs",
        {"e0433.rs": "fn main() { let m = HashMap::<u8, u8>::new(); }\n"},
    ),
    (
        "rustc",
        "rustc --edition 2021 --color never e0423.rs",
        {"e0423.rs": "struct Config { a: u8 }\nfn main() { let c = Config; }\n"},
    ),
    ("rustc", "rustc --edition 2021 --color never e0614.rs", {"e0614.rs": "fn main() { let x = 5u32; let y = *x; }\n"}),
    (
        "rustc",
        "rustc --edition 2021 --color never e0600.rs",
        {"e0600.rs": "fn main() { let s = String::new(); let _ = !s; }\n"},
    ),
    ("rustc", "rustc --edition 2021 --color never e0618.rs", {"e0618.rs": "fn main() { let count = 3; count(); }\n"}),
    ("rustc", "rustc --edition 2021 --color never e0124.rs", {"e0124.rs": "struct S { a: u8, a: u8 }\nfn main() {}\n"}),
    (
        "rustc",
        "rustc --edition 2021 --color never e0428.rs",
        {"e0428.rs": "struct Item;\nstruct Item;\nfn main() {}\n"},
    ),
    (
        "rustc",
        "rustc --edition 2021 --color never e0046.rs",
        {"e0046.rs": "trait Draw { fn draw(&self); }\nstruct B;\nimpl Draw for B {}\nfn main() {}\n"},
    ),
    (
        "rustc",
        "rustc --edition 2021 --color never e0407.rs",
        {
            "e0407.rs": "trait T { fn a(&self); }\nstruct S;\nimpl T for S { fn a(&self) {} fn b(&self) {} }\nfn main() {}\n"
        },
    ),
    ("rustc", "rustc --edition 2021 --color never e0070.rs", {"e0070.rs": "fn main() { 1 = 2; }\n"}),
    (
        "rustc",
        "rustc --edition 2021 --color never e0608.rs",
        {"e0608.rs": "fn main() { let x = 5u8; let _ = x[0]; }\n"},
    ),
    (
        "rustc",
        "rustc --edition 2021 --color never e0106.rs",
        {"e0106.rs": "struct Parser { input: &str }\nfn main() {}\n"},
    ),
    (
        "rustc",
        "rustc --edition 2021 --color never e0015.rs",
        {"e0015.rs": "fn f() -> u8 { 1 }\nconst X: u8 = f();\nfn main() {}\n"},
    ),
    ("rustc", "rustc --edition 2021 --color never syn.rs", {"syn.rs": 'fn main() { let x = 5 println!("{}", x); }\n'}),
    (
        "rustc",
        "rustc --edition 2021 --color never e0117.rs",
        {
            "e0117.rs": "impl std::fmt::Display for Vec<u8> { fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result { Ok(()) } }\nfn main() {}\n"
        },
    ),
    ("rustc", "rustc --edition 2021 --color never e0658.rs", {"e0658.rs": "#![feature(never_type)]\nfn main() {}\n"}),
    ("cargo", "cargo frobnicate", {}),
    (
        "cargo",
        "cargo run --bin server",
        {
            "Cargo.toml": '[package]\nname = "app"\nversion = "0.1.0"\nedition = "2021"\n',
            "src/main.rs": "fn main() {}\n",
        },
    ),
    (
        "cargo",
        "cargo build --features tls",
        {
            "Cargo.toml": '[package]\nname = "app"\nversion = "0.1.0"\nedition = "2021"\n',
            "src/main.rs": "fn main() {}\n",
        },
    ),
    ("cargo", "cargo build --manifest-path crates/core/Cargo.toml", {}),
    ("javac", "javac Semi.java", {"Semi.java": "public class Semi {\n    int x = 1\n}\n"}),
    (
        "javac",
        "javac Static.java",
        {
            "Static.java": "public class Static {\n    void run() {}\n    public static void main(String[] a) { run(); }\n}\n"
        },
    ),
    (
        "javac",
        "javac Unreach.java",
        {"Unreach.java": "public class Unreach {\n    int f() { return 1; int y = 2; }\n}\n"},
    ),
    ("javac", "javac Dup.java", {"Dup.java": "public class Dup {\n    void f() { int a = 1; int a = 2; }\n}\n"}),
    ("javac", "javac Eof.java", {"Eof.java": "public class Eof {\n    void f() {\n"}),
    ("javac", "javac Else.java", {"Else.java": "public class Else {\n    void f() { else { } }\n}\n"}),
    (
        "javac",
        "javac Final.java",
        {"Final.java": "public class Final {\n    void f() { final int x = 1; x = 2; }\n}\n"},
    ),
    (
        "javac",
        "javac Over.java",
        {"Over.java": 'public class Over {\n    @Override public String toStrin() { return ""; }\n}\n'},
    ),
    (
        "javac",
        "javac Abs.java",
        {"Abs.java": "interface Shape { double area(); }\npublic class Abs implements Shape {}\n"},
    ),
    ("javac", "javac Deref.java", {"Deref.java": "public class Deref {\n    int f(int x) { return x.length(); }\n}\n"}),
    (
        "javac",
        "javac BadOp.java",
        {"BadOp.java": "public class BadOp {\n    boolean f(int a) { return a && true; }\n}\n"},
    ),
    ("javac", "javac Illegal.java", {"Illegal.java": "public class Illegal {\n    void f() { int x = ); }\n}\n"}),
    ("javac", "javac Unclosed.java", {"Unclosed.java": 'public class Unclosed {\n    String s = "abc;\n}\n'}),
    (
        "javac",
        "javac Never.java",
        {
            "Never.java": "public class Never {\n    void f() { try { int x = 1; } catch (java.io.IOException e) { } }\n}\n"
        },
    ),
    ("javac", "javac ArrReq.java", {"ArrReq.java": "public class ArrReq {\n    int f(int x) { return x[0]; }\n}\n"}),
    (
        "java",
        "java -cp out Neg",
        {
            "Neg.java": "public class Neg { public static void main(String[] a) { int n = -1 + a.length; int[] x = new int[n]; } }\n"
        },
    ),
    (
        "java",
        "java -cp out NoVal",
        {
            "NoVal.java": "import java.util.*;\npublic class NoVal { public static void main(String[] a) { Optional<String> o = Optional.empty(); o.get(); } }\n"
        },
    ),
    (
        "java",
        "java -cp out Iter",
        {
            "Iter.java": "import java.util.*;\npublic class Iter { public static void main(String[] a) { new ArrayList<String>().iterator().next(); } }\n"
        },
    ),
    (
        "java",
        "java -cp out Store",
        {
            "Store.java": "public class Store { public static void main(String[] a) { Object[] o = new String[1]; o[0] = 1; } }\n"
        },
    ),
    (
        "java",
        "java -cp out Cnf",
        {
            "Cnf.java": 'public class Cnf { public static void main(String[] a) throws Exception { Class.forName("com.mysql.Driver"); } }\n'
        },
    ),
    (
        "java",
        "java -cp out Pat",
        {
            "Pat.java": 'public class Pat { public static void main(String[] a) { java.util.regex.Pattern.compile("(abc"); } }\n'
        },
    ),
    (
        "java",
        "java -cp out Dt",
        {
            "Dt.java": 'public class Dt { public static void main(String[] a) { java.time.LocalDate.parse("2024-13-01"); } }\n'
        },
    ),
    (
        "java",
        "java -cp out Ill",
        {
            "Ill.java": 'public class Ill { public static void main(String[] a) { new java.text.SimpleDateFormat("yyyy-qq"); } }\n'
        },
    ),
    (
        "java",
        "java -cp out Fnf",
        {
            "Fnf.java": 'public class Fnf { public static void main(String[] a) throws Exception { new java.io.FileInputStream("app.properties"); } }\n'
        },
    ),
    (
        "java",
        "java -cp out Ise",
        {
            "Ise.java": "import java.util.*;\npublic class Ise { public static void main(String[] a) { Iterator<Integer> it = new ArrayList<>(List.of(1)).iterator(); it.remove(); } }\n"
        },
    ),
    (
        "java",
        "java -cp out Enm",
        {
            "Enm.java": 'public class Enm { enum Color { RED } public static void main(String[] a) { Color.valueOf("BLUE"); } }\n'
        },
    ),
    ("node", 'node -e "new Array(-1)"', {}),
    ("node", 'node -e "let a = 1; let a = 2;"', {}),
    ("node", 'node -e "(1.5).toFixed(200)"', {}),
    ("node", "node -e \"new Date('x').toISOString()\"", {}),
    ("node", 'node -e "[].reduce((a, b) => a + b)"', {}),
    ("node", "node -e \"'a'.repeat(-1)\"", {}),
    ("node", "node -e \"decodeURIComponent('%')\"", {}),
    ("node", 'node -e "Object.keys(null)"', {}),
    ("node", "node -e \"new RegExp('(')\"", {}),
    ("node", 'node -e "1n + 1"', {}),
    ("node", "node -e \"require('fs').readdirSync('/etc/hostname')\"", {}),
    ("node", "node -e \"require('fs').mkdirSync('/tmp')\"", {}),
    ("node", "node -e \"require('fs').readFileSync('/tmp')\"", {}),
    ("node", "node -e \"require('assert').strictEqual(1, 2)\"", {}),
    ("node", "node -e \"new URL('not a url')\"", {}),
    ("node", "node -e \"'use strict'; const o = Object.freeze({a: 1}); o.a = 2\"", {}),
    ("node", "node -e \"'use strict'; const o = Object.preventExtensions({}); o.b = 1\"", {}),
    ("node", 'node -e "Buffer.alloc(-1)"', {}),
    ("node", "node -e \"require('crypto').createHash('md9')\"", {}),
    ("node", "node -e \"Buffer.from('a').toString('utf9')\"", {}),
    ("node", "node -e \"Object.defineProperty(Object.freeze({}), 'x', {value: 1})\"", {}),
    ("node", 'node -e "console.log(foo(1)"', {}),
    ("node", "node -e \"throw new Error('config validation failed: port must be a number')\"", {}),
    ("node", "node -e \"Promise.reject(new Error('upstream unavailable'))\"", {}),
    ("node", "node -e \"require('net').connect(9, '127.0.0.1')\"", {}),
    ("node", "node -e \"require('child_process').spawnSync('x', {stdio: 'inherit', shell: 5})\"", {}),
    ("node", "node -e \"require('zlib').gunzipSync(Buffer.from('abc'))\"", {}),
    ("node", 'node -e "structuredClone(() => 1)"', {}),
    ("node", "node -e \"new Intl.NumberFormat('en', {style: 'currency'})\"", {}),
    ("node", "node -e \"require('util').promisify(5)\"", {}),
    ("npm", "npm frobnicate", {}, r"^Unknown command"),
    ("npm", "npm ls", {"package.json": '{"name": "a", "version": "1.0.0", "dependencies": {"lodash": "^4.17.0"}}\n'}),
    ("git", "git checkout -b 'bad..name'", {}),
    ("git", "git tag -d v9.9", {}),
    ("git", "git stash pop", {}),
    ("git", "git rebase --continue", {}),
    ("git", "git cherry-pick 0000000000000000000000000000000000000000", {}),
    ("git", "git branch -d main", {}),
    ("git", "git describe --tags", {}),
    ("git", "git revert HEAD~5", {}),
    ("git", "git commit -m 'nothing'", {}, r"nothing to commit"),
    ("git", "git config --get user.signingkey", {}),
    ("git", "git remote add origin x && git remote rename origin origin", {}),
    ("git", "git pull", {}),
    ("git", "git merge --abort", {}),
    ("git", "git submodule update --init lib/x", {}),
    ("git", "git worktree add ../wt main", {}),
    ("git", "git apply fix.patch", {"fix.patch": "not a patch\n"}),
    ("git", "git bisect good", {}),
    ("git", "git show HEAD:nope.txt", {}),
    ("git", "git fsck --foo", {}),
    ("bash", "bash -c 'x=(1 2); echo $(( x[1] + ))'", {}),
    ("bash", "bash -c 'echo $(( 08 + 1 ))'", {}),
    ("bash", "bash -c '[ 1 = 1'", {}),
    ("bash", "bash -c 'trap \"echo\" NOSIG'", {}),
    ("bash", "bash -c 'local x=1'", {}),
    ("bash", "bash -c 'shift 5'", {}),
    ("bash", "bash -c 'exit abc'", {}),
    ("bash", "bash -c 'printf \"%d\\n\" abc'", {}),
    ("bash", "bash -c 'cd a b'", {}),
    ("bash", "bash -c 'kill -9 999999'", {}),
    ("bash", "bash -c 'wait 999999'", {}),
    ("bash", "bash -c 'echo hi > /dev/full'", {}),
    ("bash", "bash -c 'source ./env.sh'", {}),
    ("bash", "bash -c 'declare -Z x'", {}),
    ("bash", "bash -c 'cd -'", {}),
    ("bash", "bash -c 'ulimit -n abc'", {}),
    ("bash", "bash -c 'f() { return abc; }; f'", {}),
    ("dash", "sh -c 'if true; then echo a; fi; fi'", {}),
    ("dash", "sh -c 'echo ${x:?DATABASE_URL must be set}'", {}),
    ("coreutils", "mkdir build && mkdir build", {}),
    ("coreutils", "mkdir d && rm d", {}),
    ("coreutils", "mkdir -p d/e && rmdir d", {}),
    ("coreutils", "mkdir d && cp d e", {}),
    ("coreutils", "touch a b && ln -s a b", {}),
    ("coreutils", "touch f && chmod abc f", {}),
    ("coreutils", "date -d 'next blursday'", {}),
    ("coreutils", "head -n x /etc/hostname", {}),
    ("coreutils", "cut /etc/hostname", {}),
    ("coreutils", "echo abc | sed 's/a/b'", {}),
    ("coreutils", "echo abc | grep '[a'", {}),
    ("coreutils", "find . -nme '*.py'", {}),
    ("coreutils", "echo abc | tr a b c", {}),
    ("coreutils", "seq 1 x", {}),
    ("coreutils", "touch missing/dir/file", {}),
    ("coreutils", "touch f && chown nobodyx f", {}),
    ("coreutils", "sleep abc", {}),
    ("coreutils", "cat /etc", {}),
    ("coreutils", "mkdir d && mv d d/sub", {}),
    ("coreutils", "dd if=/dev/zero of=/dev/null bs=xyz count=1", {}),
    ("coreutils", "echo x > a.gz && gzip -d a.gz", {}),
    ("coreutils", "echo '!!!' | base64 -d", {}),
    ("coreutils", "echo 'x  f' > sums && sha256sum -c sums", {}),
    ("coreutils", "echo abc | iconv -f NOPE -t UTF-8", {}),
    ("coreutils", "split -l x /etc/hostname", {}),
    ("coreutils", "sort -k x /etc/hostname", {}),
    ("coreutils", "ls --sort=size2", {}),
    ("coreutils", "ln -s /etc/hostname x && ln -s /etc/hostname x", {}),
    ("coreutils", "env NOPE_CMD_X", {}),
    ("coreutils", "echo 'x' | patch -p1", {}),
    ("coreutils", "numfmt --from=si 12Q", {}),
    ("coreutils", "expr 1 + a", {}),
    ("coreutils", "stat --format", {}),
    ("sqlite3", "sqlite3 app.db 'create table t(a); create table t(a);'", {}),
    ("sqlite3", "sqlite3 app.db 'select nosuchfn(1);'", {}),
    (
        "sqlite3",
        "sqlite3 app.db 'pragma foreign_keys=on; create table p(id integer primary key); create table c(pid int references p(id)); insert into c values (5);'",
        {},
    ),
    ("sqlite3", "sqlite3 app.db 'create table t(a, b); insert into t values (1, 2, 3);'", {}),
    ("sqlite3", "sqlite3 app.db 'create table t(a check (a > 0)); insert into t values (-1);'", {}),
    ("sqlite3", "sqlite3 app.db 'create table a(id); create table b(id); select id from a, b;'", {}),
    ("sqlite3", "sqlite3 app.db 'create table t(a); select a from t where count(*) > 1;'", {}),
    ("sqlite3", "sqlite3 app.db '.import nothere.csv t'", {}),
    ("sqlite3", "sqlite3 app.db 'create table t(id integer primary key); insert into t values (\"abc\");'", {}),
    ("sqlite3", "sqlite3 app.db 'create table t(a); select * from t order by 2;'", {}),
    ("sqlite3", "sqlite3 app.db 'create table t(a, b); select * from t where a in (select a, b from t);'", {}),
    ("sqlite3", "sqlite3 app.db 'begin; begin;'", {}),
    ("sqlite3", "sqlite3 app.db 'commit;'", {}),
    ("sqlite3", "sqlite3 app.db 'create table t(a);' && sqlite3 -readonly app.db 'insert into t values (1);'", {}),
    ("sqlite3", "sqlite3 app.db 'detach database nope;'", {}),
    ("sqlite3", "sqlite3 app.db 'drop index idx_missing;'", {}),
    ("sqlite3", "sqlite3 app.db 'create table t(a); create view v as select a from t; insert into v values (1);'", {}),
    ("sqlite3", "sqlite3 app.db 'select (1, 2);'", {}),
    ("sqlite3", "sqlite3 app.db 'select * from (select 1'", {}),
    ("psql", "psql -X -d nosuchdb -c 'select 1'", {}),
    ("psql", "psql -X -U nosuchrole -d postgres -c 'select 1'", {}),
    ("psql", "psql -X -v ON_ERROR_STOP=1 -d postgres -c 'select nosuch_fn(1)'", {}),
    ("psql", "psql -X -v ON_ERROR_STOP=1 -d postgres -c 'select 1 = $$a$$::text'", {}),
    ("psql", "psql -X -v ON_ERROR_STOP=1 -d postgres -c 'select 2147483647::int + 1'", {}),
    (
        "psql",
        "psql -X -v ON_ERROR_STOP=1 -d postgres -c 'select x, count(*) from (values (1, 2)) v(x, y) group by y'",
        {},
    ),
    ("psql", "psql -X -v ON_ERROR_STOP=1 -d postgres -c 'select * from (values (1)) v(x) where count(*) > 1'", {}),
    (
        "psql",
        "psql -X -v ON_ERROR_STOP=1 -d postgres -c 'select $$abc$$::varchar(2)::char(1), $$toolong$$::varchar(3) || 1::text, cast($$abcd$$ as varchar(2))' -c 'create temp table t(c varchar(3)); insert into t values ($$abcdef$$)'",
        {},
    ),
    ("psql", "psql -X -v ON_ERROR_STOP=1 -d postgres -c 'select * from nosuchschema.t'", {}),
    ("psql", "psql -X -v ON_ERROR_STOP=1 -d postgres -c 'create temp table t(a nosuchtype)'", {}),
    ("psql", "psql -X -v ON_ERROR_STOP=1 -d postgres -c \"copy pg_class from '/nonexistent.csv'\"", {}),
    (
        "psql",
        "psql -X -v ON_ERROR_STOP=1 -d postgres -c 'create temp table a(id int primary key); create temp table b(aid int references a(id)); insert into b values (1)'",
        {},
    ),
    (
        "psql",
        "psql -X -v ON_ERROR_STOP=1 -d postgres -c 'create temp table t(n int check (n > 0)); insert into t values (0)'",
        {},
    ),
    ("psql", "psql -X -v ON_ERROR_STOP=1 -d postgres -c 'select true::date'", {}),
    ("psql", "psql -X -v ON_ERROR_STOP=1 -d postgres -c 'select \"\"'", {}),
    ("psql", "psql -X -v ON_ERROR_STOP=1 -d postgres -c 'select x from (values (1)) a(x), (values (2)) b(x)'", {}),
    (
        "psql",
        "psql -X -v ON_ERROR_STOP=1 -d postgres -c 'create temp table t(a int); alter table t add column a int'",
        {},
    ),
    ("jq", "echo '[1, 2]' | jq 'keys | .[0] | has(\"x\")'", {}),
    ("jq", "echo '{\"a\": \"x\"}' | jq '.a + 1'", {}),
    ("jq", "echo 'null' | jq 'keys'", {}),
    ("jq", "echo 'true' | jq 'length'", {}),
    ("jq", "echo '1' | jq 'test(\"a\")'", {}),
    ("jq", "echo '{}' | jq 'error(\"schema version missing\")'", {}),
    ("jq", "echo '{}' | jq '.a |'", {}),
    ("jq", "jq . nothere.json", {}),
    ("jq", "echo '\"abc\"' | jq 'implode'", {}),
    ("tar", "tar czf empty.tgz", {}),
    ("tar", "tar xf", {}),
    ("tar", "echo x > plain.tar && tar xzf plain.tar", {}),
    ("tar", "tar cf out.tar missing-dir", {}),
    ("tar", "tar -c -x -f a.tar", {}),
    (
        "make",
        "make",
        {"Makefile": "VERSION ?=\nifeq ($(VERSION),)\n$(error VERSION is not set)\nendif\nall:\n\t@echo ok\n"},
    ),
    ("make", "make", {"Makefile": "ifeq (a,a)\nall:\n\t@echo ok\n"}),
    ("make", "make", {"Makefile": "all:\n\t@echo ok\nendif\n"}),
    ("make", "make", {"Makefile": "%.o foo.o: %.c\n\t@echo x\n"}),
    ("make", "make", {"Makefile": "a: b: c\n\t@echo x\n"}),
    ("make", "make --frobnicate", {}),
    ("make", "make", {"Makefile": "$(foreach)\nall:\n"}),
    ("perl", "perl obj.pl", {"obj.pl": "use strict;\nmy $o = Foo->new;\n"}),
    ("perl", "perl href.pl", {"href.pl": "use strict;\nmy $s = 'abc';\nprint $s->{key};\n"}),
    ("perl", "perl ro.pl", {"ro.pl": "for my $x (1, 2) { $x = 5 }\n"}),
    ("perl", "perl missing.pl", {}),
    ("perl", "perl code.pl", {"code.pl": "use strict;\nmy $c = 5;\n$c->();\n"}),
    ("perl", "perl undefarr.pl", {"undefarr.pl": "use strict;\nmy $r;\nmy @a = @{$r};\n"}),
    ("perl", "perl oct.pl", {"oct.pl": "my $x = 0778;\n"}),
    ("perl", "perl re.pl", {"re.pl": "my $s = 'a';\n$s =~ /(abc/;\n"}),
    ("perl", "perl term.pl", {"term.pl": 'print "abc;\n'}),
    ("perl", "perl die.pl", {"die.pl": "open(my $fh, '<', 'settings.ini') or die \"cannot open settings.ini: $!\";\n"}),
    ("perl", "perl const.pl", {"const.pl": "use strict;\n5 = my $x;\n"}),
    ("cmake", "cmake -P p.cmake", {"p.cmake": "set(A 1\n"}),
    ("cmake", "cmake -S nosuchdir -B build", {}),
    ("cmake", "cmake -P s.cmake", {"s.cmake": "add_executable(app main.c)\n"}),
    ("cmake", "cmake -P m.cmake", {"m.cmake": 'math(EXPR x "1 +")\n'}),
    ("cmake", "cmake -P st.cmake", {"st.cmake": "string(FROB x y)\n"}),
    ("cmake", "cmake -P l.cmake", {"l.cmake": "list(FROB x)\n"}),
    ("cmake", "cmake -P f.cmake", {"f.cmake": "file(READ nothere.txt x)\n"}),
    (
        "cmake",
        "cmake -P msg.cmake",
        {"msg.cmake": 'message(FATAL_ERROR "Toolchain file not set: pass -DCMAKE_TOOLCHAIN_FILE")\n'},
    ),
    ("cmake", "cmake -P nest.cmake", {"nest.cmake": "if(TRUE)\nendforeach()\n"}),
    ("cmake", "cmake -P gfc.cmake", {"gfc.cmake": "get_filename_component(x a.txt FROB)\n"}),
    ("openssl", "openssl frobnicate", {}),
    (
        "openssl",
        "echo secret > p.txt && openssl enc -aes-256-cbc -pbkdf2 -k right -in p.txt -out p.enc && openssl enc -d -aes-256-cbc -pbkdf2 -k wrong -in p.enc",
        {},
    ),
    ("openssl", "openssl genpkey -algorithm NOPE", {}),
    ("openssl", "openssl enc -aes-128-cbc -K zz -iv 00 -in /etc/hostname", {}),
    ("openssl", "openssl dgst -sha256 nothere.bin", {}),
    ("openssl", "openssl s_client -connect 127.0.0.1:9 -brief < /dev/null", {}),
    ("curl", "curl -sS file:///nonexistent/file.txt", {}),
    ("curl", "curl -sS htp://example.com", {}),
    ("curl", "curl -sS 'http://exa mple.com'", {}),
    ("curl", "curl -sS -T nothere.bin http://127.0.0.1:9/", {}),
    ("curl", "curl -sS --max-redirs abc http://127.0.0.1:9/", {}),
    ("mvn", "mvn -o -q -B -Dstyle.color=never validate", {}),
    ("ssh-keygen", "echo notakey > id_bad && ssh-keygen -y -f id_bad", {}),
    ("ssh-keygen", "echo notakey > k.pub && ssh-keygen -l -f k.pub", {}),
    ("pip", "pip instal requests", {}),
    ("pip", "pip install --no-such-option x", {}),
    (
        "pytest",
        "python3 -m pytest -q -p no:cacheprovider test_db.py",
        {"test_db.py": "def test_query(db):\n    assert db\n"},
        r"fixture '.*' not found",
    ),
    ("pytest", "python3 -m pytest -q -p no:cacheprovider --frobnicate", {}, r"error: unrecognized arguments"),
    ("mypy", "mypy --no-incremental --no-error-summary typed.py", {"typed.py": "count: int = 'three'\n"}),
    ("python", "python3 -m venv --frobnicate env", {}),
    ("python", "python3 -W error::NotAWarning -c pass", {}),
]


# =============================================================================================== assembling
# Kinds close enough to a class that they would make a negative/distractor label doubtful: never kept as such.
NEAR_CLASS = re.compile(
    r"too many values to unpack|was not declared in this scope|did not match any file|cannot find type|E0412|E0499"
    r"|E0716|Cannot find package|ERR_MODULE_NOT_FOUND|Cannot set properties of|Cannot destructure|package\.json"
    r"|unexpected end of file|can't open file|FileNotFoundError|No module named|Cannot read properties"
    r"|Permission denied|Cannot index|undefined reference|multiple definition"
    r"|no upstream|a branch named|ambiguous argument|unbound variable|unexpected token"
    r"|Unknown CMake command|Could not open file or uri|Not found in archive|Could not open requirements"
    r"|UNIQUE constraint|duplicate key|no such table|relation .* does not exist|Can't locate \S+\.pm"
    r"|Undefined subroutine|ClassCastException|NumberFormatException|incompatible types|cannot find symbol"
    r"|no matching function|expected ';' before|undeclared|E0425|E0597|E0599|E0502|Cargo\.toml`|\*\*\* \[.*\] Error"
    r"|can only concatenate|invalid literal for int|missing \d+ required|not enough values|unterminated string literal"
    r"|not subscriptable|NoneType' object has no attribute",
)
TOOL_TYPE = {
    "python": "runtime",
    "gcc": "build",
    "g++": "build",
    "rustc": "build",
    "cargo": "build",
    "javac": "build",
    "cmake": "build",
    "make": "build",
    "mvn": "build",
    "java": "runtime",
    "node": "runtime",
    "perl": "runtime",
    "git": "vcs",
    "bash": "shell",
    "dash": "shell",
    "coreutils": "shell",
    "sqlite3": "database",
    "psql": "database",
    "npm": "dependency",
    "pip": "dependency",
    "jq": "tool",
    "tar": "tool",
    "openssl": "tool",
    "curl": "network",
    "ssh-keygen": "tool",
    "pytest": "test",
    "mypy": "lint",
}
DISTRACTOR_TARGET = 300
DISTRACTOR_TOOL_CAP = 12
TOOL_FAM = {
    "python": "py",
    "gcc": "cc",
    "g++": "cc",
    "rustc": "rust",
    "cargo": "rust",
    "javac": "javac",
    "java": "java",
    "node": "node",
    "git": "git",
    "psql": "pg",
    "make": "make",
}


def signature(msg: str) -> str:
    """The kind of an error line: its words without file positions, quoted names, numbers and paths."""
    s = re.sub(r"^(\S+?:\d+(:\d+)?:\s*)+", "", msg.strip())
    s = re.sub(r"^(psql:\S+:\d+: |\S+\.(c|cpp|java|rs|py|pl|sh|js)(:\d+)*: )", "", s)
    s = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`']*'|`[^`]*`|‘[^’]*’", "Q", s)
    s = re.sub(r"(/[\w.\-]+)+/?", "P", s)
    s = re.sub(r"<stdin>|\b[\w-]+\.[A-Za-z]\w{0,5}\b", "F", s)
    s = re.sub(r"0x[0-9a-fA-F]+|\d+", "N", s)
    return re.sub(r"\s+", " ", s).strip().lower()


def py_key(out: str) -> str:
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(
            r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Warning|Iteration|Interrupt|Empty|BadZipFile"
            r"|BadGzipFile|Operation|Group)\b(:|$)",
            ln,
        ):
            rest = lines[lines.index(ln) + 1 :] if ln is not lines[-1] else []
            return " ".join([ln, *rest]) if rest and len(rest) <= 3 else ln
    return lines[-1] if lines else ""


def parse_py_distractors() -> list[str]:
    single, multi = PY_DISTRACTORS.strip("\n").split("==MULTI==\n")
    codes = [ln for ln in single.split("\n") if ln.strip()]
    codes += [block.strip("\n") + "\n" for block in multi.split("\n--\n") if block.strip()]
    return codes


def build_cases() -> list[dict]:
    cases = []
    for cl in CLASSES:
        for i, v in enumerate(cl["variants"]):
            cases.append(
                {
                    **v,
                    "id": f"{cl['name'].lower()}-{i}",
                    "key": cl["key"],
                    "fam": cl["fam"],
                    "mode": cl["mode"],
                    "kind": "class",
                    "cls": cl["name"],
                    "idx": i,
                }
            )
    for n in NEGATIVES:
        cases.append({**n, "id": f"neg-{n['id']}", "kind": "neg", "nid": n["id"]})
    for j, code in enumerate(parse_py_distractors()):
        if "\n" in code.strip():
            case = dict(files={"demo.py": code}, run="python3 demo.py")
        else:
            case = dict(files={}, run=f"python3 -c {shlex.quote(code)}")
        cases.append({**case, "id": f"dis-py-{j:03d}", "kind": "dis", "tool": "python", "fam": "py", "key": None})
    for j, (tool, run, files, *key) in enumerate(T_DISTRACTORS):
        if tool == "npm" and not key:
            key = [NPM_KEY]
        case = {
            "id": f"dis-{tool}-{j:03d}",
            "kind": "dis",
            "tool": tool,
            "run": run,
            "files": dict(files),
            "fam": TOOL_FAM.get(tool, "gen"),
            "key": key[0] if key else None,
            "timeout": 60,
        }
        if tool == "git":
            case["setup"] = list(GIT_INIT)
        if tool == "java":
            cls = run.split()[-1]
            case["setup"] = [f"javac -d out {cls}.java"]
        if tool == "psql":
            case["pgdb"] = "postgres"
        cases.append(case)
    return cases


def start_postgres() -> bool:
    try:
        PGDIR.mkdir()
        shutil.chown(PGDIR, "postgres")
        init = (
            f"{PGBIN}/initdb -D {PGDIR}/data -A trust -U postgres >/dev/null && "
            f"{PGBIN}/pg_ctl -D {PGDIR}/data -o '-k {PGDIR} -p {PGPORT} -c listen_addresses=' "
            f"-l {PGDIR}/log -w -t 30 start >/dev/null"
        )
        run = subprocess.run(["su", "postgres", "-c", init], capture_output=True, text=True, timeout=60)
        return run.returncode == 0
    except (OSError, LookupError, subprocess.SubprocessError) as exc:
        print(f"postgres unavailable: {exc}", file=sys.stderr)
        return False


def stop_postgres() -> None:
    subprocess.run(
        ["su", "postgres", "-c", f"{PGBIN}/pg_ctl -D {PGDIR}/data -m immediate stop"],
        capture_output=True,
        timeout=60,
        check=False,
    )


def finish(case: dict) -> dict:
    res = run_case(case)
    if res.get("ok") and case.get("fam") == "py" and case.get("key") is None:
        res["msg"] = py_key(res["out"])
    return res


def lesson(name, etype, msg, ctx, obs, verify):
    cmd_, expected, indicators = verify
    return {
        "name": name,
        "entityType": "lesson",
        "errorPattern": {"type": etype, "message": msg, "context": ctx},
        "observations": list(obs),
        "verificationSteps": [{"command": cmd_, "expectedOutput": expected, "successIndicators": list(indicators)}],
        "metadata": {"severity": "medium"},
    }


def main() -> int:
    setup_scratch()
    pg_ok = start_postgres()
    cases = [c for c in build_cases() if pg_ok or not c.get("pgdb")]
    try:
        with cf.ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(finish, cases))
    finally:
        if pg_ok:
            stop_postgres()
    failures = [r for r in results if not r.get("ok")]
    for r in failures:
        print(f"skip {r['id']}: {r['why']}", file=sys.stderr)
    ok = [r for r in results if r.get("ok")]
    for r in ok:
        if EXCLUDED.search(r["msg"]):
            print(f"drop {r['id']}: excluded kind: {r['msg']}", file=sys.stderr)
            r["ok"] = False
    ok = [r for r in ok if r["ok"]]

    lessons, queries = [], []
    class_sigs: set[str] = set()
    qn = 0
    for cl in CLASSES:
        occ = sorted((r for r in ok if r.get("cls") == cl["name"]), key=lambda r: r["idx"])
        if len(occ) < 4 or occ[0]["idx"] != 0:
            print(
                f"class {cl['name']} dropped: only {len(occ)} occurrences (variant 0 ok: {bool(occ) and occ[0]['idx'] == 0})",
                file=sys.stderr,
            )
            continue
        first = occ[0]
        class_sigs.update(signature(r["msg"]) for r in occ)
        lessons.append(lesson(cl["name"], cl["rtype"], first["msg"], first["ctx"], cl["obs"], cl["verify"]))
        lessons.append(lesson(cl["name"] + "__A", cl["A"][0], cl["A"][1], first["ctx"], cl["obs"], cl["verify"]))
        lessons.append(lesson(cl["name"] + "__B", cl["B"][0], cl["B"][1], cl["bctx"], cl["obs"], cl["verify"]))
        for r in occ[1:]:
            if r["msg"] == first["msg"]:
                print(f"query {r['id']} dropped: same message as the lesson", file=sys.stderr)
                continue
            qtype = (cl["rtype"], cl["qtype"], "")[qn % 3]
            qn += 1
            queries.append(
                {
                    "id": f"q-{r['id']}",
                    "expected": cl["name"],
                    "errorPattern": {"type": qtype, "message": r["msg"], "context": r["ctx"]},
                    "log": r["log"],
                }
            )
    class_keys = [re.compile(cl["key"]) for cl in CLASSES]

    def clashes(r) -> str:
        if any(k.search(r["msg"]) for k in class_keys):
            return "matches a class key"
        if NEAR_CLASS.search(r["msg"]):
            return "near a class kind"
        if signature(r["msg"]) in class_sigs:
            return "same signature as a class"
        return ""

    neg_sigs: set[str] = set()
    for r in (r for r in ok if r["kind"] == "neg"):
        why = clashes(r)
        if why or signature(r["msg"]) in neg_sigs:
            print(f"negative {r['id']} dropped: {why or 'duplicate kind'}: {r['msg']}", file=sys.stderr)
            continue
        neg_sigs.add(signature(r["msg"]))
        queries.append(
            {
                "id": r["id"],
                "expected": None,
                "errorPattern": {"type": r["qtype"], "message": r["msg"], "context": r["ctx"]},
                "log": r["log"],
            }
        )
    seen = set(neg_sigs)
    accepted = []
    for r in (r for r in ok if r["kind"] == "dis"):
        why = clashes(r)
        sig = signature(r["msg"])
        if why or sig in seen:
            print(f"distractor {r['id']} dropped: {why or 'duplicate kind'}: {r['msg']}", file=sys.stderr)
            continue
        seen.add(sig)
        accepted.append(r)
    # about DISTRACTOR_TARGET distractors: up to DISTRACTOR_TOOL_CAP per other tool, Python stdlib fills the rest,
    # taken evenly over the Python list so that all kinds of modules are represented
    others = [r for r in accepted if r["tool"] != "python"]
    pys = [r for r in accepted if r["tool"] == "python"]
    per_tool: dict[str, int] = {}
    chosen = []
    for r in others:
        if per_tool.get(r["tool"], 0) < DISTRACTOR_TOOL_CAP:
            per_tool[r["tool"]] = per_tool.get(r["tool"], 0) + 1
            chosen.append(r)
    room = max(0, DISTRACTOR_TARGET - len(chosen))
    if room >= len(pys):
        chosen += pys
    else:
        chosen += [pys[int(i * len(pys) / room)] for i in range(room)]
    order = {r["id"]: i for i, r in enumerate(accepted)}
    chosen.sort(key=lambda r: order[r["id"]])
    counters: dict[str, int] = {}
    for r in chosen:
        tool = r["tool"]
        counters[tool] = counters.get(tool, 0) + 1
        short = r["run"] if len(r["run"]) <= 90 else r["run"][:87] + "..."
        etype = TOOL_TYPE.get(tool, "tool")
        if tool == "python" and r["msg"].startswith("SyntaxError"):
            etype = "syntax"
        name = f"DIS_{tool.upper().replace('+', 'P').replace('-', '_')}_{counters[tool]:03d}"
        lessons.append(
            lesson(
                name,
                etype,
                r["msg"],
                f"running {tool}: {short}",
                [
                    f"Running `{short}` failed: {tool} rejected the input with this error.",
                    "Fix: correct the argument, file or statement that the message names, then run the command again.",
                ],
                (short, "completes without this error", ["exit code 0"]),
            )
        )
    print("distractors per tool: " + ", ".join(f"{t}={n}" for t, n in sorted(counters.items())))

    about = (
        "FITTING corpus harvested by bench/harvest_lessons.py: every message and log is real output of "
        "a tool run on this machine in a scratch folder (paths replaced by /home/user/<project>). Per error class "
        "three lessons (raw key line, __A assistant summary, __B generalized pattern) built from one occurrence, "
        "the other occurrences as queries; negatives (expected null) and DIS_ distractor lessons are other kinds. "
        "Evaluation kinds (errors-dev / negatives-dev) are excluded."
    )
    data = {"about": about, "lessons": lessons, "queries": queries}
    OUT.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")

    # checks
    data = json.loads(OUT.read_text(encoding="utf-8"))
    names = [lesson["name"] for lesson in data["lessons"]]
    assert len(names) == len(set(names)), "duplicate lesson names"
    qids = [q["id"] for q in data["queries"]]
    assert len(qids) == len(set(qids)), "duplicate query ids"
    assert all(q["expected"] is None or q["expected"] in set(names) for q in data["queries"]), "unknown expected"
    for item in data["lessons"] + data["queries"]:
        assert not EXCLUDED.search(item["errorPattern"]["message"]) or item.get("name", "").endswith(("__A", "__B"))
    n_cls = sum(1 for n in names if not n.startswith("DIS_") and "__" not in n)
    n_pos = sum(1 for q in data["queries"] if q["expected"])
    n_neg = sum(1 for q in data["queries"] if q["expected"] is None)
    n_dis = sum(1 for n in names if n.startswith("DIS_"))
    print(
        f"classes={n_cls} class_lessons={3 * n_cls} distractors={n_dis} lessons_total={len(names)} "
        f"positive_queries={n_pos} negative_queries={n_neg} failed_runs={len(failures)} -> {OUT}"
    )
    shutil.rmtree(SCRATCH, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
