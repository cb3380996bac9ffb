"""The strict dict <-> dataclass conversion every step data class shares (patchkit.results.data)."""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any, TypeVar

from patchkit.errors import ResultsError

D = TypeVar("D", bound="Data")
S = TypeVar("S", bound="StepData")


class _Absent:
    """A key an older format did not write: left out of `to_dict()` (not the same as a stored null)."""

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Any = _Absent()


def _type_name(tp: Any) -> str:
    if tp is Any:
        return "any value"
    if tp is type(None):
        return "null"
    if isinstance(tp, type) and issubclass(tp, Data):
        return "an object"
    names = {bool: "true/false", int: "an integer", float: "a number", str: "a string"}
    if tp in names:
        return names[tp]
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    return {list: "a list", dict: "an object"}.get(origin, str(tp))


def _fails(value: Any, tp: Any, where: str) -> ResultsError:
    got = "null" if value is None else type(value).__name__
    return ResultsError(f"{where}: expected {_type_name(tp)}, got {got} {value!r:.60}")


def load(value: Any, tp: Any, where: str) -> Any:
    """`value` (from JSON) checked against the type `tp` (a Data class loaded); ResultsError naming `where`."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        arms = typing.get_args(tp)
        if value is None and type(None) in arms:
            return None
        for arm in (a for a in arms if a is not type(None)):
            try:
                return load(value, arm, where)
            except ResultsError:
                continue
        raise _fails(value, tp, where)
    if isinstance(tp, type) and issubclass(tp, Data):
        return tp.from_dict(value, where)
    if origin is list:
        if not isinstance(value, list):
            raise _fails(value, tp, where)
        (arg,) = typing.get_args(tp)
        return [load(x, arg, f"{where}[{i}]") for i, x in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise _fails(value, tp, where)
        _, arg = typing.get_args(tp)
        return {k: load(x, arg, f"{where}[{k!r}]") for k, x in value.items()}
    ok = {
        bool: isinstance(value, bool),
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, (int, float)) and not isinstance(value, bool),  # kept as stored (3 stays 3)
        str: isinstance(value, str),
        type(None): value is None,
    }
    if tp not in ok:
        raise TypeError(f"{where}: patchkit.results.data cannot load the type {tp!r}")
    if not ok[tp]:
        raise _fails(value, tp, where)
    return value


def dump(value: Any) -> Any:
    """The JSON value of loaded data (the inverse of `load`)."""
    if isinstance(value, Data):
        return value.to_dict()
    if isinstance(value, list):
        return [dump(x) for x in value]
    if isinstance(value, dict):
        return {k: dump(x) for k, x in value.items()}
    return value


@functools.cache
def _fields(cls: type) -> tuple[tuple[dataclasses.Field, Any], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f, hints[f.name]) for f in dataclasses.fields(cls))


@dataclasses.dataclass(kw_only=True)
class Data:
    """A part of a step's stored data. Subclasses are dataclasses (kw_only) whose fields are the keys."""

    @classmethod
    def fields(cls) -> list[tuple[dataclasses.Field, Any]]:
        """(field, its resolved type) in declaration order (resolved once per class: typing.get_type_hints
        took 1.5 s of the 4.6 s `patchkit report` of examples/h100-2026-12-06d/cold, 8,832 calls)."""
        return list(_fields(cls))

    @classmethod
    def from_dict(cls: type[D], d: Any, where: str) -> D:
        if not isinstance(d, dict):
            raise _fails(d, cls, where)
        fields = _fields(cls)
        known = {f.name for f, _ in fields}
        unknown = [k for k in d if k not in known]
        if unknown:
            raise ResultsError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")
        kw = {}
        for f, tp in fields:
            if f.name in d:
                kw[f.name] = load(d[f.name], tp, f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ResultsError(f"{where}: missing key {f.name!r}")
        return cls(**kw)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: dump(v) for f in dataclasses.fields(self) if (v := getattr(self, f.name)) is not ABSENT}


@dataclasses.dataclass(kw_only=True)
class StepData(Data):
    """A step kind's whole `Step.data`. `inputs` is what the step's result depended on (written by the
    pipeline after the step, patchkit.run.pipeline; a resumed run with other inputs is refused)."""

    KIND: typing.ClassVar[str] = ""
    inputs: dict[str, Any] = ABSENT  # what the result depended on, build_keys among them (the pipeline)
    hooks: dict[str, dict[str, Any]] = ABSENT  # hook name -> that hook's own data (timing hooks; absent: none)

    @classmethod
    def from_step(cls: type[D], step: Any, where: str = "") -> D:
        """A stored step's data, typed; ResultsError naming `where` (the results.json), the step and key."""
        return cls.from_dict(step.data, f"{where + ': ' if where else ''}step {step.name!r} data")

    @classmethod
    def in_bundle(cls: type[S], bundle: Any) -> S | None:
        """The data of the bundle's step of this kind (KIND, one step: not a prefix such as 'check:'); None
        when the run has none."""
        step = bundle.step(cls.KIND)
        return None if step is None else cls.from_step(step, str(bundle.path / "results.json"))
