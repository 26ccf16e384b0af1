"""Projects: named stores, one per repository or topic, chosen per connection.

A project's store is a folder of its own (`projects/<name>/` beside the default memory file) or a store of its own
in the database; lessons are shared by every project unless MEMORY_LESSONS=project. This module holds the rules
that are not configuration: how `MEMORY_PROJECT=auto` turns a folder into a stable project name, and which
projects exist (and which a connection may see). It imports no protocol: the MCP adapter asks the client for its
roots and hands the folders here.
"""

from __future__ import annotations

import hashlib
import logging
import ntpath
import os
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePath
from urllib.parse import unquote, urlparse

from pydantic import BaseModel, Field

from memory_graph.app import Services
from memory_graph.config import DEFAULT_STORE, PROJECT_NAME, RESERVED_PROJECTS, Settings
from memory_graph.errors import ConflictError, InvalidInputError, NotFoundError
from memory_graph.graph import ImportSummary
from memory_graph.storage import folder_usage

log = logging.getLogger(__name__)
ALLOWED_PROJECTS = "memory_graph.allowed_projects"
"""The key under which the HTTP transport hands a request's allowed projects to list_projects (in the ASGI scope)."""


@dataclass(frozen=True)
class ChosenProject:
    name: str
    folder: Path
    how: str  # "the client's root ..." or "the git repository of the working directory ..."


def repository_top(folder: Path) -> Path | None:
    """The top folder of the git repository holding `folder` (a `.git` folder or file, as worktrees have), or
    None outside any repository."""
    current = folder.resolve()
    for candidate in (current, *current.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def name_for_folder(folder: PurePath, normcase: Callable[[str], str] = os.path.normcase) -> str:
    """A stable, valid project name for a folder: its name made safe, and a short hash of its full path, so two
    checkouts called `app` in different places never share a memory."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", folder.name.lower()).strip("-._")[:40] or "project"
    # One case where the file system has one (os.path.normcase: Windows), so C:\App and c:\app are one project.
    digest = hashlib.sha1(normcase(str(folder)).encode("utf-8", "surrogateescape")).hexdigest()[:8]
    name = f"{slug}-{digest}"
    return name if PROJECT_NAME.fullmatch(name) and name.lower() not in RESERVED_PROJECTS else f"project-{digest}"


def path_of_file_uri(uri: str, windows: bool) -> str | None:
    """The local path a file:// URI names, as Windows (`windows`) or POSIX spells it, or None when it names none:
    another scheme, a relative path, or (on POSIX) a folder of another host. Pure, so both are tested anywhere.

    Unquoted first (`file:///c%3A/...`), then: Windows drops the slash before a drive (`/C:/x` is `C:\\x`) and keeps
    a host as a UNC share (`file://server/share` is `\\\\server\\share`); POSIX has no shares, so a host other
    than localhost is refused rather than read as a local folder of the same path."""
    parsed = urlparse(uri)
    if parsed.scheme.lower() != "file":
        return None
    host = "" if parsed.netloc.lower() == "localhost" else parsed.netloc
    path = unquote(parsed.path)
    if not windows:
        return path if not host and posixpath.isabs(path) else None
    if host:
        path = f"//{host}{path}"
    elif re.match(r"/[A-Za-z][:|]", path):
        path = f"{path[1]}:{path[3:] or '/'}"
    path = ntpath.normpath(path)
    return path if ntpath.isabs(path) and (ntpath.splitdrive(path)[0] or path.startswith("\\\\")) else None


def folder_of_root(uri: str) -> Path | None:
    path = path_of_file_uri(uri, windows=os.name == "nt")
    return None if path is None else Path(path)


def choose_project(root_uris: list[str], cwd: Path) -> ChosenProject:
    """MEMORY_PROJECT=auto: the client's first folder root (its repository's top when inside one), else the
    working directory's repository. Never a default: with neither, the caller gets an error saying what to set."""
    for uri in root_uris:
        folder = folder_of_root(uri)
        if folder is None:
            log.warning("the client's root %s is not a folder of this machine (file:///...); skipped", uri)
            continue
        top = repository_top(folder) or folder.resolve()
        return ChosenProject(name_for_folder(top), top, f"the client's root {uri}")
    repository = repository_top(cwd)
    if repository is not None:
        how = f"the git repository of the working directory {cwd}"
        return ChosenProject(name_for_folder(repository), repository, how)
    sent = "none of the client's roots is a folder of this machine" if root_uris else "the client sent no roots"
    raise InvalidInputError(
        f"MEMORY_PROJECT=auto could not choose a project: {sent} and the working "
        f"directory {cwd} is not inside a git repository. Nothing was read or written. Set MEMORY_PROJECT to a "
        "project name (for example MEMORY_PROJECT=my-app), or unset it to use the default store."
    )


