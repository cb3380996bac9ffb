"""Faults of the base on the real llama-cpp-python 0.3.36 sdist, through the command line."""

from __future__ import annotations

import git

from .conftest import copy_base
from .test_source_series import TOY_BASE, _make_patch, _replace

REAL = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"


def test_a_wrong_sha256_is_refused_though_the_base_is_cached(base, work, toy_project, cli):
    """Defect 1: the cached base was reported '(upstream commit, verified)' for any sha256."""
    wrong = "ab" * 32
    proj = toy_project(TOY_BASE.replace(REAL, wrong), {})
    r = cli("fetch", "-r", "toy", "--work", str(work.root), "--offline", cwd=proj, check=False)
    assert r.returncode == 2, r.stdout + r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("patchkit: error: ") and "base.sdist.sha256" in line
    assert wrong in line and REAL in line
    assert "verified" not in r.stdout
    ok = cli("fetch", "-r", "toy", "--work", str(work.root), "--offline", cwd=toy_project(TOY_BASE, {}))
    assert f"{base.commit} (upstream commit, verified)" in ok.stdout


def test_a_patch_that_stops_applying_keeps_every_good_tree(work, base, toy_project, cli, tmp_path):
    """Defect 12: the failing variant's last good tree (and every other variant) is left as it was."""
    good_a = _make_patch(work, base, tmp_path, _replace("ggml/src/ggml.c", "#include", "// toy a\n#include"), "a")
    good_b = _make_patch(work, base, tmp_path, _replace("ggml/src/ggml-cpu/ops.cpp", "#include", "// b\n#include"), "b")
    # the same patch with a context line that exists nowhere, and blob ids that name nothing
    broken_b = (
        "\n".join(
            "index 1111111..2222222 100644" if ln.startswith("index ") else ln for ln in good_b.splitlines()
        ).replace("\n #include", "\n #include <no such context line>", 1)
        + "\n"
    )
    recipe = TOY_BASE + '[[series]]\nfile = "patches/0001-a.patch"\n\n[[series]]\nfile = "patches/0002-b.patch"\n'
    proj = toy_project(recipe, {"patches/0001-a.patch": good_a, "patches/0002-b.patch": good_b})
    ws = copy_base(work, base, tmp_path / "w")
    cli("apply", "-r", "toy", "--work", str(ws.root), "--offline", cwd=proj)
    v = ws.variants("toy")
    heads = {n: git.Repo(v / n).git.rev_parse("HEAD") for n in ("base", "+0001", "+0001+0002")}
    (proj / "patches" / "0002-b.patch").write_text(broken_b)
    r = cli("apply", "-r", "toy", "--work", str(ws.root), "--offline", cwd=proj, check=False)
    assert r.returncode == 2 and "patches/0002-b.patch" in r.stderr.strip().splitlines()[-1], r.stderr
    for name, head in heads.items():
        assert git.Repo(v / name).git.rev_parse("HEAD") == head, name
        assert not git.Repo(v / name).git.status("--porcelain", "--untracked-files=no"), name
    assert "// b" in (v / "+0001+0002" / "ggml/src/ggml-cpu/ops.cpp").read_text()
    assert not list((ws.cache / "tmp").glob("apply-*"))
