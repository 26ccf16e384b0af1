"""Deployment: the Dockerfile (lint, replayed install, a real build where an engine exists) and client examples."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import pytest

from tests.conftest import needed

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")
DOCKER_STANDIN = ROOT.parent / "shared" / "tools" / "docker"
HELLO = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def final_stage() -> str:
    return DOCKERFILE.rsplit("\nFROM ", 1)[1]


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for block in re.findall(r"^ENV ((?:.*\\\n)*.*)$", final_stage(), re.MULTILINE):
        for pair in shlex.split(block.replace("\\\n", " ")):
            name, _, value = pair.partition("=")
            env[name] = value
    return env


def stdio_session(command: list[str], env: dict[str, str], timeout: float = 60) -> list[dict]:
    """initialize, tools/list, one create_entities; each request waits for its answer, as a client does."""
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "name": "create_entities",
                "arguments": {"entities": [{"name": "Alice", "entityType": "person", "observations": ["x"]}]},
            },
        },
    ]
    process = subprocess.Popen(
        command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdin is not None and process.stdout is not None
    answers: list[dict] = []
    timer = threading.Timer(timeout, process.kill)
    timer.start()
    try:
        for request in requests:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            while "id" in request and not any(a.get("id") == request["id"] for a in answers):
                line = process.stdout.readline()
                assert line, f"the server stopped: {process.stderr.read()[-2000:]}"
                answers.append(json.loads(line))
    finally:
        timer.cancel()
        process.stdin.close()
        process.wait(timeout=30)
        process.stdout.close()
        process.stderr.close()
    return answers


def test_the_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    run = subprocess.run([hadolint, "Dockerfile"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_image_keeps_code_out_of_the_volume_and_runs_unprivileged() -> None:
    stage = final_stage()
    assert DOCKERFILE.startswith("#") and "FROM docker.io/library/python:3.12-slim" in DOCKERFILE
    assert re.search(r"^VOLUME /data$", stage, re.MULTILINE)
    assert re.search(r"^USER 10001", stage, re.MULTILINE)
    assert image_env()["MEMORY_FILE_PATH"] == "/data/memory.json"
    assert '"/opt/memory-graph' in stage or "/opt/memory-graph" in stage
    assert json.loads(re.search(r"^ENTRYPOINT (.*)$", stage, re.MULTILINE).group(1)) == ["memory-graph"]


@pytest.mark.slow
def test_the_install_steps_replayed_in_a_fresh_venv_serve_stdio(tmp_path: Path) -> None:
    """What the image's RUN does (a venv, pip install of the checkout), then its ENTRYPOINT with its ENV."""
    venv = tmp_path / "opt" / "memory-graph"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    install = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", str(ROOT)], capture_output=True, text=True, timeout=900
    )
    assert install.returncode == 0, install.stderr[-3000:]
    env = {
        k: v.replace("/opt/memory-graph", str(venv)).replace("$PATH", os.environ["PATH"])
        for k, v in image_env().items()
    }
    data = tmp_path / "data"
    env["MEMORY_FILE_PATH"] = env["MEMORY_FILE_PATH"].replace("/data", str(data))
    entrypoint = json.loads(re.search(r"^ENTRYPOINT (.*)$", final_stage(), re.MULTILINE).group(1))
    answers = stdio_session([str(venv / "bin" / entrypoint[0]), *entrypoint[1:]], {**env, "HOME": str(tmp_path)})
    tools = next(a for a in answers if a.get("id") == 2)["result"]["tools"]
    assert {"create_entities", "read_graph", "create_lesson"} <= {t["name"] for t in tools}
    assert (data / "memory.json").exists()
    # The installed package carries its data files: the thesaurus a search expands a query with.
    related = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "from memory_graph.search import related_words as r; print(r('dog'))"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert related.returncode == 0, related.stderr[-3000:]
    assert "beagl" in related.stdout, related.stdout


BASE_IMAGE = "docker.io/library/python:3.12-slim"


def docker_command() -> list[str] | None:
    if shutil.which("docker") and subprocess.run(["docker", "info"], capture_output=True).returncode == 0:
        return ["docker"]
    if DOCKER_STANDIN.exists() and os.geteuid() == 0 and (shutil.which("podman") or shutil.which("apt-get")):
        # The stand-in sets itself up (podman from Debian, a local base image) on first use; if that cannot
        # happen here, there is no engine, which is a fact about the machine and not about our image.
        setup = subprocess.run(["bash", str(DOCKER_STANDIN), "version"], capture_output=True, text=True, timeout=1200)
        return ["bash", str(DOCKER_STANDIN)] if setup.returncode == 0 else None
    return None


