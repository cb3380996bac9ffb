"""option_set: each setting declared once; the flag, the environment variable and the recipe key give
the same value through the one chain, each with its source; bad values are one line naming their route."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from patchkit import option_set, options
from patchkit.cli import make_parser
from patchkit.errors import OptionError
from patchkit.option_set import OPTION, OPTIONS, resolve_one
from patchkit.options import Machine, describe, resolve_run
from patchkit.recipe import parse_recipe
from patchkit.workspace import work_folder

ROOT = Path(__file__).resolve().parents[2]
NONE = Machine(cores=0, gpus=0)


def _recipe(**kernel):
    path = ROOT / "recipes" / "default.toml"
    r = parse_recipe(path.read_text(), path)
    return dataclasses.replace(r, kernel=dataclasses.replace(r.kernel, **kernel)) if kernel else r


@pytest.mark.parametrize("name", ["kernel.max_rounds", "kernel.max_seconds", "kernel.min_us"])
def test_a_setting_gives_the_same_value_through_each_route_with_its_source(name):
    o = OPTION[name]
    field = name.split(".", 1)[1]
    value = 7
    via_recipe = resolve_run(_recipe(**{field: value}), {}, steps=(), environ={}, machine=NONE)
    via_env = resolve_run(_recipe(), {}, steps=(), environ={o.env: str(value)}, machine=NONE)
    args = vars(make_parser().parse_args(["run", o.flags[0], str(value)]))
    via_flag = resolve_run(_recipe(), args, steps=(), environ={}, machine=NONE)
    assert getattr(via_recipe.kernel, field) == getattr(via_env.kernel, field) == getattr(via_flag.kernel, field) == 7
    got = {
        route: {n: s for n, _, s in describe(_recipe(**rk), cli, steps=(), environ=env, machine=NONE)}[name]
        for route, rk, env, cli in (
            ("recipe", {field: value}, {}, {}),
            ("environment", {}, {o.env: "7"}, {}),
            ("command line", {}, {}, args),
        )
    }
    assert got == {"recipe": "recipe", "environment": "environment", "command line": "command line"}
    # the command line beats the environment beats the recipe
    both = resolve_run(_recipe(**{field: 5}), args, steps=(), environ={o.env: "6"}, machine=NONE)
    assert getattr(both.kernel, field) == 7


def test_the_declared_default_is_the_recipes_and_the_runners():
    from patchkit.measure.decode import DecodeTiming
    from patchkit.measure.kernel import Timing
    from patchkit.recipe import KernelBench

    t, k, d = Timing(), KernelBench(), DecodeTiming()
    assert (t.max_rounds, t.max_noise, t.min_time_s, t.min_us) == (k.max_rounds, k.max_noise, k.min_time, k.min_us)
    assert (k.max_rounds, k.max_seconds, t.max_seconds) == (
        OPTION["kernel.max_rounds"].default,
        OPTION["kernel.max_seconds"].default,
        float(OPTION["kernel.max_seconds"].default),
    )
    want = [OPTION[f"decode.{n}"].default for n in ("rounds", "max_rounds", "max_noise", "max_seconds")]
    assert [d.min_rounds, d.max_rounds, d.max_noise, d.max_seconds] == want


@pytest.mark.parametrize("table", ["build", "kernel", "decode", "numerics"])
def test_every_field_of_a_recipe_table_is_a_declared_setting_with_its_default(table):
    """A recipe key is declared once, in option_set: its field's default is the setting's (a default
    written twice, as build.arch's "89" against the table's () was, fails here)."""
    from patchkit.recipe import Recipe

    cls = typing.get_type_hints(Recipe)[table]
    by_path = {o.recipe: o for o in OPTIONS if o.recipe}
    for f in dataclasses.fields(cls):
        if (table, f.name) == ("numerics", "model"):  # [model] keys numerics overrides (patchkit.measure.model)
            continue
        o = by_path.get(f"{table}.{f.name}")
        assert o is not None, f"recipe field {table}.{f.name} is no setting of option_set"
        assert f.default == o.default, o.name
        assert o.key.rsplit(".", 1)[-1] == f.name.replace("_", "-")  # the TOML key is the field's name
        assert o.name.split(".", 1)[1] in (f.name, f.name + "s", f.name.removeprefix("cache_"))  # one name


def test_every_field_of_the_run_options_is_declared():
    leaves = options._leaves(resolve_run(_recipe(), {}, steps=(), environ={}, machine=NONE))
    derived = {"steps", "sources", "test.jobs_default", "test.default_variants"}
    assert set(leaves) - derived <= set(OPTION)
    flags = [f for o in OPTIONS for f in o.flags]
    envs = [o.env for o in OPTIONS if o.env]
    assert len(flags) == len(set(flags)) and len(envs) == len(set(envs))  # each flag and variable once


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PATCHKIT_BACKEND": "rocm"}, "--backend / PATCHKIT_BACKEND: expected one of cuda, cpu, got 'rocm'"),
        ({"PATCHKIT_KERNEL_MIN_US": "lots"}, "--kernel-min-us / PATCHKIT_KERNEL_MIN_US: expected a whole number"),
        ({"PATCHKIT_TEST_PROCS": "0"}, "--test-procs / PATCHKIT_TEST_PROCS: expected at least 1, got 0"),
    ],
)
def test_a_bad_environment_value_is_one_line_naming_the_variable(env, message):
    with pytest.raises(OptionError) as e:
        resolve_run(_recipe(), {}, steps=(), environ=env, machine=NONE)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_work_and_executor_go_through_the_chain():
    assert work_folder(None, {}) == ".patchkit"
    assert work_folder(None, {"PATCHKIT_WORK": "/w"}) == "/w"
    assert work_folder("/cli", {"PATCHKIT_WORK": "/w"}) == "/cli"
    ex = OPTION["executor"]
    assert resolve_one(ex, {}, {"PATCHKIT_EXECUTOR": "ray"}) == option_set.Value("ray", "environment", ex.env)
    with pytest.raises(OptionError, match=r"^--executor / PATCHKIT_EXECUTOR: expected one of local, ray, got .k8s.$"):
        resolve_one(ex, {}, {"PATCHKIT_EXECUTOR": "k8s"})


def test_the_parser_is_generated_from_the_declarations():
    p = make_parser()
    a = vars(p.parse_args(["run", "-j", "3", "--no-overlap", "--arch", "90", "-D", "X=1", "--depths", "0,8"]))
    opts = resolve_run(_recipe(), a, steps=(), environ={}, machine=NONE)
    assert (opts.build.jobs, opts.overlap, opts.build.archs, opts.decode.depths) == (3, False, ("90",), (0, 8))
    assert opts.build.cmake_options[-1] == "-DX=1"
    with pytest.raises(SystemExit):
        p.parse_args(["run", "--kernel-max-rounds", "0"])  # the declared argument type: at least 1


@pytest.mark.parametrize("flag", ["--numerics-n-predict", "--kl-chunks"])
def test_numerics_counts_of_zero_are_refused_by_the_parser(flag, capsys):
    """`--numerics-n-predict 0` generated nothing to compare and was taken (faults.md); --kl-chunks 0 likewise."""
    with pytest.raises(SystemExit) as e:
        make_parser().parse_args(["run", flag, "0"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"argument {flag}: '0': expected a whole number of at least 1" in err
    [o] = [o for o in OPTIONS if flag in (o.flags or ())]
    assert o.minimum == 1 and o.recipe  # the recipe's key is checked against the same declared minimum
