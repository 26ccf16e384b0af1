"""Projects: separate stores chosen per connection, lessons shared across them, and no silent fallback (on the
files and on PostgreSQL)."""

from __future__ import annotations

import json
import ntpath
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import ListRootsResult, ResourceUpdatedNotification, Root

from memory_graph.cli import main
from memory_graph.config import Settings, project_name
from memory_graph.errors import InvalidInputError
from memory_graph.model import Entity
from memory_graph.projects import (
    choose_project,
    earlier_projects_note,
    list_projects,
    name_for_folder,
    path_of_file_uri,
)
from memory_graph.server import build_app
from memory_graph.subscriptions import GRAPH_URI
from tests.conftest import FILES_ONLY, engine_env, settings_in

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("each_engine")]
ROOT = Path(__file__).resolve().parents[2]
PORT_LESSON = {
    "name": "PORT_IN_USE",
    "errorPattern": {"type": "network", "message": "Error: listen EADDRINUSE: address already in use :::3000"},
    "observations": ["Another process holds the port; stop it or use another port."],
}


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content


def project_settings(folder: Path, project: str | None, **env: Any) -> Settings:
    extra = {"MEMORY_PROJECT": project} if project else {}
    return settings_in(folder, **extra, **env)


@pytest.mark.parametrize(
    "hostile", ["../escape", "a/b", "/etc", "..", ".", "", "x" * 65, "con", "LPT1", "auto", "default", "a\\b", "-x"]
)
def test_a_hostile_project_name_is_refused_naming_the_variable(hostile: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError) as refused:
        project_name(hostile, "MEMORY_PROJECT")
    assert "MEMORY_PROJECT" in str(refused.value)
    if hostile not in ("auto", ""):
        with pytest.raises(InvalidInputError):
            Settings.from_env({"MEMORY_FILE_PATH": str(tmp_path / "memory.json"), "MEMORY_PROJECT": hostile})