@pytest.mark.slow
def test_the_image_builds_and_serves(tmp_path: Path) -> None:
    docker = docker_command()
    needed(docker is not None, "no Docker engine here, and no ../shared/tools/docker stand-in it could set up")
    assert docker is not None
    wheelhouse = ROOT / "wheelhouse"
    shutil.rmtree(wheelhouse, ignore_errors=True)
    # The README's offline recipe: our wheel, and the dependencies' wheels for the Python of the image's base
    # (3.12 for the real one; asked, since a stand-in base may carry another).
    version = subprocess.run(
        [*docker, "run", "--rm", BASE_IMAGE, "python", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout.strip()
    pip = [sys.executable, "-m", "pip", "--quiet"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(wheelhouse), str(ROOT)], check=True, timeout=900)
    subprocess.run(
        [*pip, "download", "--python-version", version, "--only-binary=:all:", "-d", str(wheelhouse), str(ROOT)],
        check=True,
        timeout=900,
    )
    build = subprocess.run(
        [
            *docker,
            "build",
            "--build-arg",
            "PIP_NO_INDEX=1",
            "--build-arg",
            "PIP_FIND_LINKS=/wheelhouse",
            "-t",
            "memory-graph-test",
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    volume = f"memory-graph-test-{os.getpid()}"
    try:
        answers = stdio_session(
            [*docker, "run", "-i", "--rm", "-v", f"{volume}:/data", "memory-graph-test"], dict(os.environ), timeout=300
        )
        created = next(a for a in answers if a.get("id") == 3)["result"]["structuredContent"]
        assert created["entities"][0]["name"] == "Alice"
        again = stdio_session(
            [*docker, "run", "-i", "--rm", "-v", f"{volume}:/data", "memory-graph-test"], dict(os.environ), timeout=300
        )
        assert next(a for a in again if a.get("id") == 3)["result"]["structuredContent"]["entities"] == []  # persisted
    finally:
        subprocess.run([*docker, "volume", "rm", "-f", volume], capture_output=True)


def example_configs() -> list[Path]:
    return sorted((ROOT / "examples").glob("*.json"))


def test_examples_exist_for_every_client() -> None:
    names = {p.name for p in (ROOT / "examples").iterdir()}
    assert {
        "claude_desktop_config.docker.json",
        "claude_desktop_config.uvx.json",
        "cursor.mcp.json",
        "vscode.mcp.json",
        "windsurf.mcp_config.json",
        "claude-code.sh",
        "http.mcp.json",
    } <= names


@pytest.mark.parametrize("path", example_configs(), ids=lambda p: p.name)
def test_each_example_is_valid_json_pointing_at_a_real_command(path: Path) -> None:
    config = json.loads(path.read_text(encoding="utf-8"))
    servers = config.get("mcpServers") or config.get("servers")
    assert servers and "memory" in servers
    server = servers["memory"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    if "url" in server:
        assert server["url"].endswith("/mcp") and server["headers"]["Authorization"].startswith("Bearer ")
        return
    assert "MEMORY_FILE_PATH" in json.dumps(server)
    command = server["command"]
    if command == "memory-graph":
        assert command in scripts and (shutil.which(command) or (Path(sys.executable).parent / command).exists())
    elif command == "uvx":
        assert server["args"][0] == "--from" and server["args"][2] in scripts
    elif command == "docker":
        assert server["args"][:2] == ["run", "-i"] and server["args"][-1] == "memory-graph"
        assert "-v" in server["args"] and any(a.endswith(":/data") for a in server["args"])
    else:
        pytest.fail(f"{path.name}: unexpected command {command}")


def test_the_claude_code_example_adds_the_console_script() -> None:
    script = (ROOT / "examples" / "claude-code.sh").read_text(encoding="utf-8")
    assert re.search(r"claude mcp add memory .*MEMORY_FILE_PATH=.* -- memory-graph$", script, re.MULTILINE)


def test_the_team_compose_example_runs_postgres_and_two_servers_behind_the_token() -> None:
    text = (ROOT / "examples" / "compose.yaml").read_text(encoding="utf-8")
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert "image: docker.io/library/postgres:15" in text and "condition: service_healthy" in text
    assert re.search(r"^  memory-a: &memory-server$", text, re.MULTILINE)
    assert re.search(r"^  memory-b:\n    <<: \*memory-server$", text, re.MULTILINE)
    assert "MEMORY_DATABASE_URL: postgresql://memory:${POSTGRES_PASSWORD}@postgres:5432/memory" in text
    assert "MEMORY_AUTH_TOKEN: ${MEMORY_AUTH_TOKEN:?" in text  # compose refuses to start without a token
    assert "EXTRAS: postgres" in text and 'ARG EXTRAS=""' in dockerfile and "$extras" in dockerfile
    assert '"8001:8000"' in text and '"8002:8000"' in text and '"--host", "0.0.0.0"' in text
