"""A recipe that says its base is the default recipe's (one CPU build of base, reused: test_cpu_change asserts it
in CI) lists the default recipe's local patches, all of them, in the same order. A local patch added to the default
recipe alone made test_cpu_change fail in the integration tier (CI rehearsal of 2026-12-05 23:39, 0011): this
says so in the unit tier, in a second."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[2]
SHARING = ["cpu-fa-gemm-revert.toml"]  # its header: "The base, its build options and the local test patches are
# the default recipe's, so that a CPU build of the default recipe's base is the same build"


def _local(name: str) -> list[str]:
    return [p.file for p in load_recipe(str(ROOT / "recipes" / name)).series if p.local]


@pytest.mark.parametrize("name", SHARING)
def test_a_recipe_on_the_default_base_lists_the_default_recipes_local_patches(name):
    default = _local("default.toml")
    assert default, "the default recipe lists local patches"
    assert _local(name) == default
