"""The sweep folder, `<work>/sweeps/<recipe>/<sweep name>/`, and each point's stored result.

  sweep.json              the plan: spec, start variant (key, head), archs, units, every point
  points/<point>.json     one point's results, written atomically when each stage finishes:
                          {key, name, values, reference, commit, check: {arch: ...}, timing: {rung: ...}}
  patches/<point>.patch   each point's patch (git am applies it on the start variant)
  tree/ tree-<k>/         the sweep's own worktrees of the cache repo (one per compile lane), moved point to point
  build-<arch>[-<k>]/     their CMake build folders per compile-check architecture
  objects/<point>/        the objects of the measured arch's check (linked into the point's binary)
  bin/<point>/            the point's test-backend-ops, linked in the start variant's build folder
  gpu/                    a run folder: raw logs of the correctness and timing runs
  logs/                   configure and compile logs
  out/                    sweep.md, heatmap.png, best.patch, section.md (made from the stored results)

A stored result is used only while its key is the point's key: a changed input (base, start
variant, header, values) makes a new key and the old result is set aside, never served.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from patchkit.build.table import format_value
from patchkit.sweep.points import Plan, Point
from patchkit.workspace import Workspace, read_json, safe_component, write_atomic, write_json


@dataclass(frozen=True)
class Store:
    root: Path

    @classmethod
    def of(cls, ws: Workspace, recipe: str, name: str) -> Store:
        return cls(ws.sweeps(recipe) / safe_component(name, "sweep name"))

    @property
    def plan_file(self) -> Path:
        return self.root / "sweep.json"

    @property
    def tree(self) -> Path:
        return self.root / "tree"

    def build_dir(self, arch: str, lane: int = 0) -> Path:
        name = f"build-{safe_component(arch, 'arch')}"
        return self.root / (f"{name}-{lane}" if lane else name)

    def lane_tree(self, lane: int) -> Path:
        return self.tree if lane == 0 else self.root / f"tree-{lane}"

    def objects(self, point: str) -> Path:
        """The kept objects of a point's compile check for the measured build's arch."""
        return self.root / "objects" / safe_component(point, "point name")

    def bin_dir(self, point: str) -> Path:
        """The point's linked test-backend-ops (the measured binary)."""
        return self.root / "bin" / safe_component(point, "point name")

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def out(self) -> Path:
        return self.root / "out"

    def record_file(self, name: str) -> Path:
        return self.root / "points" / f"{safe_component(name, 'point name')}.json"

    def patch_file(self, name: str) -> Path:
        return self.root / "patches" / f"{safe_component(name, 'point name')}.patch"

    def rel(self, path: Path) -> str:
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else str(path)

    # --- point records

    def record(self, point: Point) -> dict:
        """The stored record of this point (its key checked); a fresh one when none or stale."""
        f = self.record_file(point.name)
        if f.is_file():
            data = read_json(f)
            if isinstance(data, dict) and data.get("key") == point.key:
                return data
        return {
            "key": point.key,
            "name": point.name,
            "values": point.values,
            "reference": point.reference,
            "check": {},
            "timing": {},
        }

    def save(self, record: dict) -> None:
        write_json(self.record_file(record["name"]), record)

    def write_patch(self, point: Point) -> Path | None:
        if point.reference:
            return None
        f = self.patch_file(point.name)
        if not f.is_file() or f.read_bytes() != point.patch:
            write_atomic(f, point.patch)
        return f

    def load_plan(self) -> dict:
        data = read_json(self.plan_file)
        assert isinstance(data, dict)
        return data

    def load_records(self, plan: dict) -> dict[str, dict]:
        """name -> stored record of every point of `plan` whose key matches (others are left out)."""
        out = {}
        for p in plan["points"]:
            f = self.record_file(p["name"])
            if f.is_file():
                data = read_json(f)
                if isinstance(data, dict) and data.get("key") == p["key"]:
                    out[p["name"]] = data
        return out


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def plan_json(
    plan: Plan,
    *,
    recipe: str,
    base: str,
    start: dict,
    header: str,
    archs: tuple[str, ...],
    rungs: list[str],
) -> dict:
    """sweep.json: what the outputs are made from, besides the point records."""
    spec = plan.spec
    return {
        "name": spec.name,
        "recipe": recipe,
        "spec": _jsonable(asdict(spec)),
        "base": base,
        "start": start,  # variant, key, head
        "row": {
            "line": plan.row.line,
            "text": header.splitlines()[plan.row.line - 1].strip(),
            "key": ", ".join(f"{k}={format_value(v)}" for k, v in spec.row.items()),
        },
        # JSON objects are written with sorted keys: the order of the parameters is kept here
        "params": [[k, list(vs)] for k, vs in spec.params.items()],
        "named": list(plan.reference.values),
        "archs": list(archs),
        "combinations": plan.combinations,
        "excluded": plan.excluded,
        "points": [
            {"name": x.name, "key": x.key, "values": x.values, "reference": x.reference, "row": x.row}
            for x in plan.points
        ],
        "rungs": rungs,
    }
