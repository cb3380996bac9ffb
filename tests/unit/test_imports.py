"""patchkit's import graph, read with `ast`: no cycles (imports inside functions count, so a cycle cannot
hide behind a late import), no core module importing an optional feature's package, and git reached
through patchkit.vcs only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from patchkit.registry import KINDS

ROOT = Path(__file__).resolve().parents[2] / "patchkit"
# the jobs around the pipeline: they use the stages, no stage uses them
FEATURES = ("patchkit.sweep", "patchkit.wheel", "patchkit.executor", "patchkit.maintain")
# the command line sits on top of everything
TOP = ("patchkit.cli", "patchkit.__main__")


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The patchkit modules `name` imports anywhere in its file (module level, in functions, under
    TYPE_CHECKING alike): `from P import X` is module P.X where that is one, else P."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            for a in node.names:
                sub = f"{base}.{a.name}"
                if sub in known:
                    out.add(sub)
                elif base in known:
                    out.add(base)
        elif isinstance(node, ast.JoinedStr):
            out |= by_name(node, known)
    out.discard(name)
    return out | _parents(name, out, known)


def by_name(node: ast.JoinedStr, known: set[str]) -> set[str]:
    """The modules an f-string names by the registry's kinds (`f"patchkit.report.{n}"`, imported with importlib
    for each n in patchkit.registry.KINDS): an edge to each, so that a cycle cannot hide behind an import by name."""
    head = node.values[0] if node.values else None
    prefix = head.value if isinstance(head, ast.Constant) and isinstance(head.value, str) else ""
    if not (prefix.startswith("patchkit.") and prefix.endswith(".") and len(node.values) == 2):
        return set()
    return {f"{prefix}{k}" for k in KINDS if f"{prefix}{k}" in known}


def _parents(name: str, targets: set[str], known: set[str]) -> set[str]:
    """The packages whose `__init__` importing `targets` runs: a.b.c runs a and a.b first. The packages
    holding `name` itself are left out: they have run before `name` does."""
    own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return (
        {p for t in targets for i in range(1, t.count(".") + 1) if (p := ".".join(t.split(".")[:i])) in known}
        - own
        - {name}
    )


def graph(root: Path) -> dict[str, set[str]]:
    mods = modules(root)
    return {n: imported(n, p, set(mods)) for n, p in mods.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(out)


def _in(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _const(node: ast.AST) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def test_the_graph_is_read_from_every_kind_of_import(tmp_path):
    """The reader itself: a cycle through a function-level and a relative import is found."""
    pkg = tmp_path / "patchkit"
    (pkg / "stage").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "stage" / "__init__.py").write_text("from .one import x\n")
    (pkg / "stage" / "one.py").write_text("def f():\n    from patchkit import two\n")
    (pkg / "two.py").write_text("import patchkit.stage.one\n")
    g = graph(pkg)
    assert g["patchkit.stage"] == {"patchkit.stage.one"} and g["patchkit.stage.one"] == {"patchkit.two"}
    # two imports stage.one, which runs stage/__init__ first: an edge to the package too
    assert g["patchkit.two"] == {"patchkit.stage.one", "patchkit.stage"}
    assert cycles(g) == [["patchkit.stage", "patchkit.stage.one", "patchkit.two"]]
    (pkg / "two.py").write_text("x = 1\n")
    assert cycles(graph(pkg)) == []


def test_an_import_runs_the_packages_above_it(tmp_path):
    """A cycle only through a package's __init__ (stage/__init__ imports two, two imports stage.leaf,
    a module that imports nothing) is a cycle: importing stage.leaf runs stage/__init__ first."""
    pkg = tmp_path / "patchkit"
    (pkg / "stage").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "stage" / "__init__.py").write_text("from patchkit import two\n")
    (pkg / "stage" / "leaf.py").write_text("x = 1\n")
    (pkg / "two.py").write_text("from patchkit.stage import leaf\n")
    assert cycles(graph(pkg)) == [["patchkit.stage", "patchkit.two"]]
    (pkg / "stage" / "__init__.py").write_text("")
    assert cycles(graph(pkg)) == []


def test_an_import_by_a_registry_name_counts(tmp_path):
    """A module that imports the registry's kinds by name (`importlib.import_module(f"patchkit.measure.{n}")`
    for n in patchkit.registry.KINDS) has an edge to each: a cycle through it is found."""
    pkg = tmp_path / "patchkit"
    (pkg / "measure").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "measure" / "__init__.py").write_text("")
    (pkg / "measure" / f"{KINDS[0]}.py").write_text("from patchkit import two\n")
    body = '    return [importlib.import_module(f"patchkit.measure.{n}") for n in names]\n'
    (pkg / "two.py").write_text("import importlib\n\ndef f(names):\n" + body)
    assert graph(pkg)["patchkit.two"] == {f"patchkit.measure.{KINDS[0]}", "patchkit.measure"}
    assert cycles(graph(pkg)) == [[f"patchkit.measure.{KINDS[0]}", "patchkit.two"]]


def test_no_import_cycles():
    found = cycles(graph(ROOT))
    assert not found, "import cycles (function-level imports count): " + "; ".join(" <-> ".join(c) for c in found)


def test_core_modules_do_not_import_optional_features():
    g = graph(ROOT)
    bad = [
        f"{m} imports {t}"
        for m, ts in sorted(g.items())
        if not _in(m, FEATURES + TOP)
        for t in sorted(ts)
        if _in(t, FEATURES)
    ]
    assert not bad, "; ".join(bad)


def test_only_vcs_talks_to_git():
    """GitPython is imported by patchkit.vcs only, and no other module runs `git` (a string "git" as
    the first word of a command list)."""
    bad = []
    for name, path in modules(ROOT).items():
        if name == "patchkit.vcs":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "git" for a in node.names):
                bad.append(f"{name}:{node.lineno} imports GitPython")
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "git" and not node.level:
                bad.append(f"{name}:{node.lineno} imports GitPython")
            words = [_const(e) for e in node.elts] if isinstance(node, ast.List) else []
            if words[:1] == ["git"] and words != [
                "git",
                "--version",
            ]:  # the tool's version (measure.env) is not git use
                bad.append(f"{name}:{node.lineno} runs git")
            f = node.func if isinstance(node, ast.Call) else None
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute) and f.value.attr == "git":
                bad.append(f"{name}:{node.lineno} calls .git.{f.attr}() (GitPython)")
    assert not bad, "; ".join(bad)


@pytest.mark.parametrize("stage", ["patchkit.expr"])
def test_leaf_modules_import_only_errors(stage):
    """The expression language imports nothing of patchkit but its errors."""
    assert graph(ROOT)[stage] <= {"patchkit.errors"}
