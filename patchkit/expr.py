"""The one small expression language of recipes and sweep specs.

Used by a recipe's `[[affects]] uses` (patchkit.build.units, checked at load by patchkit.recipe) and by
a sweep spec's constraints and instance keys (patchkit.sweep.spec): names, integers and decimal
numbers, `true`/`false`, `+ - * / // %`, unary `-`/`+`, comparisons (chained as in Python) and
`and`/`or`/`not`. An expression is parsed with `ast` and checked node by node, then walked: nothing is
ever `eval`ed. Errors are `ExpressionError` (not the language) and `UnboundName` (a name without a
value); each caller says where the expression came from.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Mapping

from patchkit.errors import PatchkitError

ALLOWED = "names, numbers, + - * / // %, comparisons, and/or/not only"

_BIN = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_CMP = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_NODES = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd, ast.BinOp)
_NODES += (ast.Compare, ast.Name, ast.Load, *_BIN, *_CMP)
LITERALS = {"true": True, "false": False}


class ExpressionError(PatchkitError):
    """Text that is not an expression of the language: `syntax` is Python's message where it does not
    parse, else `node` names the first node type the language does not have."""

    def __init__(self, text: str, *, syntax: str = "", node: str = "") -> None:
        self.text, self.syntax, self.node = text, syntax, node
        why = f"not an expression ({syntax})" if syntax else f"{node} is not allowed ({ALLOWED})"
        super().__init__(f"{text!r}: {why}")


class UnboundName(PatchkitError):
    """A name of the expression that has no value."""

    def __init__(self, name: str, known: Mapping[str, object]) -> None:
        self.name, self.known = name, tuple(known)
        super().__init__(f"{name!r} has no value ({', '.join(self.known)})")


def parse(text: str) -> ast.Expression:
    """The checked tree of `text`; ExpressionError where it is not of the language."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ExpressionError(text, syntax=str(e.msg)) from None
    for node in ast.walk(tree):
        ok = isinstance(node, _NODES)
        ok = ok or (isinstance(node, ast.Constant) and type(node.value) in (int, float, bool))
        if not ok:
            raise ExpressionError(text, node=type(node).__name__)
    return tree


def names(tree: ast.AST) -> set[str]:
    """The names an expression reads (not the literals true/false)."""
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in LITERALS}


def evaluate(tree: ast.AST, env: Mapping[str, object]) -> object:
    """The value of a checked tree (`parse`) with `env` for the names; UnboundName for a name not in it."""
    if isinstance(tree, ast.Expression):
        return evaluate(tree.body, env)
    if isinstance(tree, ast.Constant):
        return tree.value
    if isinstance(tree, ast.Name):
        if tree.id in LITERALS:
            return LITERALS[tree.id]
        if tree.id not in env:
            raise UnboundName(tree.id, env)
        return env[tree.id]
    if isinstance(tree, ast.BoolOp):
        vals = (evaluate(v, env) for v in tree.values)
        return all(vals) if isinstance(tree.op, ast.And) else any(vals)
    if isinstance(tree, ast.UnaryOp):
        v = evaluate(tree.operand, env)
        if isinstance(tree.op, ast.Not):
            return not v
        return -v if isinstance(tree.op, ast.USub) else +v  # type: ignore[operator]
    if isinstance(tree, ast.BinOp):
        return _BIN[type(tree.op)](evaluate(tree.left, env), evaluate(tree.right, env))
    if isinstance(tree, ast.Compare):
        left = evaluate(tree.left, env)
        for op, comp in zip(tree.ops, tree.comparators):
            right = evaluate(comp, env)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    raise TypeError(f"unchecked node {type(tree).__name__}")  # pragma: no cover
