"""The sweep spec: the recipe's `[sweep]` table (or a `--spec FILE` holding one), parsed and checked.

Every bad value is one line naming the file and the key (`SweepError`, exit 2) before anything is
written. What needs the source (that a parameter is a column of the macro, that the row exists, the
type of each column) is checked by `patchkit.sweep.points.plan` against the real header.

Constraints are small expressions over the column names ("nthreads * occupancy <= 512"), parsed
with `ast` and evaluated by walking the tree: names, numbers, true/false, + - * / // %, comparisons,
and/or/not. Nothing else is accepted, nothing is passed to eval.
"""

from __future__ import annotations

import ast
import itertools
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from patchkit import expr
from patchkit.sweep import occupancy as occupancy_spec
from patchkit.sweep.errors import SweepError, hint
from patchkit.workspace import SAFE_RULE, is_safe_component

Value = int | bool

OBJECTIVES = ("geomean", "mean", "max")
STRATEGIES = ("grid", "halving")
# Limits on a sweep's size, checked when the spec is read: each point is a compile of its units, so
# more than this is a typo (`stop = 20000`), not a sweep (the H200 sweep has 31 points)
MAX_RANGE = 1024  # values of one range table
MAX_POINTS = 4096  # grid combinations plus explicit points
DEFAULT_ROUNDS = {"grid": (5,), "halving": (2, 6, 18)}
_ARCH = re.compile(r"\d+[af]?(-real|-virtual)?")
_IDENT = re.compile(r"[A-Za-z_]\w*")

KEYS = (
    "name",
    "file",
    "function",
    "macro",
    "row",
    "params",
    "points",
    "constraints",
    "start",
    "cases",
    "objective",
    "archs",
    "strategy",
    "correctness",
    "heatmap",
    "units",
    "instances",
    "predict",
)


@dataclass(frozen=True, kw_only=True)
class Strategy:
    kind: str  # grid | halving
    rounds: tuple[int, ...]  # grid: (rounds,); halving: the rounds of each rung, increasing
    eta: int = 3  # halving: keep the best 1/eta of the valid points for the next rung


@dataclass(frozen=True, kw_only=True)
class Instances:
    """How a translation unit says which rows it instantiates: `macro(args);` lines (e.g.
    DECL_FATTN_MMA_F16_CASE(256, 256, 1, 8);) and, per row key column, an expression over the macro's
    parameter names (ncols = "ncols1 * ncols2"); key columns not named map to the parameter of the
    same name."""

    macro: str
    key: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class SweepSpec:
    where: str  # "<file>: sweep", the prefix of every message
    name: str
    file: str  # the source file in the llama.cpp tree
    function: str
    macro: str = ""  # the rows' macro; '' = the one #defined macro the function's rows call
    row: dict[str, Value]  # key columns -> values
    params: dict[str, tuple[Value, ...]]  # column -> values (the grid)
    points: tuple[dict[str, Value], ...] = ()  # extra points: columns -> values, the rest as in the row
    constraints: tuple[str, ...] = ()
    start: str  # the variant the sweep starts from, e.g. "+0001"
    cases: str = ""  # test-backend-ops -p regex of the timed cases ('' = the recipe's bench.kernel params)
    objective: str = "geomean"
    archs: tuple[str, ...] = ()  # compile-check archs ('' = the recipe's build.arch)
    strategy: Strategy = field(default_factory=lambda: Strategy(kind="grid", rounds=DEFAULT_ROUNDS["grid"]))
    correctness: str = ""  # FLASH_ATTN_EXT -p regex of the shapes the row affects
    heatmap: tuple[str, ...] = ()  # two parameters; () = the first two with more than one value
    units: str | tuple[str, ...] = "all"  # "all" | "one" | explicit translation units
    instances: Instances | None = None
    predict: occupancy_spec.OccupancySpec | None = None  # predicted occupancy on target GPUs (shown; filter opt-in)
    origins: dict[str, str] = field(default_factory=dict)  # parameter -> where its values came from

    def at(self, *keys: str | int) -> str:
        """'<file>: sweep.params.nthreads' for keys ('params', 'nthreads')."""
        dotted = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys)
        return self.where + dotted

    def param_at(self, name: str) -> str:
        return self.origins.get(name) or self.at("params", name)


