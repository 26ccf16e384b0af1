"""Project hygiene: lint and format clean, layering, docs that stay true."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memory_graph.config import ENVIRONMENT

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOMAIN = [
    "memory_graph/app.py",
    "memory_graph/export.py",
    "memory_graph/model.py",
    "memory_graph/graph.py",
    "memory_graph/search.py",
    "memory_graph/errors.py",
    "memory_graph/config.py",
    "memory_graph/storage",
    "lessons",
]


def python_files(*parts: str) -> list[Path]:
    found: list[Path] = []
    for part in parts:
        path = ROOT / part
        found.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return found


@pytest.mark.parametrize("command", [["check", "."], ["format", "--check", "."]])
def test_ruff_is_clean(command: list[str]) -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    run = subprocess.run([ruff, *command], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_type_checker_is_clean() -> None:
    mypy = shutil.which("mypy") or str(Path(sys.executable).parent / "mypy")
    run = subprocess.run([mypy], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


def test_domain_code_never_imports_the_protocol() -> None:
    for path in python_files(*DOMAIN):
        if not path.exists():
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            modules = []
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            for module in modules:
                assert module.split(".")[0] not in ("mcp", "starlette", "uvicorn"), f"{path} imports {module}"


def imported_modules(path: Path) -> list[str]:
    modules: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.extend([node.module, *(f"{node.module}.{a.name}" for a in node.names)])
    return modules


def test_nothing_outside_storage_reaches_into_its_modules() -> None:
    """`memory_graph.storage` is one package with one face (its __init__); its modules are its own business."""
    storage = ROOT / "memory_graph" / "storage"
    outside = [p for p in python_files("memory_graph", "lessons", "tests", "bench") if storage not in p.parents]
    offenders = [
        f"{p.relative_to(ROOT)} imports {m}"
        for p in outside
        for m in imported_modules(p)
        if m.startswith("memory_graph.storage.")
        and m.count(".") >= 2
        and m.removeprefix("memory_graph.storage.").split(".")[0] in {q.stem for q in storage.glob("*.py")}
    ]
    assert offenders == []


def test_lessons_see_the_graph_only_through_its_read_interface() -> None:
    """lessons/ may use the graph's collection names and import summary, never GraphService or its state."""
    for path in python_files("lessons"):
        for module in imported_modules(path):
            assert module not in ("memory_graph.graph.GraphService", "memory_graph.graph.GraphState"), path


def test_admin_commands_do_not_import_the_protocol(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from memory_graph.cli import main\n"
        "code = main(['stats'])\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'starlette', 'uvicorn'))\n"
        "assert code == 0 and not loaded, loaded\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "MEMORY_FILE_PATH": str(tmp_path / "memory.json")}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]


def test_only_the_config_module_reads_the_environment() -> None:
    offenders = [
        str(p.relative_to(ROOT))
        for p in python_files("memory_graph", "lessons")
        if p.name != "config.py" and re.search(r"os\.environ|os\.getenv", p.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_every_environment_variable_is_in_the_readme_table() -> None:
    source = (ROOT / "memory_graph" / "config.py").read_text(encoding="utf-8")
    read = set(re.findall(r'(?:env\.get\(|_int\(env, )"([A-Z_]+)"', source))
    assert read == set(ENVIRONMENT), "config.py reads a variable ENVIRONMENT does not describe, or the reverse"
    for name in ENVIRONMENT:
        assert re.search(rf"^\| `{name}` \|", README, re.MULTILINE), f"{name} is missing from the README table"


def test_every_tool_is_in_the_readme() -> None:
    from memory_graph.config import Settings
    from memory_graph.server import build_app

    app = build_app(Settings.from_env({"MEMORY_FILE_PATH": str(ROOT / ".pytest-docs" / "m.json")}, cwd=ROOT))
    tools = [t.name for t in app.server._tool_manager.list_tools()]
    shutil.rmtree(ROOT / ".pytest-docs", ignore_errors=True)
    assert tools
    for tool in tools:
        assert f"`{tool}`" in README, f"tool {tool} is not documented in the README"


def test_quick_start_has_two_commands_and_ci_runs_the_test_one() -> None:
    section = README.split("## Quick start", 1)[1].split("##", 1)[0]
    commands = [line for line in section.split("```bash", 1)[1].split("```", 1)[0].splitlines() if line.strip()]
    assert len(commands) == 2
    test_command = commands[1].split("#", 1)[0].strip()
    assert test_command in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
