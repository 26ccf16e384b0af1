"""Error classes the dev corpus does not have, written by hand: the matcher must generalize, not memorize.

Each query is the same error as its lesson in another project: other names, paths, numbers and wrappers.
Neighbour pairs differ only in the identifier that matters (a builtin or a reserved name, not a user's).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lessons.model import ErrorQuery, LessonInput
from lessons.service import LessonService
from memory_graph.app import services_for_folder

LESSONS_BY_NAME = {
    "PY_MODULE_NOT_FOUND": (
        "dependency",
        "ModuleNotFoundError: No module named 'requests'",
        ["The package is not installed in the interpreter that runs the code.", "Fix: pip install it in that venv."],
    ),
    "PY_NONE_SUBSCRIPT": (
        "runtime",
        "TypeError: 'NoneType' object is not subscriptable",
        ["A function returned None (NoneType) where a dict or list was expected.", "Fix: check for None."],
    ),
    "PY_INT_SUBSCRIPT": (
        "runtime",
        "TypeError: 'int' object is not subscriptable",
        ["An int was indexed like a list: a counter where a list was meant.", "Fix: keep the list."],
    ),
    "PY_NAME_TYPO": (
        "runtime",
        "NameError: name 'totl' is not defined",
        ["A misspelled variable or a name used before assignment.", "Fix: correct the spelling."],
    ),
    "PY2_UNICODE": (
        "runtime",
        "NameError: name 'unicode' is not defined",
        ["Python 2 code on Python 3: unicode is now str.", "Fix: use str, or six.text_type."],
    ),
    "TS_CANNOT_FIND_NAME": (
        "build",
        "src/app.ts(12,5): error TS2304: Cannot find name 'fetchUser'.",
        ["A missing import or declaration.", "Fix: import it or declare its type."],
    ),
    "TS_PROPERTY_MISSING": (
        "build",
        "src/app.ts(3,9): error TS2339: Property 'email' does not exist on type 'User'.",
        ["The type lacks the property.", "Fix: extend the interface or narrow the type."],
    ),
    "DOCKER_DAEMON": (
        "infra",
        "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
        ["The Docker engine is not running or the socket is not accessible.", "Fix: start dockerd."],
    ),
    "SSH_PUBLICKEY": (
        "vcs",
        "git@github.com: Permission denied (publickey).",
        ["No SSH key the server accepts.", "Fix: ssh-add the key, add it to the account."],
    ),
    "BASH_NOT_FOUND": (
        "shell",
        "bash: line 1: terraform: command not found",
        ["The program is not installed or not on PATH.", "Fix: install it or fix PATH."],
    ),
    "JAVA_CLASS_NOT_FOUND": (
        "runtime",
        'Exception in thread "main" java.lang.ClassNotFoundException: com.acme.Main',
        ["The class is not on the classpath.", "Fix: fix -cp or the jar manifest."],
    ),
    "PG_SOCKET": (
        "database",
        'psql: error: connection to server on socket "/var/run/postgresql/.s.PGSQL.5432" failed: '
        "No such file or directory",
        ["PostgreSQL is not running locally, or listens elsewhere.", "Fix: start it, or pass -h localhost."],
    ),
    "DISK_FULL": (
        "infra",
        "write /var/lib/docker/tmp/GetImageBlob123: no space left on device",
        ["The disk (or the Docker data root) is full.", "Fix: free space (docker system prune), grow it."],
    ),
}

QUERIES = [
    ("PY_MODULE_NOT_FOUND", "dependency", "ModuleNotFoundError: No module named 'yaml'"),
    ("PY_NONE_SUBSCRIPT", "runtime", "TypeError: 'NoneType' object is not subscriptable"),
    ("PY_INT_SUBSCRIPT", "runtime", "TypeError: 'int' object is not subscriptable"),
    ("PY_NAME_TYPO", "runtime", "NameError: name 'reponse' is not defined"),
    ("PY2_UNICODE", "runtime", "NameError: name 'unicode' is not defined"),
    ("TS_CANNOT_FIND_NAME", "build", "lib/server/index.ts(88,17): error TS2304: Cannot find name 'Request'."),
    ("TS_PROPERTY_MISSING", "build", "web/ui.tsx(140,22): error TS2339: Property 'id' does not exist on type 'Order'."),
    (
        "DOCKER_DAEMON",
        "infra",
        "docker: Cannot connect to the Docker daemon at unix:///run/user/1000/docker.sock. "
        "Is the docker daemon running?",
    ),
    ("SSH_PUBLICKEY", "vcs", "git@gitlab.example.com: Permission denied (publickey,keyboard-interactive)."),
    ("BASH_NOT_FOUND", "shell", "/bin/sh: 1: kubectl: command not found"),
    ("JAVA_CLASS_NOT_FOUND", "runtime", 'Exception in thread "main" java.lang.ClassNotFoundException: org.example.App'),
    (
        "PG_SOCKET",
        "database",
        'psql: error: connection to server on socket "/tmp/.s.PGSQL.5433" failed: No such file or directory',
    ),
    ("DISK_FULL", "infra", "write /srv/cache/blob-99.part: no space left on device"),
]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> LessonService:
    folder: Path = tmp_path_factory.mktemp("generalization")
    lessons = services_for_folder(folder).lessons
    for name, (kind, message, observations) in LESSONS_BY_NAME.items():
        lessons.create_lesson(
            LessonInput(
                name=name, errorPattern={"type": kind, "message": message, "context": ""}, observations=observations
            )
        )
    return lessons


@pytest.mark.parametrize(("expected", "kind", "message"), QUERIES, ids=[q[0] for q in QUERIES])
def test_find_similar_errors_generalizes(service: LessonService, expected: str, kind: str, message: str) -> None:
    found = service.find_similar_errors(ErrorQuery(type=kind, message=message))
    assert [m.name for m in found.matches][:1] == [expected]


@pytest.mark.parametrize(("expected", "kind", "message"), QUERIES, ids=[q[0] for q in QUERIES])
def test_recommendations_generalize_from_a_noisy_log(
    service: LessonService, expected: str, kind: str, message: str
) -> None:
    log = f"$ make deploy\n[12:01:02] step 3/7 running\n{message}\nmake: *** [Makefile:12: deploy] Error 1\n$ "
    recommended = service.get_lesson_recommendations(log)
    assert [r.name for r in recommended.recommendations][:1] == [expected]
