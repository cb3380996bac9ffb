"""The fast defaults (issue 27): what the command line leaves open comes from the machine at hand, each
value recorded with where it came from, and on a 16-core H200 they are the flags the examples used."""

from __future__ import annotations

from pathlib import Path

from patchkit.cli import make_parser
from patchkit.measure import test as test_step
from patchkit.options import Machine, defaults_line, resolve_run, series_end
from patchkit.recipe import load_recipe
from patchkit.run import steps

ROOT = Path(__file__).resolve().parents[2]
H200 = Machine(cores=16, gpus=1)  # a lent H200: 16 cores, one device
KINDS = tuple(k.name for k in steps.STEPS)


def _resolve(argv: list[str], machine: Machine, environ: dict | None = None):
    recipe = load_recipe(str(ROOT / "recipes" / "default.toml"))
    args = make_parser().parse_args(["run", *argv])
    return recipe, resolve_run(recipe, vars(args), steps=KINDS, environ=environ or {}, machine=machine)


def test_the_h200_defaults_are_the_flags_the_examples_used():
    _, plain = _resolve(["--arch", "90", "--check-arch", "89"], H200)
    flags = ["--test-variant", "base", "--test-variant", "+0001+0002", "--test-procs", "2", "--test-jobs", "16"]
    _, asked = _resolve(["--arch", "90", "--check-arch", "89", *flags, "-j", "16", "--build-pool", "4"], H200)
    assert (plain.build.jobs, plain.test.procs, plain.test.jobs) == (16, 2, 16)
    assert (plain.build.pool, asked.build.pool) == (2, 4)  # 2 at once on 16 cores and a GPU (an H100 host measured it)
    assert (asked.build.jobs, asked.test.procs, asked.test.jobs) == (16, 2, 16)
    assert plain.test.variants == asked.test.variants == ("base", "+0001+0002")
    # what chose them: the machine for the defaults, the command line for the flags
    src = {o: why for o, _, why in plain.sources}
    assert src["-j"] == src["--test-jobs"] == "16 cores"
    assert src["--test-procs"].startswith("1 CUDA device(s)")
    assert src["--build-pool"].startswith("16 cores, a CUDA device: 2 at once")
    assert all(why == "command line" for o, _, why in asked.sources if o != "--numerics-procs")  # no example set it
    assert plain.test.jobs_default and plain.test.default_variants
    assert not asked.test.jobs_default and not asked.test.default_variants
    line = defaults_line(plain)
    assert "\n" not in line and line.startswith("patchkit: options: -j 16 (16 cores")


def test_the_environment_and_the_command_line_win_and_say_so():
    _, o = _resolve(["--arch", "90", "--test-procs", "3"], H200, {"PATCHKIT_TEST_JOBS": "4"})
    src = {opt: (v, why) for opt, v, why in o.sources}
    assert (o.test.procs, o.test.jobs) == (3, 4)
    assert src["--test-procs"] == ("3", "command line") and src["--test-jobs"] == ("4", "PATCHKIT_TEST_JOBS")
    assert not o.test.jobs_default  # asked for: a tool without -j drops it all the same, its note says "--test-jobs"


def test_cpu_and_gpu_less_machines_keep_the_old_behaviour():
    _, cpu = _resolve(["--backend", "cpu"], Machine(cores=2, gpus=0))
    assert (cpu.build.jobs, cpu.test.procs, cpu.test.jobs) == (0, 1, 0)  # ninja's -j: the 2-core CPU run
    assert cpu.build.pool == 1  # one variant build after another: two at once were slower on 2 cores
    _, build_only = _resolve(["--arch", "90"], Machine(cores=2, gpus=0))
    assert (build_only.build.jobs, build_only.test.procs, build_only.test.jobs) == (2, 1, 0)
    assert build_only.build.pool == 1  # no CUDA device: the builds are checks, one at a time
    _, small = _resolve(["--arch", "90"], Machine(cores=6, gpus=1))
    assert small.build.pool == 1  # fewer than 2 x POOL_CORES cores: one at a time


