"""`patchkit run --show-options` and options.describe: every setting, its value and where it came from."""

from __future__ import annotations

from pathlib import Path

from patchkit import options
from patchkit.options import describe, resolve_run
from patchkit.recipe import parse_recipe
from patchkit.run import steps
from tests.conftest import Ran, patchkit_main

ROOT = Path(__file__).resolve().parents[2]
KINDS = tuple(k.name for k in steps.STEPS)


def _recipe():
    path = ROOT / "recipes" / "default.toml"
    return parse_recipe(path.read_text(), path)


def test_each_setting_is_named_once_with_its_resolved_value_and_its_layer():
    r = _recipe()
    cli = {"rounds": 7, "backend": "cpu"}
    env = {"PATCHKIT_KERNEL_MAX_ROUNDS": "9", "PATCHKIT_JOBS": "3"}
    rows = describe(r, cli, steps=KINDS, environ=env)
    got = {name: (value, source) for name, value, source in rows}
    assert len(got) == len(rows)
    final = resolve_run(r, cli, steps=KINDS, environ=env)
    assert {n: v for n, (v, _) in got.items()} == options._leaves(final)  # the values are the resolved ones
    assert got["kernel.rounds"] == (7, "command line")
    assert got["build.backend"] == ("cpu", "command line")
    assert got["kernel.max_rounds"] == (9, "environment")
    assert got["build.jobs"] == (3, "environment")
    assert got["kernel.max_seconds"] == (r.kernel.max_seconds, "recipe") and r.kernel.max_seconds != 600
    assert got["kernel.max_noise"] == (0.005, "recipe")  # the recipe writes the default's value: its own
    assert got["kernel.target_gpus"] == ((), "default")
    assert got["overlap"] == (True, "default")
    assert got["steps"] == (KINDS, "command")
    # [profile.cpu] is the recipe's, though --backend cpu chose it
    assert got["decode.depths"] == (r.profiles["cpu"].depths, "recipe")
    assert got["test.filter"][1] == "recipe"


def test_a_value_only_a_lower_layer_sets_keeps_that_layers_name():
    r = _recipe()
    rows = {n: s for n, _, s in describe(r, {}, steps=("test",), environ={})}
    assert r.build.backend == "cuda" and rows["build.backend"] == "recipe"  # written: the recipe's, as the default
    assert rows["build.build_type"] == "default"  # not written
    assert rows["build.cmake_options"] == "recipe"
    assert rows["kernel.max_rounds"] == "recipe" and rows["build.jobs"] == "default"
    assert set(rows.values()) <= {"default", "recipe", "command"}


def _cli(tmp: Path, *args: str, **env: str) -> Ran:
    return patchkit_main("run", "--show-options", *args, env={"PATCHKIT_WORK": str(tmp / "work"), **env})


def test_show_options_prints_the_table_and_runs_nothing(tmp_path):
    p = _cli(tmp_path, "--rounds", "7", PATCHKIT_KERNEL_MIN_US="5000")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("patchkit run: ") and lines[0].endswith("settings (value, then where it came from)")
    row = {ln.split()[0]: ln for ln in lines[1:]}
    assert row["kernel.rounds"].split()[1:] == ["7", "(command", "line)"]
    assert row["kernel.min_us"].split()[1:] == ["5000", "(environment)"]
    assert row["work"].split()[1:] == [str(tmp_path / "work"), "(environment)"]
    assert len(row) == 2 + len(describe(_recipe(), {}, steps=("test",), environ={}))
    assert not (tmp_path / "work").exists()  # nothing fetched, built or written
    assert "+ " not in p.stderr  # no program was run


def test_show_options_refuses_bad_settings_in_one_line(tmp_path):
    p = _cli(tmp_path, PATCHKIT_TEST_PROCS="0")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == "patchkit: error: --test-procs / PATCHKIT_TEST_PROCS: expected at least 1, got 0\n"
    assert not (tmp_path / "work").exists()
