"""bench:decode's depth states across processes (issue 37, patches/local/0010): the environment of each arm's
llama-bench processes, for the argv the step really builds (decode.matrix_argvs, real_argv)."""

from __future__ import annotations

import os
from pathlib import Path

from patchkit.measure import decode, decode_args, depth_state
from patchkit.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[2]
KW = {"type_k": "q4_0", "type_v": "q4_0", "repetitions": 2, "threads": 0, "ngl": 99, "extra": ()}


def _argvs(model: Path) -> list[list[str]]:
    """The H200 matrix's processes (two: pp at depths 0 and 32768, tg at 0, 32768, 122880) and the real model's."""
    argvs = decode.matrix_argvs(
        model, depths=(0, 32768, 122880), pp_depths=(0, 32768), n_prompt=(512,), n_gen=(32,), ubatch=(512, 1), **KW
    )
    return [*argvs, decode.real_argv(model.with_name("real.gguf"), n_prompt=512, n_gen=32, **KW)]


def test_the_default_recipe_lists_the_patch_and_its_file_exists():
    recipe = load_recipe(str(ROOT / "recipes" / "default.toml"))
    assert depth_state.listed(recipe.series)
    (p,) = [p for p in recipe.series if Path(p.file).name == depth_state.PATCH]
    assert p.local and (ROOT / p.file).is_file()
    assert depth_state.ENV in (ROOT / p.file).read_text()  # the variable the step sets is the patch's


def test_each_arm_has_one_folder_for_all_its_rounds_and_processes_of_one_model(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    (model.with_name("real.gguf")).write_bytes(b"GGUF real")
    s = depth_state.States(tmp_path / "ds")
    *matrix, real = _argvs(model)
    arms = {"base": "k-base", "base#2": "k-base", "+0001": "k-1", "+0001+0002": "k-12"}
    env = {(lab, i): s.env(lab, k, argv) for lab, k in arms.items() for i, argv in enumerate([*matrix, real])}
    folders = {e[depth_state.ENV] for e in env.values()}
    # the matrix's processes of an arm share one folder (the tg process loads the pp process's depth 32768); the
    # real model's has its own; every arm its own, base's A/A copy too (its first round prefills, as base's does)
    assert all(env[(lab, 0)] == env[(lab, 1)] for lab in arms)
    assert len({env[(lab, 0)][depth_state.ENV] for lab in arms}) == 4
    assert len(folders) == 8 and all(Path(f).parent == tmp_path / "ds" for f in folders)
    assert all(env[(lab, 2)] != env[(lab, 0)] for lab in arms)
    # a round's argv (cut to its open depths) keeps the folder: the model and cache types are unchanged
    later = decode_args.with_values(matrix[1], "-d", [122880])
    assert s.env("base", "k-base", later) == env[("base", 1)]
    # other cache types or another model file: another folder
    assert s.env("base", "k-base", decode_args.with_values(matrix[1], "-ctk", [8])) != env[("base", 1)]
    model.write_bytes(b"GGUF, written again")
    assert s.env("base", "k-base", matrix[1]) != env[("base", 1)]


def test_without_the_patch_the_variable_is_set_empty(tmp_path):
    (argv, *_) = _argvs(tmp_path / "m.gguf")
    assert depth_state.States().env("base", "k", argv) == {depth_state.ENV: ""}
    assert not depth_state.listed([p for p in load_recipe(None).series if depth_state.PATCH not in p.file])


def test_the_folders_are_in_the_work_folder_and_removed_when_the_step_ends(tmp_path):
    with depth_state.states(tmp_path) as s:
        env = s.env("base", "k", ["-m", "x.gguf"])
        s.make(env)
        (Path(env[depth_state.ENV]) / "depth-256-f16-f16.state").write_bytes(b"state")
        assert Path(env[depth_state.ENV]).is_relative_to(tmp_path / "depth-state")
    assert not (tmp_path / "depth-state").exists()
    with depth_state.states(None) as s:
        assert s.root is None


def test_a_killed_steps_folder_goes_with_the_next_step_and_a_live_ones_stays(tmp_path):
    """A step killed (SIGKILL: no `finally`) leaves its folder; the next step removes it when its process is gone."""
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead, live = tmp_path / "depth-state" / f"{gone.stdout.strip()}-1", tmp_path / "depth-state" / f"{os.getppid()}-1"
    for d in (dead, live):
        d.mkdir(parents=True)
        (d / "depth-256-f16-f16.state").write_bytes(b"state")
    with depth_state.states(tmp_path):
        assert not dead.exists() and live.is_dir()
    assert live.is_dir()


def test_the_recorded_ab_loads_in_a_second_process_and_times_the_same(capsys):
    """tests/fixtures/depth-state-ab (PROVENANCE.md): the real model at depth 4096 on 2 cores, prefill against load."""
    from tests.conftest import script

    ab = script("depth_state_ab")
    fix = ROOT / "tests" / "fixtures" / "depth-state-ab"
    for log in sorted((fix / "raw").glob("ab-r*-*.stderr.log")):
        err, mode = log.read_text(), log.name.split("-")[2].removesuffix(".stderr.log")
        assert ("state loaded from" in err) == (mode == "load"), log.name
        assert ("state saved to" in err) == (mode == "save"), log.name
    table = ab.show(fix)
    rows = {ln.split("|")[1].strip(): ln for ln in table.splitlines() if ln.startswith("| ")}
    assert float(rows["load"].split("|")[4]) < float(rows["prefill"].split("|")[4]) / 5  # medians: 2.1 s, 30.4 s
    lo, hi = (float(x) for x in rows["tg16 @ d4096"].split("[")[1].split(",")[:2])
    assert lo < 1 < hi  # load / prefill of the timed t/s: its interval holds 1
