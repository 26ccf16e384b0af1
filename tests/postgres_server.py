"""A throwaway PostgreSQL server for the tests: `initdb` into a temporary folder, `pg_ctl start` on a free
loopback port, `pg_ctl stop` and the folder deleted at the end. No mocks: the PostgreSQL engine is tested
against the real thing.

`.ci/run` starts one with `python tests/postgres_server.py start` (it prints `export` lines for the URL and the
data folder) and stops it with `... stop`; without `MEMORY_TEST_DATABASE_URL` the tests start their own.
PostgreSQL refuses to run as root, so as root every server command runs as the `postgres` user.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

CANDIDATE_BIN_DIRS = [Path(f"/usr/lib/postgresql/{v}/bin") for v in (15, 16, 17, 14)]


def bin_dir() -> Path | None:
    """Where initdb and pg_ctl are (Debian's versioned folder, else the PATH)."""
    for folder in CANDIDATE_BIN_DIRS:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    found = shutil.which("pg_ctl")
    return Path(found).resolve().parent if found and shutil.which("initdb") else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


@dataclass
class PostgresServer:
    data_dir: Path
    port: int
    bin: Path

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = _as_server_user([str(self.bin / "pg_ctl"), "-D", str(self.data_dir), *args])
        return subprocess.run(command, capture_output=True, text=True, check=check, timeout=120)

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' "
            "-c max_connections=200 -c fsync=on -c shared_buffers=128MB"
        )
        self._pg_ctl("-w", "-t", "60", "-l", str(self.data_dir / "server.log"), "-o", options, "start")

    def stop(self, mode: str = "fast") -> None:
        self._pg_ctl("-w", "-m", mode, "stop", check=False)

    def restart(self) -> None:
        self.stop()
        self.start()

    def remove(self, mode: str = "fast") -> None:
        """Stop the server and delete its folder (`create`'s, holding the data folder): a cluster is about 55 MB,
        and one left in the temporary folder by every test session added up to gigabytes."""
        self.stop(mode)
        for _ in range(50):
            if not (self.data_dir / "postmaster.pid").exists():
                break
            time.sleep(0.1)
        shutil.rmtree(self.data_dir.parent, ignore_errors=True)


def create(base: Path | None = None) -> PostgresServer:
    """A new cluster in a fresh folder, started; raises RuntimeError saying what is missing."""
    binaries = bin_dir()
    if binaries is None:
        raise RuntimeError(
            "PostgreSQL's initdb and pg_ctl were not found (apt-get install -y postgresql, or set "
            "MEMORY_TEST_DATABASE_URL to a server the tests may use)"
        )
    root = Path(tempfile.mkdtemp(prefix="memory-graph-pg-", dir=base))
    data_dir = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        root.chmod(0o755)
    subprocess.run(
        _as_server_user(
            [str(binaries / "initdb"), "-D", str(data_dir), "-U", "postgres", "--auth=trust", "-E", "UTF8"]
        ),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    server = PostgresServer(data_dir, free_port(), binaries)
    server.start()
    return server


def main(argv: list[str]) -> int:
    if argv[:1] == ["start"]:
        server = create()
        print(f"export MEMORY_TEST_DATABASE_URL={server.url}")
        print(f"export MEMORY_TEST_PGDATA={server.data_dir}")
        print(f"export MEMORY_TEST_PGPORT={server.port}")
        return 0
    if argv[:1] == ["stop"]:
        data_dir = Path(os.environ["MEMORY_TEST_PGDATA"])
        binaries = bin_dir()
        if binaries is not None and data_dir.exists():
            PostgresServer(data_dir, int(os.environ.get("MEMORY_TEST_PGPORT", "0")), binaries).remove()
        return 0
    print("usage: postgres_server.py start|stop", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