def test_an_invalid_project_stops_the_server_at_startup(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MEMORY_FILE_PATH": str(tmp_path / "m.json")}
    run = subprocess.run(
        [sys.executable, "-m", "memory_graph"],
        env={**env, "MEMORY_PROJECT": "../../etc"},
        capture_output=True,
        text=True,
        timeout=60,
        input="",
    )
    assert run.returncode == 2 and "MEMORY_PROJECT" in run.stderr
    assert list(tmp_path.iterdir()) == []  # nothing was created anywhere


async def test_two_servers_on_different_projects_never_see_each_others_entities(tmp_path: Path) -> None:
    updates: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            updates.append(str(message.params.uri))

    alpha_app = build_app(project_settings(tmp_path, "alpha"))
    alpha_app.start_loading()
    beta_app = build_app(project_settings(tmp_path, "beta"))
    async with (
        Client(alpha_app.server, mode="legacy", message_handler=on_message) as alpha,
        Client(beta_app.server) as beta,
    ):
        with pytest.warns(MCPDeprecationWarning):
            await alpha.subscribe_resource(GRAPH_URI)
        secret = {"name": "Maria", "entityType": "person", "observations": ["works on the alpha launch"]}
        await call(alpha, "create_entities", entities=[secret])
        with anyio.fail_after(5):
            while not updates:
                await anyio.sleep(0.05)
        updates.clear()
        await call(beta, "create_entities", entities=[{**secret, "name": "Bruno", "observations": ["beta"]}])
        assert (await call(beta, "search_nodes", query="alpha launch"))["entities"] == []
        assert (await call(beta, "search_nodes", query="Maria"))["entities"] == []
        assert (await call(beta, "open_nodes", names=["Maria"]))["entities"] == []
        assert [e["name"] for e in (await call(beta, "read_graph"))["entities"]] == ["Bruno"]
        resource = await beta.read_resource(GRAPH_URI)
        assert "Maria" not in resource.contents[0].text and "Bruno" in resource.contents[0].text
        assert [e["name"] for e in (await call(alpha, "read_graph"))["entities"]] == ["Maria"]
        await anyio.sleep(1.2)  # alpha's watcher polls twice a second: beta's change must not reach it
        assert updates == []
        listed = await call(alpha, "list_projects")
        assert {p["name"] for p in listed["projects"]} >= {"alpha", "beta"} and listed["current"] == "alpha"
        changed = [p["lastChange"] for p in listed["projects"] if p["name"] in ("alpha", "beta")]
        assert len(changed) == 2 and all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", c) for c in changed)
    alpha_app.subscriptions.stop()
    plain = build_app(settings_in(tmp_path))  # no project: the default store, as before projects existed
    async with Client(plain.server) as default:
        assert (await call(default, "read_graph"))["entities"] == []


async def test_lessons_are_shared_and_prefer_the_current_project_at_equal_relevance(tmp_path: Path) -> None:
    async with (
        Client(build_app(project_settings(tmp_path, "alpha")).server) as alpha,
        Client(build_app(project_settings(tmp_path, "beta")).server) as beta,
    ):
        made = await call(alpha, "create_lesson", lesson=PORT_LESSON)
        assert made["metadata"]["project"] == "alpha"
        found = await call(beta, "find_similar_errors", errorPattern=PORT_LESSON["errorPattern"])
        assert [m["name"] for m in found["matches"]] == ["PORT_IN_USE"]
        await call(beta, "create_lesson", lesson={**PORT_LESSON, "name": "PORT_IN_USE_AGAIN"})
        for client, first in ((alpha, "PORT_IN_USE"), (beta, "PORT_IN_USE_AGAIN")):
            found = await call(client, "find_similar_errors", errorPattern=PORT_LESSON["errorPattern"])
            assert found["matches"][0]["name"] == first
            log = "npm run dev\n" + PORT_LESSON["errorPattern"]["message"] + "\n"
            recommended = await call(client, "get_lesson_recommendations", context=log)
            assert recommended["recommendations"][0]["name"] == first


def test_a_merged_twins_name_reaches_the_lesson_of_the_project_that_merged_it(tmp_path: Path) -> None:
    """Each project merges its own twins, and two projects may name them alike: the name was resolved to the first
    lesson holding it, another project's, whose counts and fields were then changed."""
    from lessons.model import LessonChanges, LessonInput, SuccessReport
    from memory_graph.app import build_services

    def port_lesson(name: str, port: int) -> LessonInput:
        message = f"Error: listen EADDRINUSE: address already in use 127.0.0.1:{port}"
        return LessonInput.model_validate(
            {**PORT_LESSON, "name": name, "errorPattern": {"type": "network", "message": message}}
        )

    alpha, beta = (build_services(project_settings(tmp_path, name)).lessons for name in ("alpha", "beta"))
    for lessons, project in ((alpha, "alpha"), (beta, "beta")):
        lessons.create_lesson(port_lesson(f"{project}-port", 8000))
        assert lessons.create_lesson(port_lesson("port-in-use", 9000)).name == f"{project}-port"
    assert beta.update_lesson_success(SuccessReport(lessonName="port-in-use", success=True)).lesson.name == "beta-port"
    assert beta.update_lesson(LessonChanges(name="port-in-use", severity="high")).name == "beta-port"
    assert alpha.records["alpha-port"]["metadata"]["frequency"] == 0
    assert alpha.records["alpha-port"]["metadata"]["severity"] == "medium"
    # A project without a twin of that name still reaches another project's lesson by it.
    gamma = build_services(project_settings(tmp_path, "gamma")).lessons
    assert gamma.update_lesson_success(SuccessReport(lessonName="port-in-use", success=True)).lesson.name in {
        "alpha-port",
        "beta-port",
    }


async def test_lessons_per_project_with_memory_lessons_project(tmp_path: Path) -> None:
    async with (
        Client(build_app(project_settings(tmp_path, "alpha", MEMORY_LESSONS="project")).server) as alpha,
        Client(build_app(project_settings(tmp_path, "beta", MEMORY_LESSONS="project")).server) as beta,
    ):
        await call(alpha, "create_lesson", lesson=PORT_LESSON)
        assert (await call(beta, "find_similar_errors", errorPattern=PORT_LESSON["errorPattern"]))["matches"] == []
        assert len((await call(alpha, "find_similar_errors", errorPattern=PORT_LESSON["errorPattern"]))["matches"]) == 1


def test_a_shared_lesson_never_hides_a_projects_own_entity(tmp_path: Path) -> None:
    from lessons.model import LessonInput
    from memory_graph.app import build_services
    from memory_graph.model import Entity

    alpha = build_services(project_settings(tmp_path, "alpha"))
    alpha.graph.create_entities([Entity(name="PORT_IN_USE", entityType="note", observations=["alpha's own"])])
    beta = build_services(project_settings(tmp_path, "beta"))
    beta.lessons.create_lesson(LessonInput.model_validate(PORT_LESSON))
    found = alpha.graph.open_nodes(["PORT_IN_USE"]).entities
    assert [(e.entityType, e.observations) for e in found] == [("note", ["alpha's own"])]
    fresh = build_services(project_settings(tmp_path, "alpha")).graph.open_nodes(["PORT_IN_USE"]).entities
    assert [e.entityType for e in fresh] == ["note"]  # a fresh start hears the lesson after the entity
    alpha.graph.delete_entities(["PORT_IN_USE"])
    # Its own entity gone, the project sees the shared lesson, as a fresh start of it does.
    shown = alpha.graph.open_nodes(["PORT_IN_USE"]).entities
    assert [(e.entityType, e.observations) for e in shown] == [("lesson", PORT_LESSON["observations"])]
    again = build_services(project_settings(tmp_path, "alpha")).graph.open_nodes(["PORT_IN_USE"]).entities
    assert again == shown


def test_auto_is_refused_over_http(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_FILE_PATH", str(tmp_path / "memory.json"))
    monkeypatch.setenv("MEMORY_PROJECT", "auto")
    assert main(["serve", "--transport", "http", "--port", "1"]) == 1


def test_auto_names_a_folder_stably_and_never_falls_back(tmp_path: Path) -> None:
    repo = tmp_path / "My App"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    chosen = choose_project([], repo / "src")
    assert chosen.folder == repo.resolve() and chosen.name == name_for_folder(repo.resolve())
    assert chosen.name.startswith("my-app-") and project_name(chosen.name, "x") == chosen.name
    assert choose_project([(repo / "src").as_uri()], tmp_path).name == chosen.name  # a root inside the repository
    other = tmp_path / "elsewhere" / "My App"
    (other / ".git").mkdir(parents=True)
    assert choose_project([], other).name != chosen.name  # two checkouts called the same never share a memory
    with pytest.raises(InvalidInputError) as refused:
        choose_project([], tmp_path)
    assert "MEMORY_PROJECT" in str(refused.value) and "not inside a git repository" in str(refused.value)


async def test_auto_chooses_from_the_clients_roots_else_errors_without_touching_any_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "work" / "shop"
    (repo / ".git").mkdir(parents=True)
    data = tmp_path / "data"
    data.mkdir()

    async def roots(context: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=repo.as_uri(), name="shop")])

    monkeypatch.chdir(tmp_path)  # not a repository: only the roots can choose
    app = build_app(project_settings(data, "auto"))
    async with Client(app.server, mode="legacy", list_roots_callback=roots) as client:
        await call(client, "create_entities", entities=[{"name": "Ana", "entityType": "person", "observations": []}])
        listed = await call(client, "list_projects")
    assert listed["current"] == name_for_folder(repo.resolve())
    lonely = build_app(project_settings(data, "auto"))
    async with Client(lonely.server) as client:
        result = await client.call_tool("read_graph", {})
        assert result.is_error and "MEMORY_PROJECT" in result.content[0].text
        again = await client.call_tool("create_entities", {"entities": [{"name": "X", "entityType": "t"}]})
        assert again.is_error
    default = build_app(settings_in(data))
    async with Client(default.server) as client:
        assert (await call(client, "read_graph"))["entities"] == []  # nothing fell back to the default store