class ProjectInfo(BaseModel):
    name: str = Field(description="The project's name ('default' is the store used without MEMORY_PROJECT)")
    records: int | None = Field(default=None, description="Entities, relations and lessons held (PostgreSQL)")
    bytes: int = Field(description="Size of its data")
    lastChange: str | None = Field(default=None, description="When it last changed (UTC ISO 8601); absent if never")
    current: bool = Field(default=False, description="Whether this connection uses it")


class Projects(BaseModel):
    projects: list[ProjectInfo]
    current: str | None = Field(default=None, description="This connection's project; absent for the default store")
    lessons: str = Field(description="'shared' (one lesson store for every project) or 'project'")


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def project_folders(settings: Settings) -> dict[str, Path]:
    """The named stores of this memory file's data folder by name, sorted: the one place that looks for them (its
    `Settings.projects_folder`)."""
    projects = settings.projects_folder
    names = sorted(p.name for p in projects.iterdir() if p.is_dir()) if projects.is_dir() else []
    return {n: projects / n for n in names if PROJECT_NAME.fullmatch(n) and n.lower() not in RESERVED_PROJECTS}


def known_projects(settings: Settings) -> list[str]:
    """The named stores that exist (have been written, or at least opened), sorted; `default` is not among them."""
    if settings.database_url is not None:
        from memory_graph.storage import store_usage

        return sorted(name for name in store_usage(settings.database_url) if name != DEFAULT_STORE)
    return list(project_folders(settings))


def is_new(settings: Settings) -> bool:
    """Whether these settings name a project that does not exist yet (opening it will make it)."""
    return settings.project is not None and settings.project not in known_projects(settings)


def require_known(
    settings: Settings, source: str, remedy: str = "a project is made by its first write, such as an import"
) -> None:
    """Refuse a project that does not exist where a command would only read it (or should not make it): a mistyped
    name would answer as an empty store, and leave that empty project behind. `source` names where the name came
    from, `remedy` how to make the project on purpose."""
    if not is_new(settings):
        return
    known = ", ".join([DEFAULT_STORE, *known_projects(settings)])
    raise NotFoundError(f"{source} {settings.project}: no project {settings.project!r}; known: {known} ({remedy})")


def earlier_projects_note(settings: Settings) -> str | None:
    """Before a memory file not called `memory.json` had a projects folder of its own, its projects were kept in
    `projects/`, shared with every memory of that folder: said at start, so they can be moved, not lost from view."""
    if settings.database_url is not None:
        return None
    own = settings.projects_folder
    shared = own.with_name("projects")
    if own == shared or own.exists() or not shared.is_dir() or own.with_name("memory.json").exists():
        return None  # (beside memory.json, projects/ is memory.json's)
    home = settings.home_files[0] if settings.home_files else settings.memory_file
    return (
        f"the projects of {home.name} are kept in {own}/ (before, in {shared}/, shared by every memory file of "
        f"that folder); move the ones that are {home.name}'s there: mv {shared}/<name> {own}/"
    )


