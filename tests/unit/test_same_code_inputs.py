"""Base's compiled inputs kept in its build folder (patchkit.build.inputs_cache, issue 37): a run whose base is
reused reads them back instead of running `ninja -t deps` etc. before the next variant's build (8.3 s of the H200
warm loop's build step); anything they were read from that changed computes them again; the build lane keeps
them for the next run after its builds, on the CPU steps' thread. Real git, CMake and Ninja on the small project
of test_build_dirty (a C program with a configure_file() header, and a CUDA file no object compiles)."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest

from patchkit import build as build_mod
from patchkit.build import compiled, inputs_cache
from patchkit.errors import ToolNotFound
from patchkit.options import Context, resolve_run
from patchkit.recipe import load_recipe
from patchkit.results import Bundle
from patchkit.run import lanes, pipeline
from patchkit.series import VariantState
from patchkit.source import BaseInfo
from patchkit.workspace import Workspace
from tests.conftest import commit_files, git
from tests.unit.test_build_dirty import SOURCES

pytestmark = pytest.mark.skipif(
    not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("cc")), reason="needs cmake, ninja, cc"
)
NO_NINJA = {"PATH": "/nonexistent"}  # compiled_inputs with it stops: ToolNotFound (ninja)
SAME = "no compiled change on cpu: the series touches only files not compiled here (.)"


class Project:
    """The toy project's repository, a work folder with its build root, and build_one on it."""

    def __init__(self, tmp: Path):
        self.repo = tmp / "repo"
        self.base = commit_files(self.repo, SOURCES, "base")
        self.ws = Workspace.at(tmp / "work")
        self.ws.root.mkdir(parents=True)
        self.ws.claim()  # its record first: the trees below are git worktrees of a repository elsewhere
        self.recipe = load_recipe("default")
        opts = build_mod.options_from(self.recipe, backend="cpu")
        self.opts = dataclasses.replace(opts, targets=("toy",), cmake_options=())
        self.root = build_mod.build_root(self.ws, self.recipe, self.opts)
        self.tree, self.bdir = self.root / "tree", self.root / "build"
        git(self.repo, "worktree", "add", "-q", "--detach", str(self.tree), self.base)
        tc = build_mod.toolchain(self.opts)
        self.job = build_mod._Job(
            recipe=self.recipe, base=None, ws=self.ws, opts=self.opts, tc=tc, root=self.root, logs=tmp / "logs"
        )

    def commit(self, files: dict[str, str], message: str) -> str:
        return commit_files(self.repo, files, message)

    def state(self, name: str, head: str) -> VariantState:
        return VariantState(name=name, key=f"{name}-{head[:7]}", base=self.base, head=head, patches=[])

    def build(self, name: str, head: str) -> None:
        build_mod.build_one(self.job, self.state(name, head), self.tree, self.bdir, self.opts)

    def inputs(self, env: dict[str, str] | None = None) -> tuple[set[str], str]:
        got, how, _ = inputs_cache.inputs(self.bdir, self.tree, self.opts.targets, env)
        return got, how


def test_a_reused_folders_inputs_are_read_back_without_ninja(tmp_path):
    p = Project(tmp_path)
    p.build("base", p.base)
    fresh = compiled.compiled_inputs(p.bdir, p.tree, p.opts.targets)
    assert "main.c" in fresh and "version.h" in fresh.generated
    got, how = p.inputs()
    assert how == "computed" and got == fresh and got.generated == fresh.generated
    with pytest.raises(ToolNotFound):  # computing them needs Ninja
        compiled.compiled_inputs(p.bdir, p.tree, p.opts.targets, NO_NINJA)
    again, how = p.inputs(NO_NINJA)  # read back: no Ninja run
    assert how == "read back" and again == fresh and again.generated == fresh.generated
    assert isinstance(again, compiled.Inputs) and (again.bdir, again.tree) == (p.bdir, p.tree)


