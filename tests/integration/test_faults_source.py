"""Faults of the base on the real llama-cpp-python 0.3.36 sdist, through the command line."""

from __future__ import annotations

from .test_source_series import TOY_BASE

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
