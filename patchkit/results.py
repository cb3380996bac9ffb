"""Results bundles: one folder per run, written step by step so an interrupted run resumes.

    runs/<recipe>/<run_id>/
      env.json        the environment fingerprint (patchkit.env)
      raw/            one log per command, its first line the command line
      results.json    {"schema", "recipe", "run_id", "created", "base", "variants", "steps": {name: Step}}

A step is written atomically when it ends; a finished step (ok or fail) is skipped on rerun, an
errored or missing one is run again. Nothing earlier is overwritten: a new run gets a new folder,
and a step's raw logs get new names if the step is redone.
"""

from __future__ import annotations

import datetime as _dt
import enum
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from patchkit.errors import ResultsError
from patchkit.workspace import read_json, write_json

SCHEMA = 1


class Status(str, enum.Enum):
    OK = "ok"  # ran, and everything it checks passed
    FAIL = "fail"  # ran, and something it checks failed (a test failure, a build error)
    NOT_RUN = "not_run"  # nothing ran (no backend, nothing matched, not asked for); reason says why
    ERROR = "error"  # patchkit or the tool broke (crash, timeout); rerun redoes it

    def __str__(self) -> str:
        return self.value


@dataclass(kw_only=True)
class Step:
    name: str
    status: Status
    reason: str = ""
    seconds: float = 0.0
    finished: str = ""
    logs: list[str] = field(default_factory=list)  # paths relative to the run folder
    data: dict[str, Any] = field(default_factory=dict)

    def serialize(self) -> dict:
        d = asdict(self)
        d["status"] = self.status.value
        return d

    @classmethod
    def load(cls, d: dict) -> Step:
        return cls(**{**d, "status": Status(d["status"])})

    @property
    def done(self) -> bool:
        return self.status in (Status.OK, Status.FAIL, Status.NOT_RUN)


def new_run_id(label: str = "") -> str:
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{now}-{label}" if label else now


@dataclass
class Bundle:
    """A run folder and its results.json."""

    path: Path
    data: dict[str, Any]

    @classmethod
    def create(cls, runs_dir: Path, *, recipe: str, run_id: str, meta: dict[str, Any]) -> Bundle:
        path = runs_dir / run_id
        if (path / "results.json").exists():
            raise ResultsError(f"{path}: run folder exists; resume it with --run {run_id}")
        (path / "raw").mkdir(parents=True, exist_ok=True)
        data = {
            "schema": SCHEMA,
            "recipe": recipe,
            "run_id": run_id,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            **meta,
            "steps": {},
        }
        b = cls(path=path, data=data)
        b.save()
        return b

    @classmethod
    def open(cls, path: Path) -> Bundle:
        f = path / "results.json"
        if not f.is_file():
            raise ResultsError(f"{f}: no results.json (not a patchkit run folder)")
        try:
            data = read_json(f)
        except ValueError as e:
            raise ResultsError(f"{f}: not valid JSON: {e}") from None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ResultsError(
                f"{f}: unknown results schema {data.get('schema') if isinstance(data, dict) else None!r} (expected {SCHEMA})"
            )
        return cls(path=path, data=data)

    def save(self) -> None:
        write_json(self.path / "results.json", self.data)

    @property
    def raw(self) -> Path:
        return self.path / "raw"

    replay: bool = False  # re-derive steps from the raw logs already here instead of running tools

    def raw_log(self, name: str) -> Path:
        """A fresh log path under raw/ (never an existing file: a redone step keeps the old log);
        when replaying, the existing log of that name."""
        safe = re.sub(r"[^A-Za-z0-9_.+=-]+", "_", name)
        p = self.raw / f"{safe}.log"
        if self.replay:
            return p
        n = 2
        while p.exists():
            p = self.raw / f"{safe}.{n}.log"
            n += 1
        return p

    def rel(self, p: Path) -> str:
        return str(Path(p).resolve().relative_to(self.path.resolve()))

    def step(self, name: str) -> Step | None:
        d = self.data["steps"].get(name)
        return Step.load(d) if d else None

    def record(self, step: Step) -> Step:
        step.finished = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        self.data["steps"][step.name] = step.serialize()
        self.save()
        return step

    def set_meta(self, **kw: Any) -> None:
        self.data.update(kw)
        self.save()

    @property
    def env(self) -> dict[str, Any]:
        f = self.path / "env.json"
        return read_json(f) if f.is_file() else {}  # type: ignore[return-value]


def latest_run(runs_dir: Path) -> Path:
    runs = sorted(p for p in runs_dir.glob("*") if (p / "results.json").is_file())
    if not runs:
        raise ResultsError(f"{runs_dir}: no runs yet (run `patchkit test` or `patchkit bench` first)")
    return runs[-1]