def list_projects(settings: Settings, allowed: frozenset[str] | None = None) -> Projects:
    """Every store of this data folder (or database), `default` first; only `allowed` ones when given."""
    current = settings.project
    found: list[ProjectInfo] = []
    if settings.database_url is not None:
        from memory_graph.storage import store_usage

        usage = store_usage(settings.database_url)
        for name in sorted(usage, key=lambda n: (n != DEFAULT_STORE, n)):
            records, size, changed = usage[name]
            found.append(ProjectInfo(name=name, records=records, bytes=size, lastChange=_iso(changed)))
        if DEFAULT_STORE not in usage:
            found.insert(0, ProjectInfo(name=DEFAULT_STORE, records=0, bytes=0))
    else:
        base = settings.for_project(None)
        size, changed = folder_usage(base.data_folder, (base.memory_file.stem, base.history_file.stem))
        lesson_size, lesson_changed = folder_usage(base.lesson_file.parent, (base.lesson_file.stem,))
        newest = max(filter(None, (changed, lesson_changed)), default=None)
        found.append(ProjectInfo(name=DEFAULT_STORE, bytes=size + lesson_size, lastChange=_iso(newest)))
        for name, folder in project_folders(settings).items():
            size, changed = folder_usage(folder)
            found.append(ProjectInfo(name=name, bytes=size, lastChange=_iso(changed)))
    if current is not None and all(p.name != current for p in found):
        found.append(ProjectInfo(name=current, bytes=0, lastChange=None))  # chosen, nothing written yet
    for project in found:
        project.current = project.name == (current or DEFAULT_STORE)
    visible = [p for p in found if allowed is None or p.name in allowed]
    return Projects(projects=visible, current=current, lessons=settings.lessons_scope)


@dataclass(frozen=True)
class MovedEntity:
    name: str
    relations_moved: int
    relations_left: list[str]  # relations whose other end the target lacks: deleted with the entity, in the history


def move_entity(source: Services, target: Services, name: str) -> MovedEntity:
    """Move an entity (its observations, and the relations whose other end the target holds) from one project's
    store to another's: created in the target first, then deleted from the source, so a failure in between leaves
    a copy in both, never none. Lessons are shared by every project and are not moved."""
    found = source.graph.open_nodes([name])
    entity = next((e for e in found.entities if e.name == name), None)
    if entity is None:
        raise NotFoundError(f"{name!r} is not an entity of {source.store.location}; names are exact and case-sensitive")
    if entity.entityType == "lesson" or source.lessons.records.get(name) is not None:
        raise ConflictError(f"{name!r} is a lesson; lessons are shared by every project and are not moved")
    if found.truncated is not None:
        raise ConflictError(
            f"{name!r} has more relations than one read returns; raise MEMORY_MAX_RESPONSE_CHARS for this command"
        )
    with target.store.reading():
        taken = target.graph.entity_type(name) is not None
    if taken:
        raise ConflictError(f"{target.store.location} already has an entity {name!r}; rename or merge one first")
    # The stored record as it is, through the importer (a write that keeps every field, and refuses a lesson's
    # name): copied through the Entity model, fields such as createdAt and tags were dropped.
    record = source.graph.entity_record(name)
    if record is None:
        raise NotFoundError(f"{name!r} is not an entity of {source.store.location}; names are exact and case-sensitive")
    summary = ImportSummary()
    target.graph.import_entities([record], summary)
    if summary.entities != 1:
        reason = "; ".join(summary.problems) or "the name was taken meanwhile"
        raise ConflictError(f"{name!r} could not be created in {target.store.location} ({reason}); nothing was moved")
    ends = {r.to if r.from_ == name else r.from_ for r in found.relations}
    # (Each end looked up, not read: a read is cut to the response budget, and an end left out of it would count as
    # missing, its relation deleted.)
    with target.store.reading():
        present = {end for end in ends if target.graph.entity_type(end) is not None} | {name}
    moving = [r for r in found.relations if r.from_ in present and r.to in present]
    target.graph.create_relations(moving)
    source.graph.delete_entities([name])
    left = [f"{r.from_} -{r.relationType}-> {r.to}" for r in found.relations if r not in moving]
    return MovedEntity(name, len(moving), left)