def test_what_they_are_read_from_changed_computes_them_again(tmp_path):
    p = Project(tmp_path)
    p.build("base", p.base)
    assert p.inputs()[1] == "computed"
    # a variant built in the folder: its deps log (a new header) and the tree's head changed
    head = p.commit(
        {"extra.h": "#define X 1\n", "main.c": SOURCES["main.c"].replace("<stdio.h>", '"extra.h"\n#include <stdio.h>')},
        "a header",
    )
    p.build("+a", head)
    with pytest.raises(ToolNotFound):  # not read back: computed
        p.inputs(NO_NINJA)
    got, how = p.inputs()
    assert how == "computed" and "extra.h" in got and got == compiled.compiled_inputs(p.bdir, p.tree, p.opts.targets)
    assert p.inputs(NO_NINJA)[1] == "read back"
    # a generated file an object was compiled from, changed
    version = p.bdir / "version.h"
    version.write_text(version.read_text() + "// edited\n")
    with pytest.raises(ToolNotFound):
        p.inputs(NO_NINJA)
    assert p.inputs()[1] == "computed"
    # the tree's head moved (generated_digest sets that commit aside)
    git(p.tree, "checkout", "-q", "--detach", p.base)
    with pytest.raises(ToolNotFound):
        p.inputs(NO_NINJA)
    assert p.inputs()[1] == "computed"
    # the deps log alone
    with open(p.bdir / ".ninja_deps", "ab") as f:
        f.write(b"\0")
    with pytest.raises(ToolNotFound):
        p.inputs(NO_NINJA)


class Spy:
    """The order of the builds and of the compiled inputs' computations (the real functions run)."""

    def __init__(self, monkeypatch):
        self.events: list[str] = []
        real_build, real_inputs = build_mod.build_one, compiled.compiled_inputs

        def build_one(job, state, *a, **kw):
            self.events.append(f"build {state.name}")
            return real_build(job, state, *a, **kw)

        def inputs(*a, **kw):
            self.events.append("inputs")
            return real_inputs(*a, **kw)

        monkeypatch.setattr(build_mod, "build_one", build_one)
        monkeypatch.setattr(compiled, "compiled_inputs", inputs)


def _lane(p: Project, tmp: Path, run_id: str, states: list[VariantState]) -> lanes.BuildLane:
    """The real build lane on the project's states (not started)."""
    ctx = Context(recipe=p.recipe, ws=p.ws)
    opts = resolve_run(p.recipe, {"backend": "cpu"}, steps=(), environ={})
    opts = dataclasses.replace(opts, build=p.opts)
    bundle = Bundle.create(tmp / "runs", recipe=p.recipe.name, run_id=run_id, meta={})
    base = BaseInfo(key="k", ref="r", commit=p.base, route="git", upstream="u", upstream_verified=False)
    return lanes.BuildLane(ctx, bundle, base, states, opts, pipeline.record)


def _run(p: Project, tmp: Path, run_id: str, states: list[VariantState]) -> lanes.BuildLane:
    """The real build lane (real build_variants) on the project's states, to its end."""
    lane = _lane(p, tmp, run_id, states).start()
    lane.finish()
    return lane


def test_a_warm_run_starts_the_next_build_without_computing_base_inputs(tmp_path, monkeypatch, capsys):
    """The warm loop: base reused, one variant rebuilt. Before: base's inputs computed (`ninja -t deps`, ...)
    when base was told, before the variant's build started, every run. Now: read back, and computed for the
    next run after the builds; the same verdicts."""
    p = Project(tmp_path)
    tree0 = p.ws.variants(p.recipe.name) / "base"  # where the lane compares the variants' commits
    tree0.parent.mkdir(parents=True)
    git(p.repo, "worktree", "add", "-q", "--detach", str(tree0), p.base)
    spy = Spy(monkeypatch)
    v1 = p.commit({"gpu.cu": "// a faster kernel\n"}, "0001: the kernel only")
    lane = _run(p, tmp_path, "cold", [p.state("base", p.base), p.state("+0001", v1)])
    assert lane.same_code() == {"+0001": SAME}
    assert spy.events == ["build base", "inputs", "build +0001", "inputs"]  # the last: kept for the next run
    assert "same-code inputs kept for the next run" in capsys.readouterr().out

    spy.events.clear()
    v2 = p.commit({"gpu.cu": "// a faster kernel, edited\n"}, "0001: the kernel, edited")
    lane = _run(p, tmp_path, "warm", [p.state("base", p.base), p.state("+0001", v2)])
    assert lane.same_code() == {"+0001": SAME}
    assert spy.events == ["build +0001", "inputs"]  # before: ["inputs", "build +0001"]
    out = capsys.readouterr().out
    assert re.search(r"same-code inputs \d+\.\d s \(base's read back in 0\.\d\d s\)", out), out

    spy.events.clear()
    lane = _run(p, tmp_path, "again", [p.state("base", p.base), p.state("+0001", v2)])
    assert lane.same_code() == {"+0001": SAME} and spy.events == []  # all reused, read back, already kept


