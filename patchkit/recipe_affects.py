"""A recipe's [[affects]] rules: the dataclass and the checks of each rule's keys (patchkit.recipe reads the
tables; `--changed` (patchkit.run.scope) and the unit rules (patchkit.build.units) use them)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from patchkit import expr
from patchkit.errors import RecipeError


@dataclass(frozen=True, kw_only=True)
class Affects:
    """A [[affects]] rule: a change that only edits rows of `macro` in `file` can affect only the
    test-backend-ops cases matching `params`, a regex with each row's columns put in ({DKQ}). Used by
    `--changed` (patchkit.run.scope); a change the rules do not cover can affect every case."""

    file: str  # path in the llama.cpp tree
    macro: str  # the function-like macro each row calls
    params: str  # e.g. 'hsk={DKQ},hsv={DV},'
    units: str = ""  # regex of unit paths whose code reads only the rows `uses` selects (patchkit.build.units)
    uses: str = ""  # e.g. 'ncols1 * ncols2 == ncols': whether such a unit reads a row


def check_affects(a: Affects, where: str, file: Path) -> None:
    """A rule's macro, file, params, units and uses, each checked; the error names the rule."""
    if not re.fullmatch(r"[A-Za-z_]\w*", a.macro):
        raise RecipeError(f"{file}: {where}.macro: {a.macro!r} is not a macro name")
    if not a.file or a.file.startswith("/") or ".." in Path(a.file).parts:
        raise RecipeError(f"{file}: {where}.file: {a.file!r}: expected a path inside the llama.cpp tree")
    try:
        re.compile(re.sub(r"\{\w+\}", "0", a.params))
    except re.error as e:
        raise RecipeError(f"{file}: {where}.params: not a regex with {{column}} fields: {e}") from None
    _check_units(a, f"{file}: {where}")


def _check_units(a: Affects, where: str) -> None:
    """`units` and `uses` come together, `units` is a regex, `uses` an expression (patchkit.expr)."""
    if bool(a.units) != bool(a.uses):
        raise RecipeError(f"{where}: units and uses go together (one is set, the other not)")
    if not a.units:
        return
    try:
        re.compile(a.units)
    except re.error as e:
        raise RecipeError(f"{where}.units: not a regex: {e}") from None
    parse_uses(a.uses, where)


def parse_uses(text: str, where: str) -> ast.Expression:
    """An [[affects]] rule's `uses`, checked; the recipe's error names the rule."""
    try:
        return expr.parse(text)
    except expr.ExpressionError as e:
        if e.syntax:
            raise RecipeError(f"{where}.uses: {text!r} is not an expression: {e.syntax}") from None
        raise RecipeError(f"{where}.uses: {text!r}: {e.node} is not allowed ({expr.ALLOWED})") from None