def _err(where: str, msg: str) -> SweepError:
    return SweepError(f"{where}: {msg}")


def _value(v: object, where: str) -> Value:
    if isinstance(v, (bool, int)):
        return v
    raise _err(where, f"expected a whole number or true/false, got {type(v).__name__} {v!r}")


def _str(v: object, where: str, *, empty: bool = False) -> str:
    if not isinstance(v, str) or (not empty and not v.strip()):
        raise _err(where, f"expected a non-empty string, got {type(v).__name__} {v!r}")
    return v


def _regex(v: object, where: str) -> str:
    s = _str(v, where, empty=True)
    try:
        re.compile(s)
    except re.error as e:
        raise _err(where, f"not a regular expression: {e}") from None
    return s


def _range(t: Mapping, where: str) -> tuple[int, ...]:
    for k in t:
        if k not in ("start", "stop", "step"):
            raise _err(f"{where}.{k}", f"unknown key{hint(k, ['start', 'stop', 'step'])}")
    nums = {}
    for k in ("start", "stop", "step"):
        if k not in t and k != "step":
            raise _err(where, f"a range needs {k!r} (start, stop, step; stop included)")
        v = t.get(k, 1)
        if not isinstance(v, int) or isinstance(v, bool):
            raise _err(f"{where}.{k}", f"expected a whole number, got {type(v).__name__} {v!r}")
        nums[k] = v
    if nums["step"] < 1:
        raise _err(f"{where}.step", f"expected at least 1, got {nums['step']}")
    count = max(0, (nums["stop"] - nums["start"]) // nums["step"] + 1)
    if count > MAX_RANGE:  # counted before the values are made: a typo in stop is not a hang
        raise _err(
            where,
            f"a range of {count} values (start {nums['start']}, stop {nums['stop']}, step {nums['step']}); "
            f"at most {MAX_RANGE} (a typo in stop or step?)",
        )
    return tuple(range(nums["start"], nums["stop"] + 1, nums["step"]))


def check_size(params: Mapping[str, tuple], npoints: int, where: str) -> None:
    """Refuse a sweep of more than MAX_POINTS points (the grid, every combination of the parameters'
    values, and the explicit points), before any point is made: each point is a compile."""
    grid = math.prod(len(v) for v in params.values()) if params else 0
    if grid + npoints > MAX_POINTS:
        sizes = " x ".join(f"{len(v)} ({k})" for k, v in params.items())
        raise _err(
            where,
            f"{sizes} = {grid} grid points (+ {npoints} explicit); at most {MAX_POINTS}: "
            "narrow a range, or give explicit points",
        )


def _values(v: object, where: str) -> tuple[Value, ...]:
    """A list of values, or a range table {start, stop, step} (stop included)."""
    if isinstance(v, Mapping):
        out = _range(v, where)
    elif isinstance(v, list):
        out = tuple(_value(x, f"{where}[{i}]") for i, x in enumerate(v))
    else:
        out = (_value(v, where),)
    if not out:
        raise _err(where, "no values: the grid is empty")
    kinds = {type(x) for x in out}
    if len(kinds) > 1:
        raise _err(where, f"mixed true/false and numbers: {list(out)!r}")
    return tuple(dict.fromkeys(out))  # each value once, first order kept


def _names(v: object, where: str) -> None:
    if not isinstance(v, Mapping):
        raise _err(where, f"expected a table, got {type(v).__name__}")
    for k in v:
        if not _IDENT.fullmatch(str(k)):
            raise _err(f"{where}.{k}", "not a column name")


# ---------------------------------------------------------------------------------------------
# Constraints: a walk over a checked AST


def parse_expression(text: str, where: str) -> ast.Expression:
    """The checked tree of a constraint or key (patchkit.expr: names, numbers, arithmetic, comparisons, and/or/not)."""
    try:
        return expr.parse(text)
    except expr.ExpressionError as e:
        if e.syntax:
            raise _err(where, f"{text!r}: not an expression ({e.syntax})") from None
        raise _err(where, f"{text!r}: {e.node} is not allowed ({expr.ALLOWED})") from None


expression_names = expr.names
evaluate = expr.evaluate


# ---------------------------------------------------------------------------------------------
# The table


def _strategy(v: object, where: str) -> Strategy:
    if isinstance(v, str):
        if v not in STRATEGIES:
            raise _err(where, f"expected one of {', '.join(STRATEGIES)}, got {v!r}")
        return Strategy(kind=v, rounds=DEFAULT_ROUNDS[v])
    if not isinstance(v, Mapping):
        raise _err(where, f"expected 'grid', 'halving' or a table {{kind, rounds, eta}}, got {type(v).__name__}")
    for k in v:
        if k not in ("kind", "rounds", "eta"):
            raise _err(f"{where}.{k}", f"unknown key{hint(k, ['kind', 'rounds', 'eta'])}")
    kind = v.get("kind", "grid")
    if kind not in STRATEGIES:
        raise _err(f"{where}.kind", f"expected one of {', '.join(STRATEGIES)}, got {kind!r}")
    raw = v.get("rounds", list(DEFAULT_ROUNDS[kind]))
    raw = raw if isinstance(raw, list) else [raw]
    rounds = tuple(raw)
    if not rounds or not all(isinstance(r, int) and not isinstance(r, bool) and r >= 1 for r in rounds):
        raise _err(f"{where}.rounds", f"expected whole numbers of at least 1, got {raw!r}")
    if kind == "grid" and len(rounds) != 1:
        raise _err(f"{where}.rounds", f"a grid has one number of rounds, got {raw!r}")
    if any(b <= a for a, b in itertools.pairwise(rounds)):
        raise _err(f"{where}.rounds", f"each rung needs more rounds than the one before, got {raw!r}")
    eta = v.get("eta", 3)
    if not isinstance(eta, int) or isinstance(eta, bool) or eta < 2:
        raise _err(f"{where}.eta", f"expected a whole number of at least 2, got {eta!r}")
    return Strategy(kind=kind, rounds=rounds, eta=eta)


def _units(v: object, where: str) -> str | tuple[str, ...]:
    if v in ("all", "one"):
        return v  # type: ignore[return-value]
    if isinstance(v, list) and v and all(isinstance(x, str) and x.strip() for x in v):
        return tuple(v)
    raise _err(where, f"expected 'all', 'one' or a list of translation units, got {v!r}")


def _instances(v: object, where: str) -> Instances:
    if not isinstance(v, Mapping):
        raise _err(where, f"expected a table {{macro, key}}, got {type(v).__name__}")
    for k in v:
        if k not in ("macro", "key"):
            raise _err(f"{where}.{k}", f"unknown key{hint(k, ['macro', 'key'])}")
    macro = _str(v.get("macro"), f"{where}.macro")
    key = v.get("key", {})
    _names(key, f"{where}.key")
    for k, e in key.items():
        parse_expression(_str(e, f"{where}.key.{k}"), f"{where}.key.{k}")
    return Instances(macro=macro, key=dict(key))


def _file(v: object, where: str) -> str:
    s = _str(v, where)
    if Path(s).is_absolute() or ".." in Path(s).parts:
        raise _err(
            where, f"{s!r}: expected a path inside the llama.cpp tree, e.g. ggml/src/ggml-cuda/fattn-mma-f16.cuh"
        )
    return s


def _archs(v: object, where: str) -> tuple[str, ...]:
    items = v if isinstance(v, list) else [v]
    out = []
    for i, a in enumerate(items):
        s = str(a) if isinstance(a, int) and not isinstance(a, bool) else _str(a, f"{where}[{i}]")
        for part in re.split(r"[;,\s]+", s):
            if part and not _ARCH.fullmatch(part):
                raise _err(where, f"{part!r} is not a CUDA architecture (e.g. 89, 90)")
            if part:
                out.append(part)
    return tuple(dict.fromkeys(out))


def parse_sweep(mapping: dict, where: str) -> SweepSpec:
    """The [sweep] table `mapping` as a SweepSpec; `where` prefixes every message (e.g. 'recipes/x.toml: sweep')."""
    if not isinstance(mapping, Mapping):
        raise _err(where, f"expected a table, got {type(mapping).__name__}")
    for k in mapping:
        if k not in KEYS:
            raise _err(f"{where}.{k}", f"unknown key{hint(k, KEYS)}")
    for k in ("file", "function", "row", "start"):
        if k not in mapping:
            raise _err(where, f"missing key {k!r}")
    if "params" not in mapping and "points" not in mapping:
        raise _err(where, "missing key 'params' (or 'points'): nothing to sweep")
    function = _str(mapping["function"], f"{where}.function")
    if not _IDENT.fullmatch(function):
        raise _err(f"{where}.function", f"{function!r} is not a function name")
    row = mapping["row"]
    _names(row, f"{where}.row")
    if not row:
        raise _err(f"{where}.row", "empty: name the row by its key columns, e.g. {DKQ = 256, DV = 256, ncols = 8}")
    params_raw = mapping.get("params", {})
    _names(params_raw, f"{where}.params")
    params = {k: _values(v, f"{where}.params.{k}") for k, v in params_raw.items()}
    for k in params:
        if k in row:
            raise _err(
                f"{where}.params.{k}", "is a key column of the row (key 'row'); a sweep changes the other columns"
            )
    points_raw = mapping.get("points", [])
    if not isinstance(points_raw, list):
        raise _err(f"{where}.points", "expected an array of tables, e.g. [{nstages_target = 1}]")
    points = []
    for i, p in enumerate(points_raw):
        _names(p, f"{where}.points[{i}]")
        if not p:
            raise _err(f"{where}.points[{i}]", "empty: give the columns that differ from the row")
        points.append({k: _value(v, f"{where}.points[{i}].{k}") for k, v in p.items()})
    cons = mapping.get("constraints", [])
    cons = [cons] if isinstance(cons, str) else cons
    if not isinstance(cons, list):
        raise _err(f"{where}.constraints", "expected a list of expressions")
    for i, c in enumerate(cons):
        parse_expression(_str(c, f"{where}.constraints[{i}]"), f"{where}.constraints[{i}]")
    check_size(params, len(points), f"{where}.params")
    name = mapping.get("name") or f"{function}-" + "-".join(str(int(v)) for v in row.values())
    if not is_safe_component(name):
        raise _err(f"{where}.name", f"{name!r} cannot be a folder name ({SAFE_RULE})")
    objective = mapping.get("objective", "geomean")
    if objective not in OBJECTIVES:
        raise _err(f"{where}.objective", f"expected one of {', '.join(OBJECTIVES)}, got {objective!r}")
    heat = mapping.get("heatmap", [])
    if not isinstance(heat, list) or (heat and (len(heat) != 2 or not all(h in params for h in heat))):
        raise _err(f"{where}.heatmap", f"expected two of the parameters ({', '.join(params)}), got {heat!r}")
    return SweepSpec(
        where=where,
        name=name,
        file=_file(mapping["file"], f"{where}.file"),
        function=function,
        macro=_str(mapping["macro"], f"{where}.macro") if "macro" in mapping else "",
        row={k: _value(v, f"{where}.row.{k}") for k, v in row.items()},
        params=params,
        points=tuple(points),
        constraints=tuple(cons),
        start=_str(mapping["start"], f"{where}.start"),
        cases=_regex(mapping.get("cases", ""), f"{where}.cases"),
        objective=objective,
        archs=_archs(mapping.get("archs", []), f"{where}.archs"),
        strategy=_strategy(mapping.get("strategy", "grid"), f"{where}.strategy"),
        correctness=_regex(mapping.get("correctness", ""), f"{where}.correctness"),
        heatmap=tuple(heat),
        units=_units(mapping.get("units", "all"), f"{where}.units"),
        instances=_instances(mapping["instances"], f"{where}.instances") if "instances" in mapping else None,
        predict=occupancy_spec.parse(mapping["predict"], f"{where}.predict") if "predict" in mapping else None,
    )


def load_spec(path: Path) -> SweepSpec:
    """A --spec FILE: a TOML file with a [sweep] table (the same table a recipe holds)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise SweepError(f"{path}: cannot read the sweep spec: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise SweepError(
            f"{path}: not UTF-8 text (byte {e.start}: {e.object[e.start]:#04x}); a sweep spec is UTF-8 TOML"
        ) from None
    except tomllib.TOMLDecodeError as e:
        raise SweepError(f"{path}: TOML syntax error: {e}") from None
    extra = [k for k in data if k != "sweep"]
    if extra:
        raise SweepError(f"{path}: unknown key {extra[0]!r} (a sweep spec holds one [sweep] table)")
    if "sweep" not in data:
        raise SweepError(f"{path}: no [sweep] table")
    return parse_sweep(data["sweep"], f"{path}: sweep")


# ---------------------------------------------------------------------------------------------
# Command-line overrides


def parse_param_override(text: str) -> tuple[str, tuple[Value, ...]]:
    """'--param NAME=V1,V2' -> (NAME, values); true/false or whole numbers."""
    where = f"--param {text}"
    name, eq, rest = text.partition("=")
    name = name.strip()
    if not eq or not _IDENT.fullmatch(name) or not rest.strip():
        raise _err(where, "expected NAME=V1,V2,... e.g. --param nthreads=64,128")
    vals: list[Value] = []
    for part in (p.strip() for p in rest.split(",")):
        if part in ("true", "false"):
            vals.append(part == "true")
        elif re.fullmatch(r"[+-]?\d+", part):
            vals.append(int(part))
        else:
            raise _err(where, f"{part!r} is not a whole number or true/false")
    return name, _values(vals, where)


def override(
    spec: SweepSpec,
    *,
    params: tuple[str, ...] = (),
    archs: tuple[str, ...] = (),
    strategy: str = "",
    target_gpus: tuple[str, ...] = (),
    occupancy_filter: str = "",
) -> SweepSpec:
    """The spec with the command line's --param, --arch, --strategy, --target-gpu and --occupancy-filter
    applied (each checked)."""
    new_params = dict(spec.params)
    origins = dict(spec.origins)
    for text in params:
        name, vals = parse_param_override(text)
        if name in spec.row:
            raise _err(f"--param {text}", "is a key column of the row; a sweep changes the other columns")
        new_params[name] = vals
        origins[name] = f"--param {name}"
    check_size(new_params, len(spec.points), "--param")
    changes: dict = {"params": new_params, "origins": origins}
    if archs:
        changes["archs"] = _archs(list(archs), "--arch")
    if strategy:
        if strategy not in STRATEGIES:
            raise _err("--strategy", f"expected one of {', '.join(STRATEGIES)}, got {strategy!r}")
        if strategy != spec.strategy.kind:
            rounds = (spec.strategy.rounds[-1],) if strategy == "grid" else DEFAULT_ROUNDS["halving"]
            changes["strategy"] = Strategy(kind=strategy, rounds=rounds, eta=spec.strategy.eta)
    if target_gpus or occupancy_filter:
        changes["predict"] = _occupancy_override(spec, target_gpus, occupancy_filter)
    return replace(spec, **changes)


def _occupancy_override(spec: SweepSpec, target_gpus: tuple[str, ...], filt: str) -> occupancy_spec.OccupancySpec:
    o = spec.predict
    if o is None:
        flag = "--target-gpu" if target_gpus else "--occupancy-filter"
        raise _err(flag, f"needs the spec's predict table (its kernel): add {spec.at('predict')} (docs/sweep.md)")
    if filt and filt not in occupancy_spec.FILTERS:
        raise _err("--occupancy-filter", f"expected one of {', '.join(occupancy_spec.FILTERS)}, got {filt!r}")
    names = occupancy_spec.targets(target_gpus, "--target-gpu") if target_gpus else o.targets
    return replace(o, targets=names, filter=filt or o.filter)
