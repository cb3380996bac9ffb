"""llama-bench's depth states kept across processes for `bench:decode` (issue 37, patches/local/0010).

llama-bench prefills each depth once per process; patchkit runs one process per binary and round, so every
round prefilled again. With the local test-only patch 0010 a process first loads a depth from a file of the
folder LLAMA_BENCH_DEPTH_STATE_DIR names and saves the depths it prefilled there. The step gives each arm
(binary and label: base's A/A copy is an arm of its own) one folder per model and cache types, so that every
arm prefills in its first round and loads in later ones alike; the folders live in the work folder and are
removed when the step ends (a state is large: about 0.6 GB at depth 122880 on the synthetic model)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from patchkit.workspace import pid_alive

ENV = "LLAMA_BENCH_DEPTH_STATE_DIR"
PATCH = "0010-llama-bench-depth-state-dir.patch"  # the recipe lists it: its binaries read ENV


def listed(series: Sequence) -> bool:
    """The recipe's series has the patch (any folder, any id: by its file name)."""
    return any(Path(p.file).name == PATCH for p in series)


def _arg(argv: Sequence[str], flag: str) -> str:
    argv = [str(a) for a in argv]
    return argv[argv.index(flag) + 1] if flag in argv[:-1] else ""


def _model_id(model: str) -> str:
    """The model file as it is now: its resolved path, size and modification time."""
    p = Path(model)
    try:
        st = p.stat()
    except OSError:
        return str(p)
    return f"{p.resolve()}:{st.st_size}:{st.st_mtime_ns}"


def key(label: str, build_key: str, argv: Sequence[str]) -> str:
    """An arm's folder name for one llama-bench command line: its label, its binary's build key, the model file
    (-m) and the cache types (-ctk, -ctv)."""
    parts = [label, build_key, _model_id(_arg(argv, "-m")), _arg(argv, "-ctk") or "f16", _arg(argv, "-ctv") or "f16"]
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    return f"{label.replace('#', '_aa').replace('/', '_')}-{digest}"


@dataclass(frozen=True)
class States:
    """Where a step's arms keep their depth states (`root`: None, the variable set empty: each process prefills)."""

    root: Path | None = None

    def env(self, label: str, build_key: str, argv: Sequence[str]) -> dict[str, str]:
        """The environment of one llama-bench process of arm `label` (binary `build_key`)."""
        if self.root is None:
            return {ENV: ""}
        return {ENV: str(self.root / key(label, build_key, argv))}

    def make(self, env: dict[str, str]) -> None:
        if env.get(ENV):
            Path(env[ENV]).mkdir(parents=True, exist_ok=True)


@contextmanager
def states(work: Path | None) -> Iterator[States]:
    """A step's depth-state folders under `work` (the work folder; None: none kept), removed at the end."""
    if work is None:
        yield States()
        return
    root = work / "depth-state" / f"{os.getpid()}-{time.time_ns()}"
    for old in root.parent.glob("*-*") if root.parent.is_dir() else ():  # a killed step's: its process is gone
        pid = old.name.split("-")[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    try:
        yield States(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        with contextlib.suppress(OSError):
            root.parent.rmdir()  # the last step's: an empty depth-state/ goes too