def test_the_cli_works_per_project_lists_projects_and_moves_an_entity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMORY_FILE_PATH", str(tmp_path / "memory.json"))
    for name, value in engine_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    source = tmp_path / "in.jsonl"
    source.write_text(
        '{"type":"entity","name":"Ana","entityType":"person","observations":["x"]}\n'
        '{"type":"entity","name":"Acme","entityType":"org","observations":[]}\n'
        '{"type":"relation","from":"Ana","to":"Acme","relationType":"works_at"}\n',
        encoding="utf-8",
    )
    assert main(["--project", "alpha", "import", str(source)]) == 0
    assert main(["--project", "beta", "import", str(source)]) == 0
    assert main(["--project", "beta", "move-entity", "Ana", "--to-project", "gamma", "--create"]) == 0
    capsys.readouterr()
    assert main(["projects"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in listed["projects"]][:1] == ["default"]
    assert {"alpha", "beta", "gamma"} <= {p["name"] for p in listed["projects"]}
    assert main(["--project", "gamma", "export"]) == 0
    assert [json.loads(line)["name"] for line in capsys.readouterr().out.splitlines()] == ["Ana"]
    assert main(["--project", "beta", "export"]) == 0
    assert [json.loads(line).get("name") for line in capsys.readouterr().out.splitlines()] == ["Acme"]
    assert main(["--project", "alpha", "export"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3  # the other project is untouched
    assert main(["--project", "../up", "stats"]) == 2
    assert "--project" in capsys.readouterr().err


def test_move_entity_keeps_every_relation_whose_end_the_target_has_and_moves_back_to_the_default_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The target's ends were read with open_nodes, whose answer is cut to the response budget: an end left out
    of it counted as missing, and its relation was deleted."""
    monkeypatch.setenv("MEMORY_FILE_PATH", str(tmp_path / "memory.json"))
    monkeypatch.setenv("MEMORY_MAX_RESPONSE_CHARS", "2000")
    for name, value in engine_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    ends = [
        {"type": "entity", "name": f"End{i}", "entityType": "thing", "observations": ["x" * 300]} for i in range(12)
    ]
    hub = {"type": "entity", "name": "Hub", "entityType": "thing", "observations": []}
    relations = [{"type": "relation", "from": "Hub", "to": end["name"], "relationType": "links"} for end in ends]
    (tmp_path / "ends.jsonl").write_text("\n".join(json.dumps(e) for e in ends) + "\n", encoding="utf-8")
    (tmp_path / "hub.jsonl").write_text(
        "\n".join(json.dumps(r) for r in [hub, *ends, *relations]) + "\n", encoding="utf-8"
    )
    assert main(["--project", "target", "import", str(tmp_path / "ends.jsonl")]) == 0
    assert main(["import", str(tmp_path / "hub.jsonl")]) == 0
    capsys.readouterr()
    assert main(["move-entity", "Hub", "--to-project", "target"]) == 0
    assert "moved 'Hub' with 12 relation(s)" in capsys.readouterr().out
    assert main(["--project", "target", "move-entity", "Hub", "--to-project", "Default"]) == 0
    assert "moved 'Hub' with 12 relation(s)" in capsys.readouterr().out
    assert main(["move-entity", "Hub", "--to-project", "default"]) == 1
    assert "is the store the entity is in" in capsys.readouterr().err


ALPHA_TOKEN, ADMIN_TOKEN = "alpha-token-0123456789", "admin-token-0123456789"


@pytest.fixture
def project_server(tmp_path: Path) -> Any:
    from tests.memory_graph.test_http import free_port, wait_for_port

    port = free_port()
    env = {**os.environ, "MEMORY_FILE_PATH": str(tmp_path / "memory.json"), "PYTHONPATH": str(ROOT)}
    env.update(engine_env(tmp_path))
    env.pop("MEMORY_AUTH_TOKEN", None)
    env["MEMORY_AUTH_TOKENS"] = json.dumps({ALPHA_TOKEN: ["alpha"], ADMIN_TOKEN: "*"})
    env["MEMORY_LESSONS"] = "project"  # (tokens bound to projects need it: shared lessons would cross them)
    process = subprocess.Popen(
        [sys.executable, "-m", "memory_graph", "--transport", "http", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_port(process, port)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.communicate(timeout=10)


def status_of(url: str, token: str | None) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    ).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def test_http_serves_one_store_per_path_and_tokens_bound_to_projects_get_403_elsewhere(
    project_server: str,
) -> None:
    from tests.memory_graph.test_http import client_for

    assert status_of(f"{project_server}/alpha", ALPHA_TOKEN)[0] == 200
    assert status_of(f"{project_server}/Alpha", ALPHA_TOKEN)[0] == 200  # one project whatever its case
    assert status_of(f"{project_server}/alpha/", ALPHA_TOKEN)[0] == 200
    code, text = status_of(f"{project_server}/beta", ALPHA_TOKEN)
    assert code == 403 and "alpha" in text
    assert status_of(project_server, ALPHA_TOKEN)[0] == 403  # the default store is not one of its projects
    assert status_of(f"{project_server}/alpha", None)[0] == 401
    assert status_of(f"{project_server}/alpha", "wrong-token-0123456789")[0] == 401
    assert status_of(f"{project_server}/..%2Fetc", ADMIN_TOKEN)[0] == 404
    assert status_of(f"{project_server}/con", ADMIN_TOKEN)[0] == 404
    async with client_for(f"{project_server}/alpha", ALPHA_TOKEN) as alpha:
        await call(alpha, "create_entities", entities=[{"name": "Ana", "entityType": "person", "observations": []}])
        listed = await call(alpha, "list_projects")
        assert [p["name"] for p in listed["projects"]] == ["alpha"] and listed["current"] == "alpha"
    async with client_for(f"{project_server}/beta", ADMIN_TOKEN) as beta:
        assert (await call(beta, "read_graph"))["entities"] == []
        assert {"alpha", "beta", "default"} <= {p["name"] for p in (await call(beta, "list_projects"))["projects"]}
    async with client_for(project_server, ADMIN_TOKEN) as default:
        assert (await call(default, "read_graph"))["entities"] == []
    async with client_for(f"{project_server}/alpha", ADMIN_TOKEN) as alpha_again:
        assert [e["name"] for e in (await call(alpha_again, "read_graph"))["entities"]] == ["Ana"]


@pytest.mark.slow
def test_several_projects_written_at_once_lose_nothing_and_share_one_lesson(tmp_path: Path) -> None:
    from lessons.model import LessonInput
    from memory_graph.app import build_services

    base = project_settings(tmp_path, None)
    build_services(base).lessons.create_lesson(LessonInput.model_validate(PORT_LESSON))
    processes, writes = 4, 40
    env = {**os.environ, "PYTHONPATH": str(ROOT), **engine_env(tmp_path)}
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.memory_graph.workers",
                "projects",
                str(tmp_path),
                f"p{w % 2}",
                str(w),
                str(writes),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in range(processes)
    ]
    for child in children:
        out, _ = child.communicate(timeout=300)
        assert child.returncode == 0 and out.strip() == "done"
    for project in ("p0", "p1"):
        services = build_services(base.for_project(project))
        names = {e.name for e in services.graph.read_graph().entities if e.entityType == "write"}
        assert names == {f"w{w}-{i}" for w in range(processes) if w % 2 == int(project[1]) for i in range(writes)}
    shared = build_services(base)
    shared.store.open()
    lesson = shared.lessons.records["PORT_IN_USE"]
    assert lesson["metadata"]["frequency"] == processes * writes  # every shared update counted once


async def test_two_stdio_server_processes_on_two_projects_stay_apart(tmp_path: Path) -> None:
    from mcp import StdioServerParameters

    def params(project: str) -> StdioServerParameters:
        env = {
            "MEMORY_FILE_PATH": str(tmp_path / "memory.json"),
            "MEMORY_PROJECT": project,
            "PATH": os.environ.get("PATH", ""),
            "MEMORY_SEMANTIC": "off",
            "PYTHONPATH": str(ROOT),
            **engine_env(tmp_path),
        }
        return StdioServerParameters(command=sys.executable, args=["-m", "memory_graph"], env=env, cwd=str(tmp_path))

    async with Client(params("alpha")) as alpha, Client(params("beta")) as beta:
        await call(
            alpha, "create_entities", entities=[{"name": "Maria", "entityType": "person", "observations": ["a"]}]
        )
        await call(beta, "create_entities", entities=[{"name": "Bruno", "entityType": "person", "observations": ["b"]}])
        for client, mine, other in ((alpha, "Maria", "Bruno"), (beta, "Bruno", "Maria")):
            assert [e["name"] for e in (await call(client, "read_graph"))["entities"]] == [mine]
            assert (await call(client, "search_nodes", query=other))["entities"] == []
            assert (await call(client, "open_nodes", names=[other]))["entities"] == []
            text = (await client.read_resource(GRAPH_URI)).contents[0].text
            assert mine in text and other not in text


def test_project_names_have_one_case_and_tokenless_http_answers_only_localhost() -> None:
    from memory_graph.http import _loopback_host

    assert project_name("MyApp", "MEMORY_PROJECT") == "myapp"  # one folder on every file system
    assert _loopback_host({b"host": b"127.0.0.1:8000"}) and _loopback_host({b"host": b"localhost"})
    assert _loopback_host({b"host": b"[::1]:8000"})
    assert not _loopback_host({b"host": b"evil.example:8000"}) and not _loopback_host({})


class RawStdioClient:
    """A stdio client speaking JSON-RPC by hand, so it can answer roots/list with what real clients send (the SDK's
    client would refuse to build a root that is not a file:// URL)."""

    def __init__(self, env: dict[str, str], cwd: Path, roots: list[str]) -> None:
        full = {**os.environ, "MEMORY_SEMANTIC": "off", "PYTHONPATH": str(ROOT), **env}
        self.roots = roots
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memory_graph"],
            env=full,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self.last_id = 0
        capabilities = {"roots": {"listChanged": True}}
        client = {"name": "raw", "version": "1"}
        self.request(
            "initialize", {"protocolVersion": "2025-06-18", "capabilities": capabilities, "clientInfo": client}
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdout is not None
        self.last_id += 1
        self.send({"jsonrpc": "2.0", "id": self.last_id, "method": method, "params": params})
        while True:
            line = self.process.stdout.readline()
            assert line, "the server closed its output"
            message = json.loads(line)
            if message.get("method") == "roots/list":
                roots = [{"uri": uri, "name": "r"} for uri in self.roots]
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": {"roots": roots}})
            elif message.get("id") == self.last_id and "method" not in message:
                return message

    def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        result = self.request("tools/call", {"name": name, "arguments": arguments})["result"]
        assert not result.get("isError"), result["content"][0]["text"]
        return dict(result["structuredContent"])

    def close(self) -> str:
        _, stderr = self.process.communicate(timeout=30)  # (closes stdin: the server ends)
        return stderr


def test_auto_skips_a_root_that_is_not_a_file_url_and_uses_the_next(tmp_path: Path) -> None:
    """The SDK's roots/list result model refused the whole answer when one root was not a file:// URL (a
    remote workspace's vscode-vfs://...), and every tool call failed with a raw validation error."""
    repo = tmp_path / "shop"
    (repo / ".git").mkdir(parents=True)
    env = {"MEMORY_FILE_PATH": str(tmp_path / "data" / "memory.json"), "MEMORY_PROJECT": "auto"}
    client = RawStdioClient({**env, **engine_env(tmp_path)}, tmp_path, ["vscode-vfs://github/me/app", repo.as_uri()])
    try:
        assert client.tool("read_graph") == {"entities": [], "relations": []}
        assert client.tool("list_projects")["current"] == name_for_folder(repo.resolve())
    finally:
        stderr = client.close()
    assert "vscode-vfs://github/me/app" in stderr and "skipped" in stderr


@FILES_ONLY
def test_two_memory_files_in_one_folder_never_share_a_project(tmp_path: Path) -> None:
    """A project's folder was `projects/<name>` beside any memory file: work.json's and home.json's project
    `notes` were one store, though their histories were kept apart."""

    def services(stem: str, project: str) -> Any:
        from memory_graph.app import build_services

        files = {"MEMORY_FILE_PATH": tmp_path / f"{stem}.json", "LESSON_FILE_PATH": tmp_path / f"{stem}-lessons.json"}
        built = build_services(settings_in(tmp_path, **files, MEMORY_PROJECT=project))
        built.store.open()
        return built

    work = services("work", "notes")
    work.graph.create_entities([Entity(name="Salary", entityType="fact", observations=["work-confidential"])])
    home = services("home", "notes")
    assert home.graph.read_graph().entities == []
    assert [p.name for p in list_projects(home.settings).projects] == ["default", "notes"]
    other = settings_in(tmp_path, MEMORY_FILE_PATH=tmp_path / "other.json")
    assert [p.name for p in list_projects(other).projects] == ["default"]  # a third memory has no project
    (tmp_path / "projects" / "old").mkdir(parents=True)  # an earlier version kept other.json's projects there
    assert f"mv {tmp_path / 'projects'}/<name> {tmp_path / 'other-projects'}/" in str(earlier_projects_note(other))
    assert earlier_projects_note(work.settings) is None  # work.json has its own projects folder already
    assert work.settings.memory_file == tmp_path / "work-projects" / "notes" / "memory.json"
    assert home.settings.memory_file == tmp_path / "home-projects" / "notes" / "memory.json"
    for each in (work, home):
        each.store.close()
    # memory.json's projects stay where they always were
    assert settings_in(tmp_path, MEMORY_PROJECT="notes").memory_file == tmp_path / "projects" / "notes" / "memory.json"


def test_a_mistyped_project_is_refused_where_a_command_would_only_read_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--project alpah export` exported 0 records with rc 0 and left project alpah listed forever; move-entity to
    a mistyped project made it silently."""
    monkeypatch.setenv("MEMORY_FILE_PATH", str(tmp_path / "memory.json"))
    for name, value in engine_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    source = tmp_path / "in.jsonl"
    source.write_text('{"type":"entity","name":"Ana","entityType":"person","observations":["x"]}\n', encoding="utf-8")
    assert main(["--project", "alpha", "import", str(source)]) == 0  # a first write makes a project
    capsys.readouterr()
    for command in (
        ["export"],
        ["stats"],
        ["check"],
        ["compact", "--days", "1"],
        ["move-entity", "Ana", "--to-project", "alpha"],
    ):
        assert main(["--project", "alpah", *command]) == 1, command
        err = capsys.readouterr().err
        assert "no project 'alpah'; known: default, alpha (" in err and "first write" in err, err
    assert main(["--project", "alpha", "move-entity", "Ana", "--to-project", "bta"]) == 1
    assert "no project 'bta'" in (err := capsys.readouterr().err) and "--create" in err, err
    assert main(["projects"]) == 0
    assert [p["name"] for p in json.loads(capsys.readouterr().out)["projects"]] == ["default", "alpha"]
    assert main(["--project", "alpha", "export"]) == 0  # nothing was moved
    assert [json.loads(line)["name"] for line in capsys.readouterr().out.splitlines()] == ["Ana"]


def test_a_server_on_a_new_project_says_so_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server's project is made by its first write (so not refused), but a mistyped name must show somewhere."""
    env = {"PYTHONPATH": str(ROOT), "MEMORY_FILE_PATH": str(tmp_path / "m.json"), **engine_env(tmp_path)}

    def start() -> str:
        run = subprocess.run(
            [sys.executable, "-m", "memory_graph"],
            env={**os.environ, **env, "MEMORY_PROJECT": "fresh"},
            capture_output=True,
            text=True,
            timeout=60,
            input="",
        )
        assert run.returncode == 0 and re.search(r"\((project|store) fresh[;)]", run.stderr), run.stderr
        return run.stderr

    assert "project fresh is new" in start()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "in.jsonl").write_text(
        '{"type":"entity","name":"A","entityType":"t","observations":[]}\n', encoding="utf-8"
    )
    assert main(["--project", "fresh", "import", str(tmp_path / "in.jsonl")]) == 0
    assert "is new" not in start()


def test_move_entity_keeps_every_field_of_the_stored_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The entity was copied through the Entity model (extra="ignore"): fields ordinary writes keep were lost."""
    monkeypatch.setenv("MEMORY_FILE_PATH", str(tmp_path / "memory.json"))
    for name, value in engine_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    ana = {
        "type": "entity",
        "name": "Ana",
        "entityType": "person",
        "observations": ["x"],
        "createdAt": "2024-01-02T03:04:05Z",
        "tags": ["team", "berlin"],
    }
    (tmp_path / "in.jsonl").write_text(json.dumps(ana) + "\n", encoding="utf-8")
    assert main(["import", str(tmp_path / "in.jsonl")]) == 0
    assert main(["move-entity", "Ana", "--to-project", "alpha", "--create"]) == 0
    capsys.readouterr()
    assert main(["--project", "alpha", "export"]) == 0
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == [ana]


@pytest.mark.parametrize(
    ("uri", "windows", "path"),
    [
        ("file:///C:/Users/me/app", True, "C:\\Users\\me\\app"),  # was \\C:\\Users\\me\\app
        ("file:///c%3A/Users/me/my%20app", True, "c:\\Users\\me\\my app"),  # was \\c:\\...
        ("file:///C|/x", True, "C:\\x"),
        ("file:///C:", True, "C:\\"),
        ("file://server/share/app", True, "\\\\server\\share\\app"),  # the host was dropped
        ("file:////server/share/app", True, "\\\\server\\share\\app"),
        ("file://localhost/C:/x", True, "C:\\x"),
        ("file:///Users/x", True, None),  # no drive: which one is meant?
        ("file://otherhost/share/proj", False, None),  # was the local /share/proj
        ("file://localhost/srv/app", False, "/srv/app"),
        ("file:///srv/my%20app/", False, "/srv/my app/"),
        ("file:relative/dir", False, None),
        ("vscode-vfs://github/me/app", False, None),
        ("vscode-vfs://github/me/app", True, None),
    ],
)
def test_a_root_uri_becomes_the_path_its_system_means(uri: str, windows: bool, path: str | None) -> None:
    assert path_of_file_uri(uri, windows) == path


def test_a_folder_on_windows_names_one_project_in_any_case_and_a_remote_root_is_skipped(tmp_path: Path) -> None:
    from pathlib import PureWindowsPath

    upper = name_for_folder(PureWindowsPath("C:\\Users\\Me\\App"), ntpath.normcase)
    assert upper == name_for_folder(PureWindowsPath("c:\\users\\me\\app"), ntpath.normcase)
    assert upper.startswith("app-")
    repo = tmp_path / "shop"
    (repo / ".git").mkdir(parents=True)
    with pytest.raises(InvalidInputError):  # another host's folder is not the local folder of the same path
        choose_project(["file://otherhost" + repo.as_posix()], tmp_path)


def test_the_cli_takes_default_and_auto_for_project_as_the_environment_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--project default` was refused though `projects` lists default and --to-project takes it; `--project
    auto` was refused with the advice to use auto."""
    monkeypatch.setenv("MEMORY_FILE_PATH", str(tmp_path / "memory.json"))
    for name, value in engine_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    (tmp_path / "in.jsonl").write_text(
        '{"type":"entity","name":"Ana","entityType":"person","observations":[]}\n', encoding="utf-8"
    )
    assert main(["import", str(tmp_path / "in.jsonl")]) == 0
    capsys.readouterr()
    assert main(["--project", "Default", "export"]) == 0
    assert [json.loads(line)["name"] for line in capsys.readouterr().out.splitlines()] == ["Ana"]
    repo = tmp_path / "shop"
    (repo / ".git").mkdir(parents=True)
    monkeypatch.chdir(repo)  # an admin command's auto: the working directory's repository
    assert main(["--project", "auto", "import", str(tmp_path / "in.jsonl")]) == 0
    capsys.readouterr()
    assert main(["projects"]) == 0
    assert name_for_folder(repo.resolve()) in {p["name"] for p in json.loads(capsys.readouterr().out)["projects"]}
    assert main(["move-entity", "Ana", "--to-project", "auto"]) == 1
    assert "reserved word, not a project's name" in capsys.readouterr().err
