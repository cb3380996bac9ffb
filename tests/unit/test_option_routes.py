"""Every setting a user can type, through each layer it has (command line, environment, recipe key,
[profile.<backend>]), generated from option_set's table: `patchkit run --show-options` (cli.main, in
process) names the value given and that layer. Each route is tried with a zero / empty / false value
where the setting's type holds one, and with another value; a setting added to the table is tried here
without a line of this file changing (only a setting whose values are names of something, such as a
step or a GPU, names its sample in SAMPLES)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchkit import cli, option_set
from patchkit.cli.base import finish
from patchkit.option_set import OPTION, OPTIONS, Option

ROOT = Path(__file__).resolve().parents[2]
BASE = (ROOT / "recipes" / "default.toml").read_text().split("[[series]]")[0]  # [recipe] and [base] only
SHOWN_OWN = ("recipe", "work")  # the command's own settings --show-options prints beside RunOptions'

# the values of a setting whose values are names of something (a step, a suite, a GPU, an arch)
SAMPLES: dict[str, tuple[object, ...]] = {
    "build.archs": (("90",), ("89", "90")),
    "build.backend": ("cpu", "cuda"),
    "executor": ("local", "ray"),
    "kernel.backend": ("CPU", "CUDA1"),
    "kernel.target_gpus": ((), ("RTX 4070",)),
    "skip": ((), ("test",)),
    "test.suites": (("flash_attn",), ("flash_attn", "other")),
}


def _samples(o: Option) -> tuple[object, ...]:
    """A zero / empty / false value where the type holds one (the least accepted otherwise), and another."""
    if o.name in SAMPLES:
        return SAMPLES[o.name]
    if o.type == "int":
        return (o.minimum, 7)
    if o.type == "float":
        return (0.0, 0.25)
    if o.type == "ints":
        return ((0,), (0, 8))
    if o.type == "strs":
        return ((), ("a", "b"))
    if o.type == "bool":
        return (o.action != "store_false",)  # a flag gives the value it stands for
    return ("", "x") if o.empty else ("x",)


def _flags(o: Option) -> tuple[str, ...]:
    """The flags that set `o`: its own, or those of the setting sharing its argument (--decode-rounds)."""
    if o.flags:
        return o.flags
    return next((p.flags for p in OPTIONS if p.flags and p.arg == o.arg and p is not o), ())


def _argv(o: Option, value: object) -> list[str] | None:
    """The command line that gives `o` this value; None where none can (an empty list of a repeatable flag)."""
    flags = _flags(o)
    flag = flags[0]
    if o.type == "bool":
        return [flag]
    if not flag.startswith("-"):  # a positional (bench/test suites): `run` has none
        return None
    if isinstance(value, tuple):
        if o.action == "append":
            return [x for v in value for x in (flag, str(v))] or None
        return [flag, ",".join(map(str, value))] if value else None
    return [flag, str(value)]


def _shown(value: object) -> str:
    """A value as --show-options prints it."""
    text = ", ".join(map(str, value)) if isinstance(value, tuple) else str(value)
    return text or "-"


def _recipe(tmp: Path, tables: dict[str, dict[str, object]]) -> Path:
    """A recipe of [base], [suites] and these tables (TOML values written as JSON: the same for these types)."""
    text = BASE + '\n[suites]\nflash_attn = ["-o", "FLASH_ATTN_EXT"]\nother = ["-o", "MUL_MAT"]\n'
    for table, keys in tables.items():
        if table == "suites":
            continue
        text += f"\n[{table}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items())
    path = tmp / "recipes" / "r.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _show(capsys, monkeypatch, tmp: Path, argv: list[str], env: dict[str, str], tables=None) -> dict[str, tuple]:
    """`patchkit run --show-options` in process: {setting: (value as shown, source)}."""
    for o in OPTIONS:
        if o.env:
            monkeypatch.delenv(o.env, raising=False)
    monkeypatch.setenv("PATCHKIT_WORK", str(tmp / "work"))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    recipe = _recipe(tmp, tables or {})
    status = cli.main(["run", "--show-options", "-r", str(recipe), *argv])
    out, err = capsys.readouterr()
    assert status == 0, err
    rows = {}
    for line in out.splitlines()[1:]:
        name, rest = line.strip().split("  ", 1)
        value, _, source = rest.strip().rpartition("  (")
        rows[name] = (value, source.rstrip(")"))
    assert not (tmp / "work").exists()  # nothing written
    return rows


def _shown_settings() -> set[str]:
    from patchkit.options import RUN_FIELDS

    return {o.name for o in OPTIONS if "." in o.name} | set(RUN_FIELDS) | set(SHOWN_OWN)


def _expected(o: Option, value: object, route: str) -> str:
    if o.name == "work":
        return str(Path(value).resolve())  # type: ignore[arg-type]
    if o.name == "build.cmake_options" and route == "command line":  # added to the recipe's, as -D options
        return _shown(tuple(v if str(v).startswith("-") else f"-D{v}" for v in value))  # type: ignore[union-attr]
    return _shown(value)


CASES = [
    pytest.param(o.name, route, v, id=f"{o.name}-{route}-{_shown(v)}")
    for o in OPTIONS
    if o.name in _shown_settings() and o.name != "recipe"
    for route in ("command line", "environment", "recipe", "profile")
    if {"command line": bool(_flags(o)), "environment": bool(o.env), "recipe": bool(o.key), "profile": bool(o.profile)}[
        route
    ]
    for v in _samples(o)
    if route != "command line" or _argv(o, v) is not None
]


@pytest.mark.parametrize(("name", "route", "value"), CASES)
def test_each_setting_through_each_layer_shows_its_value_and_that_layer(
    name, route, value, tmp_path, capsys, monkeypatch
):
    o = OPTION[name]
    if name == "work":
        value = str(tmp_path / f"w-{route.replace(' ', '-')}")
    argv, env, tables = [], {}, {}
    if route == "command line":
        argv = _argv(o, value)
    elif route == "environment":
        raw = ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
        env = {o.env: raw}
    else:
        table, key = o.key.rsplit(".", 1) if "." in o.key else (o.key, o.key)
        if route == "recipe":
            tables = {table: {key: list(value) if isinstance(value, tuple) else value}}
        else:  # [profile.cpu] over the plain key (written too, with another value)
            other = next(v for v in _samples(o) if v != value)
            tables = {
                "build": {"backend": "cpu"},
                "profile.cpu": {o.profile.replace("_", "-"): list(value) if isinstance(value, tuple) else value},
            }
            if o.key:
                tables[table] = {key: list(other) if isinstance(other, tuple) else other}
    if name == "test.suites" and route == "recipe":
        value = ("flash_attn", "other")  # the [suites] table gives all its names
    rows = _show(capsys, monkeypatch, tmp_path, argv, env, tables)
    want = _expected(o, value, route)
    assert rows[name] == (want, "recipe" if route == "profile" else route)


def test_every_setting_that_can_be_typed_is_tried_with_a_zero_where_its_type_holds_one():
    own = {"recipe", "offline", "executor"}  # the command's own: test_the_commands_own_settings
    typed = {o.name for o in OPTIONS if _flags(o) or o.env or o.key}
    assert typed - own <= {c.values[0] for c in CASES}
    routes = {(c.values[0], c.values[1]) for c in CASES}
    zeros = {(c.values[0], c.values[1]) for c in CASES if c.values[2] in (0, "", ())}
    for name, route in routes:
        o = OPTION[name]
        holds_zero = (o.type in ("int", "float") and o.minimum == 0) or (o.type == "str" and o.empty)
        if holds_zero and name not in SAMPLES:
            assert (name, route) in zeros
    for name in ("build.jobs", "test.jobs", "kernel.max_seconds", "kernel.min_us"):  # issue 35's zero bug
        assert (name, "command line") in zeros and (name, "environment") in zeros


@pytest.mark.parametrize(
    ("argv", "env", "name", "want"),
    [
        (["--offline"], {}, "offline", option_set.Value(True, "command line", "command line")),
        ([], {}, "offline", option_set.Value(False, "default", "default")),
        (
            ["--executor", "local"],
            {"PATCHKIT_EXECUTOR": "ray"},
            "executor",
            option_set.Value("local", "command line", "command line"),
        ),
        ([], {"PATCHKIT_EXECUTOR": "ray"}, "executor", option_set.Value("ray", "environment", "PATCHKIT_EXECUTOR")),
        (["-r", "x.toml"], {}, "recipe", option_set.Value("x.toml", "command line", "command line")),
    ],
)
def test_the_commands_own_settings(argv, env, name, want):
    args = finish(cli.make_parser().parse_args(["run", *argv]))
    assert option_set.resolve_one(OPTION[name], args.typed, env) == want


def test_zero_on_the_command_line_beats_the_recipe_and_the_environment(tmp_path, capsys, monkeypatch):
    """The zero bug of issue 35: `--kernel-max-seconds 0` ("no cap") was read as not given."""
    argv = ["--kernel-max-seconds", "0", "--kernel-min-us", "0", "-j", "0", "--test-jobs", "0"]
    env = {"PATCHKIT_KERNEL_MAX_SECONDS": "5", "PATCHKIT_JOBS": "3", "PATCHKIT_TEST_JOBS": "4"}
    tables = {"bench.kernel": {"max-seconds": 240, "min-us": 100000}, "build": {"jobs": 8}}
    rows = _show(capsys, monkeypatch, tmp_path, argv, env, tables)
    for name in ("kernel.max_seconds", "kernel.min_us", "build.jobs", "test.jobs"):
        assert rows[name] == ("0", "command line")
    rows = _show(capsys, monkeypatch, tmp_path, [], {"PATCHKIT_JOBS": "0"}, tables)
    assert rows["build.jobs"] == ("0", "environment") and rows["kernel.max_seconds"] == ("240", "recipe")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PATCHKIT_WORK": ""}, "--work / PATCHKIT_WORK: expected a value, got ''"),
        ({"PATCHKIT_ARCH": ""}, "--arch / PATCHKIT_ARCH: expected a value, got ('',)"),
        ({"PATCHKIT_JOBS": ""}, "--jobs / PATCHKIT_JOBS: expected a whole number, got ''"),
        ({"PATCHKIT_BACKEND": ""}, "--backend / PATCHKIT_BACKEND: expected one of cuda, cpu, got ''"),
    ],
)
def test_a_variable_set_empty_is_set_and_refused_in_one_line_where_empty_is_no_value(
    env, message, tmp_path, capsys, monkeypatch
):
    for o in OPTIONS:
        if o.env:
            monkeypatch.delenv(o.env, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert cli.main(["run", "--show-options", "-r", str(_recipe(tmp_path, {}))]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"patchkit: error: {message}\n"