def test_tested_variants_base_and_the_series_end_prefixes_when_asked_or_changed():
    recipe, o = _resolve(["--arch", "90"], H200)
    states = ["base", "+0001", "+0001+0002"]
    assert series_end(recipe) == "+0001+0002"
    assert test_step.tested_variants(o, states, changed=False) == {"base", "+0001+0002"}
    # a run of some variants only (--variant): the longest prefix among them is the end
    assert test_step.tested_variants(o, ["base", "+0001"], changed=False) == {"base", "+0001"}
    # --changed: every variant, the step keeps the changed ones (a prefix too, when it changed)
    _, ch = _resolve(["--arch", "90", "--changed"], H200)
    assert ch.test.variants == () and test_step.tested_variants(ch, states, changed=True) == set(states)
    _, asked = _resolve(["--arch", "90", "--test-variant", "+0001"], H200)
    assert test_step.tested_variants(asked, states, changed=False) == {"+0001"}


def test_this_machine_counts_the_cpus_this_process_may_use():
    import os

    from patchkit.options import this_machine

    assert this_machine().cores == len(os.sched_getaffinity(0)) >= 1


def test_numerics_runs_three_processes_at_once_on_a_cuda_machine_and_one_on_the_cpu():
    _, gpu = _resolve(["--arch", "90"], H200)
    _, cpu = _resolve(["--backend", "cpu"], Machine(cores=2, gpus=0))
    _, none = _resolve(["--arch", "90"], Machine(cores=2, gpus=0))
    _, asked = _resolve(["--arch", "90"], H200, {"PATCHKIT_NUMERICS_PROCS": "2"})
    _, typed = _resolve(["--arch", "90", "--numerics-procs", "1"], H200, {"PATCHKIT_NUMERICS_PROCS": "2"})
    assert (gpu.numerics.procs, cpu.numerics.procs, none.numerics.procs) == (3, 1, 1)
    assert (asked.numerics.procs, typed.numerics.procs) == (2, 1)
    src = {o: (v, why) for o, v, why in gpu.sources}
    assert src["--numerics-procs"][0] == "3" and "predicted" in src["--numerics-procs"][1]
    assert {o: (v, why) for o, v, why in typed.sources}["--numerics-procs"] == ("1", "command line")


def test_the_build_command_takes_the_runs_build_defaults():
    """`patchkit build` on the H200 (2026-12-06 06:53): base 263 s, then +0001 30 s and +0001+0002 33 s one after
    the other, since it took ninja's -j and a pool of 1 where `run` takes the cores and 2."""
    from patchkit.options import build_options_said

    recipe = load_recipe(str(ROOT / "recipes" / "default.toml"))
    args = vars(make_parser().parse_args(["build", "--arch", "90"]))
    _, run = _resolve(["--arch", "90"], H200)
    build, said = build_options_said(recipe, args, H200, environ={})
    assert (build.jobs, build.pool) == (run.build.jobs, run.build.pool) == (16, 2)
    assert said == "patchkit: options: -j 16 (16 cores); --build-pool 2 (16 cores, a CUDA device: 2 at once" + (
        " (an H100 host: both variants at once in 32-33 s))"
    )
    asked, said = build_options_said(recipe, {**args, "build_pool": 1}, H200, environ={})
    assert asked.pool == 1 and "--build-pool 1 (command line)" in said
    cpu, _ = build_options_said(recipe, {**args, "backend": "cpu"}, Machine(cores=2, gpus=0), environ={})
    assert (cpu.jobs, cpu.pool) == (0, 1)


def test_the_build_commands_last_line_says_wall_time_not_the_sum():
    """The H100 of 2026-12-06 09:03 (examples/h100-2026-12-06c, job 3): base 291 s, then +0001 36 s and +0001+0002
    41 s at once; the line said "built 3 of 3 variants in 369 s", their sum, where the builds took ~334 s."""
    from patchkit.build import BuildResult
    from patchkit.cli.commands import built_line

    def r(v, s, reused=False):
        return BuildResult(variant=v, key="k", head="h", bin_dir="b", seconds=s, reused=reused, steps=1, log="l")

    pooled = [r("base", 291.0), r("+0001", 36.0), r("+0001+0002", 41.0)]
    assert built_line(pooled, 334.2) == (
        "built 3 of 3 variants in 334 s (their builds' seconds add up to 368 s: built at once)"
    )
    one_by_one = [r("base", 0.0, reused=True), r("+0001", 30.0), r("+0001+0002", 33.0)]
    assert built_line(one_by_one, 63.4) == "built 2 of 3 variants in 63 s (1 reused)"
