"""Finished measurements found by their key, so no run repeats one: a tool run whose result depends
only on the binary and its arguments (a test-backend-ops test run: pass/fail per case) is kept in the
work folder's cache under the sha256 of (the variant's build key, the tool's arguments); a later run
with the same key copies that raw log into its own raw/ (first line: where it came from) instead of
running the tool, and its step says which variants were reused. Timings are never reused: every
comparison of times is measured in one session, interleaved.

A step reuses through `Finished` (one per tool run): `finished(cache, build_key, tool, args)`, then `take`
(the cached log copied in as this run's raw log, or None: run the tool) and `keep` once a run's log is good.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from patchkit import proc
from patchkit.parsers.rawlog import REUSED
from patchkit.results import Bundle
from patchkit.workspace import write_atomic


def key(build_key: str, tool: str, args: tuple[str, ...]) -> str:
    return hashlib.sha256(json.dumps([build_key, tool, list(args)]).encode()).hexdigest()


def lookup(cache: Path, k: str) -> tuple[Path, str] | None:
    """The cached log of key `k` and the run log it was first written as, if there is one."""
    meta = cache / f"{k}.json"
    if not meta.is_file():
        return None
    try:
        origin = json.loads(meta.read_text())["origin"]
    except (ValueError, KeyError):
        return None
    log = cache / f"{k}.log"
    return (log, origin) if log.is_file() else None


def store(cache: Path, k: str, bundle: Bundle, log: Path) -> None:
    """Keep a finished tool run's log (and its stderr log) under its key."""
    cache.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(log, cache / f"{k}.log")
    err = proc.stderr_log(log)
    if err.is_file():
        shutil.copyfile(err, proc.stderr_log(cache / f"{k}.log"))
    write_atomic(cache / f"{k}.json", json.dumps({"origin": f"{bundle.path.name}/{bundle.rel(log)}"}))


def copy_into(cached: Path, origin: str, dest: Path) -> None:
    """The cached log as this run's raw log: the command line first as always, then where it came from."""
    text = cached.read_text(encoding="utf-8", errors="replace")
    first, _, rest = text.partition("\n")
    write_atomic(dest, f"{first}\n{REUSED}{origin}\n{rest}")
    err = proc.stderr_log(cached)
    if err.is_file():
        shutil.copyfile(err, proc.stderr_log(dest))


@dataclass(frozen=True)
class Finished:
    """A tool run that may have been made before: its cache and key ('' when it cannot be reused: no cache,
    or a variant without a build key)."""

    cache: Path | None
    key: str

    def take(self, bundle: Bundle, name: str) -> tuple[Path, str] | None:
        """(this run's raw log `name`, the run log it came from) when the run was made before, else None."""
        hit = lookup(self.cache, self.key) if self.cache and self.key else None
        if hit is None:
            return None
        log = bundle.raw_log(name)
        copy_into(*hit, log)
        return log, hit[1]

    def keep(self, bundle: Bundle, log: Path) -> None:
        """Keep a good log of this run for later runs (not when re-deriving a step from its logs)."""
        if self.cache and self.key and not bundle.replay:
            store(self.cache, self.key, bundle, log)


def finished(cache: Path | None, build_key: str, tool: str, args: tuple[str, ...]) -> Finished:
    return Finished(cache, key(build_key, tool, args) if cache and build_key else "")
