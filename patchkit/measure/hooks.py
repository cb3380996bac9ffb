"""Hooks around timed processes (issue 35): what is measured around each process a timing step times
(bench:kernel's test-backend-ops rounds, bench:decode's llama-bench rounds), declared in one table.

pyperf's hooks (`_hooks.py`: enter, exit, metadata) are the model. A hook is one module holding its class,
its parser (patchkit/parsers/) and its data: `Hook(bundle, step)` for one step's rounds; `enter(tag)` just
before a timed process, `exit(tag, r, label, tokens)` just after it (tokens: what the process generated or
processed, decode only); `logs` (its raw logs, relative to the run folder); `data()` (its serialized data,
or None: nothing to store, e.g. a GPU hook on a CPU run). Its report line is `summary(data)`. A step stores
{hook name: data} as its data's "hooks" (`Around.data()`); runs before hooks stored GPU clocks as "clocks"
(`stored`). A new hook is its module, its parser and fixture, and one line of `HOOKS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from patchkit.measure import clocks, power
from patchkit.results import Bundle


class Hook(Protocol):
    logs: list[str]

    def enter(self, tag: str) -> None: ...

    def exit(self, tag: str, r: int, label: str, tokens: int | None = None) -> None: ...

    def data(self) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class HookKind:
    name: str  # its key in a step's "hooks"
    make: Callable[[Bundle, str], Hook]  # (run folder, step prefix of its raw logs: 'kernel', 'decode')
    summary: Callable[[dict[str, Any] | None], str]  # its line in the report ('' : nothing to say)


HOOKS: tuple[HookKind, ...] = (
    HookKind("clocks", clocks.Clocks, clocks.summary),
    HookKind("power", power.Power, power.summary),
)


class Around:
    """Every hook of the table around one step's timed processes: entered in table order, left in reverse."""

    def __init__(self, bundle: Bundle, step: str, kinds: tuple[HookKind, ...] | None = None) -> None:
        self.kinds = HOOKS if kinds is None else kinds
        self.hooks = [(k.name, k.make(bundle, step)) for k in self.kinds]

    def enter(self, tag: str) -> None:
        for _, h in self.hooks:
            h.enter(tag)

    def exit(self, tag: str, r: int, label: str, tokens: int | None = None) -> None:
        for _, h in reversed(self.hooks):
            h.exit(tag, r, label, tokens)

    @property
    def logs(self) -> list[str]:
        return [log for _, h in self.hooks for log in h.logs]

    def data(self) -> dict[str, Any]:
        """{hook name: its data} of the hooks that have something to store."""
        return {n: d for n, h in self.hooks if (d := h.data()) is not None}


def stored(hooks: dict[str, Any] | None, old_clocks: dict[str, Any] | None = None) -> dict[str, Any]:
    """A step's hooks as stored: its "hooks", or (runs before hooks) its "clocks" as the clocks hook."""
    if hooks:
        return dict(hooks)
    return {"clocks": old_clocks} if old_clocks else {}


def summaries(hooks: dict[str, Any], kinds: tuple[HookKind, ...] | None = None) -> list[str]:
    """Each hook's report line, in table order (a hook a run did not store says nothing)."""
    return [s for k in (HOOKS if kinds is None else kinds) if (s := k.summary(hooks.get(k.name)))]
