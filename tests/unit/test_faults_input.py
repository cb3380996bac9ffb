"""Issue 29 (bad input, 29c): each bad input is one line `patchkit: error: ...`, exit 2, nothing written.

Real git (a toy sdist base, as in test_faults_workdir.py), real recorded tool output, real files.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchkit import build, cli, parsers
from patchkit.errors import ApplyError, ParseError, PatchkitError
from patchkit.results import Bundle
from patchkit.sweep.spec import SweepError, load_spec, override
from tests.unit.test_faults_workdir import ROOT, Toy, _a_finished_build

GIT_FRAGMENTS = ("hint:", "git am", "To restore", "When you have resolved", "stderr:", "There")


def _broken(toy: Toy, how: str) -> str:
    good = (toy.proj / "patches" / "0002-b.patch").read_text()
    if how == "corrupt-hunk":  # its @@ counts promise more lines than it has
        return good.replace("@@ -1 +1 @@", "@@ -1,3 +1 @@")
    if how == "no-diff":  # the mail without its diff
        return good.split("diff --git")[0]
    if how == "not-a-patch":
        return "hello\n"
    if how == "conflict":  # its old line is not the base's, 3-way fails on a real merge conflict
        return good.replace("-int b = 2;", "-int b = 3;")
    raise AssertionError(how)


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("corrupt-hunk", ": file ggml/src/b.c, hunk #1 (@@ -1,3 +1 @@) (its line counts"),
        ("no-diff", "no diff in it"),
        ("not-a-patch", "no diff in it"),
        ("conflict", "file ggml/src/b.c, hunk #1 (@@ -1 +1 @@)"),
    ],
)
def test_a_patch_that_does_not_apply_is_one_line_naming_patch_and_hunk(tmp_path, how, says):
    toy = Toy(tmp_path)
    toy.write_patches()
    (toy.proj / "patches" / "0002-b.patch").write_text(_broken(toy, how))
    _states, errors = toy.apply()
    [e] = errors
    msg = str(e)
    assert isinstance(e, ApplyError) and "\n" not in msg, msg
    assert msg.startswith("variant +0001+0002: patch patches/0002-b.patch does not apply: "), msg
    assert says in msg, msg
    assert not any(f in msg for f in GIT_FRAGMENTS), msg


# -- samples that are not finite numbers, refused where they are parsed

H200 = ROOT / "examples" / "h200"


def _run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(list(args))
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("bad", ["-1e309", "nan", "inf", "-3.5"])
def test_a_perf_time_that_is_not_a_finite_number_is_refused_naming_file_and_line(bad):
    text = (H200 / "raw" / "perf-r1-base.log").read_text()
    out = text.split("\n", 1)[1]  # the tool's output, without patchkit's `$ command` line
    n = next(i for i, ln in enumerate(out.splitlines(), 1) if ln.startswith("INSERT INTO"))
    assert "'13.229651'" in out.splitlines()[n - 1]
    bad_out = out.replace("'13.229651'", f"'{bad}'", 1)
    parsers.parse_perf_sql(out, "perf.log")  # the real log parses
    with pytest.raises(ParseError, match=rf"^perf\.log:{n}: column time_us: .* is not a finite, non-negative number$"):
        parsers.parse_perf_sql(bad_out, "perf.log")
    console = (ROOT / "tests" / "fixtures" / "cpu" / "perf_fa_cpu_console.txt").read_text()
    m = re.search(r"(?m)^  \S.* runs - +([0-9.]+) us/run", console)
    assert m
    line = console.count("\n", 0, m.start()) + 1
    bad_console = console[: m.start(1)] + bad + console[m.end(1) :]
    parsers.parse_perf_console(console, "c.txt")
    with pytest.raises(ParseError, match=rf"^c\.txt:{line}: us/run: .* is not a finite"):
        parsers.parse_perf_console(bad_console, "c.txt")


@pytest.mark.parametrize(("field", "bad"), [("samples_ns", "1e309"), ("samples_ts", "NaN"), ("avg_ts", "-Infinity")])
def test_a_llama_bench_sample_that_is_not_a_finite_number_is_refused(field, bad):
    text = (ROOT / "tests" / "fixtures" / "cpu" / "bench_tiny.json").read_text()
    recs = parsers.parse_llama_bench_json(text, "b.json")
    assert recs
    pattern = {"samples_ns": r'"samples_ns": \[ ?(\d+)', "samples_ts": r'"samples_ts": \[ ?([0-9.e+]+)'}
    m = re.search(pattern.get(field, rf'"{field}": ([0-9.e+]+)'), text)
    assert m, field
    line = text.count("\n", 0, text.rfind("{", 0, m.start())) + 1
    bad_text = text[: m.start(1)] + bad + text[m.end(1) :]
    with pytest.raises(ParseError, match=rf"^b\.json:{line}: llama-bench field '{field}': .* not a finite"):
        parsers.parse_llama_bench_json(bad_text, "b.json")


def test_an_imported_perf_log_with_a_time_of_minus_1e309_is_an_error_naming_its_line(tmp_path):
    bad = tmp_path / "perf-r1-base.log"
    bad.write_text((H200 / "raw" / "perf-r1-base.log").read_text().replace("'13.229651'", "'-1e309'", 1))
    rc, _out, _ = _run_cli(
        "import", "--work", str(tmp_path / "w"), "--tool", "perf-sql",
        "--log", f"base={bad}", "--log", f"+0001={H200 / 'raw' / 'perf-r1-+0001.log'}",
    )  # fmt: skip
    [run] = (tmp_path / "w" / "runs" / "seed-fattn").glob("*-import")
    step = json.loads((run / "results.json").read_text())["steps"]["bench:kernel"]
    assert rc == 1 and step["status"] == "error", (rc, step["status"])
    assert re.search(r"raw/perf-r1-base\.log:\d+: column time_us: '-inf' is not a finite", step["reason"])
    assert "nan" not in json.dumps(step["data"].get("cases", [])).lower()


# -- import --log base#2=FILE: the A/A copy of base, read by bench:kernel


def test_imported_aa_logs_are_read_as_base_s_aa_copy(tmp_path):
    raw = H200 / "raw"
    logs = []
    for r in (1, 2, 3):
        for v, f in (("base", "base"), ("+0001", "+0001"), ("+0001+0002", "+0001+0002"), ("base#2", "base_aa2")):
            logs += ["--log", f"{v}={raw / f'perf-r{r}-{f}.log'}"]
    rc, _out, err = _run_cli("import", "--work", str(tmp_path / "w"), "--tool", "perf-sql", *logs)
    assert rc == 0, err
    [run] = (tmp_path / "w" / "runs" / "seed-fattn").glob("*-import")
    assert (run / "raw" / "perf-r3-base_aa2.log").is_file()
    data = json.loads((run / "results.json").read_text())
    step = data["steps"]["bench:kernel"]
    assert [v["name"] for v in data["variants"]] == ["base", "+0001", "+0001+0002"]  # no variant 'base#2'
    stored = Bundle.open(H200).data["steps"]["bench:kernel"]["data"]  # as read: per-case floors (issue 34)
    assert step["data"]["labels"] == stored["labels"]
    got = {c["params"]: c["aa_ratio"] for c in step["data"]["cases"]}
    want = {c["params"]: c["aa_ratio"] for c in stored["cases"]}
    assert got == pytest.approx(want) and all(x is not None for x in got.values())
    assert step["data"]["noise_floor"] == pytest.approx(stored["noise_floor"])


@pytest.mark.parametrize("name", ["base#3", "+0001#2"])
def test_an_import_of_another_copy_is_refused_before_anything_is_written(tmp_path, name):
    raw = H200 / "raw"
    rc, _, err = _run_cli(
        "import", "--work", str(tmp_path / "w"), "--tool", "perf-sql",
        "--log", f"base={raw / 'perf-r1-base.log'}", "--log", f"{name}={raw / 'perf-r1-base_aa2.log'}",
    )  # fmt: skip
    assert rc == 2 and err.count("\n") == 1 and f"--log {name}=...: a variant name with '#'" in err, err
    assert not (tmp_path / "w" / "runs").exists()


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{\n  'host': 1\n}\n", ":2: not JSON: Expecting property name"),
        (b"\xff\xfe{}", "not UTF-8 text"),
        (b"[1, 2]", "expected a JSON object (an env.json), got list"),
        (None, "cannot read: No such file or directory"),
    ],
)
def test_import_env_that_is_not_a_json_object_is_refused_before_a_run_folder_is_made(tmp_path, content, says):
    env = tmp_path / "env.json"
    if content is not None:
        env.write_bytes(content)
    rc, _, err = _run_cli(
        "import", "--work", str(tmp_path / "w"), "--tool", "perf-sql",
        "--log", f"base={H200 / 'raw' / 'perf-r1-base.log'}", "--env", str(env),
    )  # fmt: skip
    assert rc == 2 and err.count("\n") == 1 and err.startswith(f"patchkit: error: import: --env {env}"), err
    assert says in err, err
    assert not (tmp_path / "w" / "runs").exists()


# -- recipes and sweep specs that are not UTF-8; sweep sizes checked up front


def test_a_recipe_or_sweep_spec_that_is_not_utf8_is_one_line(tmp_path):
    (tmp_path / "recipes").mkdir()
    recipe = tmp_path / "recipes" / "bad.toml"
    raw = (ROOT / "recipes" / "default.toml").read_bytes().replace(b"seed-fattn", b"caf\xe9", 1)
    recipe.write_bytes(raw)
    rc, _, err = _run_cli("apply", "--work", str(tmp_path / "w"), "-r", str(recipe))
    at = raw.index(b"\xe9")
    assert rc == 2 and err == f"patchkit: error: {recipe}: not UTF-8 text (byte {at}: 0xe9); a recipe is UTF-8 TOML\n"
    assert not (tmp_path / "w").exists()
    spec = tmp_path / "s.toml"
    spec.write_bytes((ROOT / "recipes" / "sweeps" / "h200-8col.toml").read_bytes().replace(b"# The", b"# \xff\xfe", 1))
    with pytest.raises(SweepError, match=r"s\.toml: not UTF-8 text \(byte 2: 0xff\); a sweep spec is UTF-8 TOML$"):
        load_spec(spec)


def _spec_with(tmp_path, old: str, new: str) -> Path:
    text = (ROOT / "recipes" / "sweeps" / "h200-8col.toml").read_text()
    assert old in text
    spec = tmp_path / "s.toml"
    spec.write_text(text.replace(old, new, 1))
    return spec


def test_a_sweep_range_with_a_typo_is_refused_up_front(tmp_path):
    load_spec(_spec_with(tmp_path, "nbatch_fa = [32, 64, 128]", "nbatch_fa = { start = 32, stop = 128, step = 32 }"))
    spec = _spec_with(tmp_path, "nbatch_fa = [32, 64, 128]", "nbatch_fa = { start = 32, stop = 200000 }")
    t0 = time.monotonic()
    with pytest.raises(SweepError, match=r"params\.nbatch_fa: a range of 199969 values .*; at most 1024"):
        load_spec(spec)
    assert time.monotonic() - t0 < 5  # counted, not made
    spec = _spec_with(tmp_path, "nbatch_fa = [32, 64, 128]", "nbatch_fa = { start = 32, stop = 1000 }")
    with pytest.raises(SweepError, match=r"params: 3 \(nthreads\) x 3 \(occupancy\) x 969 \(nbatch_fa\) = 8721 grid"):
        load_spec(spec)
    ok = load_spec(_spec_with(tmp_path, "nbatch_fa = [32, 64, 128]", "nbatch_fa = { start = 32, stop = 400 }"))
    with pytest.raises(SweepError, match=r"^--param: .* = 4428 grid points \(\+ 4 explicit\); at most 4096"):
        override(ok, params=("nthreads=32,64,128,256",))


# -- patchkit's own JSON files when damaged: a build's manifest.json, a variant's state


@pytest.mark.parametrize("content", ["[]", '{"key": "', "", "\udcff"])
def test_a_damaged_build_manifest_is_one_line_and_left_as_it_is(tmp_path, content):
    toy = Toy(tmp_path)
    state, opts, tc, out, _bdir = _a_finished_build(toy)
    manifest = out / "manifest.json"
    raw = content.encode("utf-8", "surrogateescape")
    manifest.write_bytes(raw)
    with pytest.raises(PatchkitError) as e:
        build.find_build(toy.ws, toy.recipe(), opts, state, tc)
    msg = str(e.value)
    assert msg.startswith(f"{manifest}") and "damaged" in msg and "\n" not in msg, msg
    assert msg.endswith("delete it to have patchkit make it again"), msg
    assert manifest.read_bytes() == raw


@pytest.mark.parametrize("content", ["[]", '{"name": "base"}', '{"name": "ba'])
def test_a_damaged_variant_state_is_one_line(tmp_path, content):
    toy = Toy(tmp_path)
    toy.write_patches()
    toy.apply()
    spath = toy.ws.variants("toy") / "+0001.json"
    spath.write_text(content)
    _states, errors = toy.apply()
    [e] = errors
    assert str(e).startswith(f"{spath}") and "damaged" in str(e) and "\n" not in str(e), e
    assert spath.read_text() == content


# -- a full disk during apply: a real tmpfs of 4 MiB (root only), filled up to a few KiB


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {r.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def _fill(disk: Path, leave_kib: int) -> Path:
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as e:
            assert e.errno == errno.ENOSPC
    os.truncate(filler, max(0, filler.stat().st_size - leave_kib * 1024))
    return filler


def _apply_cli(toy: Toy) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [
        sys.executable,
        "-m",
        "patchkit",
        "apply",
        "--work",
        str(toy.ws.root),
        "-r",
        str(toy.proj / "recipes/toy.toml"),
    ]
    return subprocess.run(argv, capture_output=True, text=True, env=env)


@pytest.mark.parametrize("leave_kib", [0, 16, 32, 96])
def test_a_full_disk_during_apply_is_one_line_and_keeps_every_good_tree(small_disk, leave_kib):
    toy = Toy(small_disk / f"t{leave_kib}")
    toy.write_patches()
    filler = _fill(small_disk, leave_kib)
    r = _apply_cli(toy)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("patchkit: error: ") and "does not apply" not in r.stderr, r.stderr  # not the patch
    assert re.search(r"No space left on device|no space left on device|couldn't write|unable to write", r.stderr)
    assert not list((toy.ws.cache / "tmp").glob("apply-*/tree"))  # no scratch tree left
    filler.unlink()
    again = _apply_cli(toy)
    assert again.returncode == 0, again.stderr
    trees = toy.ws.variants("toy")
    assert "b = 20" in (trees / "+0001+0002" / "ggml/src/b.c").read_text()
    assert "a = 10" in (trees / "+0001" / "ggml/src/a.c").read_text()


# -- more of the same kind: a folder where a log is expected, results.json with steps of the wrong type


def test_parse_of_a_folder_or_a_missing_file_is_one_line(tmp_path):
    for path, says in ((tmp_path, "Is a directory"), (tmp_path / "nosuch.log", "No such file or directory")):
        rc, _, err = _run_cli("parse", "--tool", "perf-sql", str(path))
        assert rc == 2 and err == f"patchkit: error: {path}: cannot read: {says}\n", err


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d.update(steps=[]), "'steps' is a JSON list, not the object of steps patchkit writes"),
        (lambda d: d["steps"].update({"bench:decode": 5}), "step 'bench:decode' is malformed: a JSON int"),
        (lambda d: d["steps"]["bench:decode"].update(data=[]), "step 'bench:decode' is malformed: a JSON step with"),
    ],
)
def test_results_with_steps_of_the_wrong_type_are_one_line(tmp_path, change, says):
    run = tmp_path / "run"
    shutil.copytree(H200, run)
    data = json.loads((run / "results.json").read_text())
    change(data)
    (run / "results.json").write_text(json.dumps(data))
    before = (run / "results.json").read_bytes()
    for argv in (("report", str(run)), ("reparse", str(run), "--step", "bench:decode")):
        rc, _, err = _run_cli(*argv)
        assert rc == 2 and err.count("\n") == 1 and err.startswith(f"patchkit: error: {run / 'results.json'}: "), err
        assert says in err, err
    assert (run / "results.json").read_bytes() == before


@pytest.fixture
def read_only(tmp_path):
    """A real read-only file system: a tmpfs mounted, filled, then remounted read-only."""
    disk = tmp_path / "ro"
    disk.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


@pytest.mark.parametrize("command", ["fetch", "apply"])
def test_a_read_only_work_folder_is_one_line_before_anything_is_written(read_only, command):
    """issue 34: a read-only work folder gave EROFS tracebacks."""
    toy = Toy(read_only / "t")
    toy.write_patches()
    shutil.rmtree(toy.ws.cache / "llama.cpp.git")  # nothing fetched yet: the first command makes it
    before = sorted(p.relative_to(read_only) for p in read_only.rglob("*"))
    subprocess.run(["mount", "-o", "remount,ro", str(read_only)], check=True)
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        argv = [
            sys.executable,
            "-m",
            "patchkit",
            command,
            "--work",
            str(toy.ws.root),
            "-r",
            str(toy.proj / "recipes/toy.toml"),
        ]
        r = subprocess.run([*argv, "--offline"], capture_output=True, text=True, env=env)
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(read_only)], check=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"patchkit: error: work folder {toy.ws.root} is on a read-only file system"), r.stderr
    assert sorted(p.relative_to(read_only) for p in read_only.rglob("*")) == before
