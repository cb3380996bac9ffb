"""The work folder: where patchkit keeps its cache, variant trees, builds and runs, and its locks.

<work>/                      default ./.patchkit, or $PATCHKIT_WORK, or --work
  cache/sdist/<file>         downloaded sdists (re-verified against the recipe's sha256 on every use)
  cache/sdist-project/       each sdist without .git and its vendored llama.cpp (+ .json record:
                             the sdist sha256 it was cut from, its own sha256): what `wheel` needs
  cache/llama.cpp.git        one bare git repo holding every base (refs/patchkit/bases/*)
  cache/bases/<key>.json     what each base ref is (route, commit, upstream, how it was verified)
  variants/<recipe>/<name>   one git worktree per variant (branch pk/<recipe>/<name>)
  builds/<recipe>/<config>/  tree/ (the one worktree that is rebuilt incrementally), build/ (CMake),
                             bin/<variant>/ (snapshots of finished builds, keyed; see build.py)
  runs/<recipe>/<id>/        results bundles (env.json, raw/, results.json)
  locks/                     one lock file per folder being written
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from patchkit.errors import LockError


@dataclass(frozen=True, kw_only=True)
class Workspace:
    root: Path

    @classmethod
    def at(cls, path: str | os.PathLike | None = None) -> Workspace:
        root = Path(path or os.environ.get("PATCHKIT_WORK") or ".patchkit").resolve()
        return cls(root=root)

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def repo(self) -> Path:
        return self.cache / "llama.cpp.git"

    def sdist(self, filename: str) -> Path:
        return self.cache / "sdist" / filename

    def base_meta(self, key: str) -> Path:
        return self.cache / "bases" / f"{key}.json"

    def variants(self, recipe: str) -> Path:
        return self.root / "variants" / recipe

    def builds(self, recipe: str, config: str) -> Path:
        return self.root / "builds" / recipe / config

    def runs(self, recipe: str) -> Path:
        return self.root / "runs" / recipe

    @contextmanager
    def lock(self, what: Path, *, wait: bool = False) -> Iterator[None]:
        """An exclusive lock on `what` (a folder), held while writing it; a second patchkit fails fast."""
        locks = self.root / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        name = re.sub(
            r"[^A-Za-z0-9_.-]+",
            "_",
            str(what.resolve().relative_to(self.root)) if what.is_relative_to(self.root) else str(what),
        )
        path = locks / f"{name}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                holder = Path(path).read_text().strip() or "another process"
                raise LockError(f"{what}: in use by {holder} (lock {path})") from None
            os.ftruncate(fd, 0)
            os.write(fd, f"patchkit pid {os.getpid()}".encode())
            yield
        finally:
            os.close(fd)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write a file so that a reader sees the old or the new content, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; results and reports are for everyone to read
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, obj: object) -> None:
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: Path) -> object:
    return json.loads(path.read_text(encoding="utf-8"))