def test_a_folder_in_use_keeps_nothing_and_fails_nothing(tmp_path, capsys):
    """The step that keeps them for the next run, beside another patchkit's build of the folder (its lock
    held): nothing kept, the run not failed; once the folder is free, kept."""
    p = Project(tmp_path)
    p.build("base", p.base)
    lane = _lane(p, tmp_path, "r", [p.state("base", p.base), p.state("+0001", p.base)])
    with p.ws.lock(p.root):
        lane._keep_inputs("build:cpu")
    assert "same-code inputs not kept for the next run" in capsys.readouterr().out
    assert not (p.bdir / inputs_cache.CACHE).exists()
    lane._keep_inputs("build:cpu")
    assert "kept for the next run in" in capsys.readouterr().out
    assert inputs_cache.read_back(p.bdir, p.tree, p.opts.targets) == compiled.compiled_inputs(
        p.bdir, p.tree, p.opts.targets
    )


def test_a_folder_changed_while_they_are_read_is_not_kept_and_read_again(tmp_path, monkeypatch):
    """What they are read from changed between the key and the reads (another writer; or Ninja's own `-t deps`,
    which recompacts a deps log with many dead records and cuts a torn last record): not kept with a key they
    were not read from; with a second try, kept."""
    p = Project(tmp_path)
    p.build("base", p.base)
    real, calls = compiled.compiled_inputs, []

    def changing(bdir, *a, **kw):  # the real reads, then (the first two times) CMakeCache.txt written
        calls.append(bdir)
        got = real(bdir, *a, **kw)
        if len(calls) <= 2:
            with open(bdir / "CMakeCache.txt", "a") as f:
                f.write(f"// written while read {len(calls)}\n")
        return got

    monkeypatch.setattr(compiled, "compiled_inputs", changing)
    inputs_cache.keep(p.bdir, p.tree, p.opts.targets)
    assert len(calls) == 1 and not (p.bdir / inputs_cache.CACHE).exists()
    inputs_cache.keep(p.bdir, p.tree, p.opts.targets, tries=2)  # changed again in the first try, not in the second
    assert len(calls) == 3 and inputs_cache.read_back(p.bdir, p.tree, p.opts.targets) is not None


def test_computed_inputs_say_where_their_seconds_went(tmp_path):
    """The H100 of 2026-12-06 08:43 printed `same-code inputs 9.1 s (base's computed in 9.01 s)` where this 2-core
    machine's CPU build takes 0.12 s, and a 100,000-line deps text parses here in 0.2 s: the parts are printed so
    that the next GPU run says which part it is."""
    p = Project(tmp_path)
    p.build("base", p.base)
    got, how, took = inputs_cache.inputs(p.bdir, p.tree, p.opts.targets)
    assert how == "computed"
    parts = ["ninja -t deps/inputs", "parse", "configure inputs", "digests of 1 generated files", "keys"]
    assert list(got.seconds) == parts
    assert all(s >= 0 for s in got.seconds.values()) and sum(got.seconds.values()) <= took
    again, how, _ = inputs_cache.inputs(p.bdir, p.tree, p.opts.targets)
    assert how == "read back" and again.seconds == {}  # nothing computed
