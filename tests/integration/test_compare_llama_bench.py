"""llama.cpp's own scripts/compare-llama-bench.py, from the pinned base, reads the databases patchkit writes.

The script is taken from the pinned base commit in the work folder's cache repo (the `base` fixture
fetches it; the variants' `base` worktree holds the same file) and run unedited, as a user would, with
`-b <base label> -c <variant label>`, for `--tool llama-bench` (its default) and `--tool test-backend-ops`.
Its speedup table must list every test and say what the records say. Records: the H200 run
(examples/h200/raw: decode and kernel-bench logs of base, +0001, +0001+0002 and base's A/A copy) and the
CPU fixtures (tests/fixtures/cpu). The script needs GitPython and tabulate.
"""

from __future__ import annotations

import shlex
import statistics
import subprocess
import tarfile
from pathlib import Path

import pytest

from patchkit import parsers, source, vcs, vendored
from patchkit.results import upstreamdb
from patchkit.results.upstreamdb import LLAMA_BENCH, TEST_BACKEND_OPS

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "cpu"
H200 = ROOT / "examples" / "h200" / "raw"
H200_PERF = {"base": "base", "+0001": "+0001", "+0001+0002": "+0001+0002", "base#2": "base_aa2"}


@pytest.fixture(scope="module")
def script(work, base, tmp_path_factory) -> Path:
    """scripts/compare-llama-bench.py of the pinned base, as committed there."""
    r = vcs.git(work.repo, "show", f"{base.commit}:scripts/compare-llama-bench.py", env={"GIT_DIR": str(work.repo)})
    assert r.ok, r.output
    path = tmp_path_factory.mktemp("llama.cpp") / "scripts" / "compare-llama-bench.py"
    path.parent.mkdir()
    path.write_bytes(r.stdout)
    return path


def _compare(script: Path, db: Path, table, baseline: str, compare: str, cwd: Path) -> tuple[list, list]:
    """Run the command upstreamdb documents; returns the printed table's header and rows."""
    cmd = upstreamdb.compare_command(db, table, baseline, compare, script=str(script))
    r = subprocess.run(shlex.split(cmd), cwd=cwd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{cmd} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "differing lengths" not in r.stderr, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("|")]
    cells = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines]
    assert len(cells) >= 3 and set(cells[1][0]) <= set(":-"), r.stdout
    return cells[0], cells[2:]


def _near(cell: str, value: float) -> bool:
    return abs(float(cell) - value) <= 0.005 + 1e-9


def _test_name(r) -> str:
    """The script's test name: pp512, tg128, pp512+tg128, with @d<depth> when the depth is not 0."""
    if r.n_prompt and not r.n_gen:
        name = f"pp{r.n_prompt}"
    elif r.n_gen and not r.n_prompt:
        name = f"tg{r.n_gen}"
    else:
        name = f"pp{r.n_prompt}+tg{r.n_gen}"
    return name + (f"@d{r.n_depth}" if r.n_depth else "")


def _check_llama_bench(script, db, mapping, runs, cwd, n_tests):
    labs = list(mapping)
    by_test = {
        v: {t: [r.avg_ts for r in runs[v] if _test_name(r) == t] for t in {_test_name(r) for r in runs[v]}}
        for v in runs
    }
    for lab in labs[1:]:
        header, rows = _compare(script, db, LLAMA_BENCH, labs[0], lab, cwd)
        assert header[-4:] == ["Test", f"t/s {labs[0]}", f"t/s {lab}", "Speedup"]
        assert len(rows) == n_tests
        base_ts, var_ts = by_test[mapping[labs[0]]], by_test[mapping[lab]]
        for row in rows:
            b, c = statistics.fmean(base_ts[row[-4]]), statistics.fmean(var_ts[row[-4]])
            assert _near(row[-3], b) and _near(row[-2], c) and _near(row[-1], c / b), row


def test_llama_bench_h200_decode(script, tmp_path):
    runs = {
        v: parsers.parse_llama_bench_json(parsers.read_log(H200 / f"decode-r1-{v}.log"), v)
        for v in H200_PERF
        if "#" not in v
    }
    db = tmp_path / upstreamdb.LLAMA_BENCH_DB
    mapping = upstreamdb.write_llama_bench_db(db, runs)
    assert list(mapping) == ["base______", "+0001_____", "+0001+0002"]
    _check_llama_bench(script, db, mapping, runs, tmp_path, n_tests=3)


def test_llama_bench_cpu_fixtures_from_a_git_checkout(script, tmp_path):
    """Two real CPU runs of the same tests; the script run from inside a git repository (patchkit's
    checkout), where it also looks labels up as branch and tag names."""
    runs = {
        "base": parsers.parse_llama_bench_json((FIX / "bench_tiny.json").read_text(), "bench_tiny.json"),
        "+0001": parsers.parse_llama_bench_json((FIX / "bench_tiny_pair.json").read_text(), "bench_tiny_pair.json"),
    }
    db = tmp_path / upstreamdb.LLAMA_BENCH_DB
    mapping = upstreamdb.write_llama_bench_db(db, runs)
    _check_llama_bench(script, db, mapping, runs, ROOT, n_tests=4)


def _check_test_backend_ops(script, db, mapping, runs, cwd, n_cases):
    flops: dict[str, dict[str, list[float]]] = {}
    for v, recs in runs:
        for r in recs:
            flops.setdefault(v, {}).setdefault(r.op_params, []).append(r.flops)
    labs = list(mapping)
    for lab in labs[1:]:
        header, rows = _compare(script, db, TEST_BACKEND_OPS, labs[0], lab, cwd)
        assert header[-3].endswith(f"FLOPS {labs[0]}") and header[-2].endswith(f"FLOPS {lab}")
        assert header[-1] == "Speedup"
        assert len(rows) == n_cases
        i = header.index("Op parameters")
        for row in rows:
            params = row[i]
            b = statistics.fmean(flops[mapping[labs[0]]][params])
            c = statistics.fmean(flops[mapping[lab]][params])
            assert _near(row[-1], c / b), (row, c / b)


def test_test_backend_ops_h200_kernel_bench(script, tmp_path):
    runs = [
        (v, parsers.parse_perf_sql(parsers.read_log(H200 / f"perf-r{r}-{f}.log"), f))
        for r in (1, 2, 3)
        for v, f in H200_PERF.items()
    ]
    db = tmp_path / upstreamdb.TEST_BACKEND_OPS_DB
    mapping = upstreamdb.write_test_backend_ops_db(db, runs)
    assert list(mapping) == ["base______", "+0001_____", "+0001+0002", "base.aa2__"]
    _check_test_backend_ops(script, db, mapping, runs, tmp_path, n_cases=12)


def test_test_backend_ops_cpu_fixture_against_itself(script, tmp_path):
    """The same real records as base and as its A/A copy: every speedup is exactly 1.00."""
    recs = parsers.parse_perf_sql((FIX / "perf_fa_cpu.sql.txt").read_text(), "perf_fa_cpu.sql.txt")
    runs = [("base", recs), ("base#2", recs)]
    db = tmp_path / upstreamdb.TEST_BACKEND_OPS_DB
    mapping = upstreamdb.write_test_backend_ops_db(db, runs)
    _check_test_backend_ops(script, db, mapping, runs, tmp_path, n_cases=3)
    _, rows = _compare(script, db, TEST_BACKEND_OPS, "base____", "base.aa2", tmp_path)
    assert [row[-1] for row in rows] == ["1.00"] * 3


def test_llama_bench_cpu_matrix_prints_the_microbatch_column(script, tmp_path):
    """The decode matrix's pp process (pp16 at micro-batches 16, 4, 1 at depths 0 and 256: matrix_argvs on the
    CPU profile) of two real runs of one binary: the script prints every cell, one row per micro-batch and
    depth, with its "Microbatch size" column, and each speedup is the cell's own."""
    runs = {
        lab: parsers.parse_llama_bench_json((FIX / f).read_text(), f)
        for lab, f in (("base", "bench_matrix_pp_base.json"), ("base#2", "bench_matrix_pp_copy.json"))
    }
    db = tmp_path / upstreamdb.LLAMA_BENCH_DB
    mapping = upstreamdb.write_llama_bench_db(db, runs)
    labs = list(mapping)
    header, rows = _compare(script, db, LLAMA_BENCH, labs[0], labs[1], tmp_path)
    assert "Microbatch size" in header and header[-4:] == ["Test", f"t/s {labs[0]}", f"t/s {labs[1]}", "Speedup"]
    ub = header.index("Microbatch size")
    cells = {(int(r[ub]), r[-4]) for r in rows}
    assert cells == {(u, t) for u in (16, 4, 1) for t in ("pp16", "pp16@d256")} and len(rows) == 6
    ts = {lab: {(r.n_ubatch, _test_name(r)): r.avg_ts for r in recs} for lab, recs in runs.items()}
    for r in rows:
        b, c = ts["base"][(int(r[ub]), r[-4])], ts["base#2"][(int(r[ub]), r[-4])]
        assert _near(r[-3], b) and _near(r[-2], c) and _near(r[-1], c / b), r


# ------------------------------------------------------------------ every base of the vendored table (issue 34)

BASES = ROOT / "tests" / "fixtures" / "bases"


def _base_script(work, version: str, dest: Path) -> Path:
    """scripts/compare-llama-bench.py of that base, unedited: from its commit in the cache repo (`patchkit fetch`
    of a recipe on that base puts it there), else from its sdist in the cache (vendor/llama.cpp of
    llama_cpp_python-<version>.tar.gz, its sha256 the vendored table's)."""
    row = vendored.by_version(version)
    text = vcs.show(work.repo, row.commit, "scripts/compare-llama-bench.py", git_dir=work.repo)
    if text is None:
        text = _script_from_sdist(work, row)
    path = dest / "scripts" / "compare-llama-bench.py"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


def _script_from_sdist(work, row: vendored.Vendored) -> str:
    name = f"llama_cpp_python-{row.version}"
    archive = work.sdist(f"{name}.tar.gz")
    if not archive.is_file():
        pytest.skip(f"{row.version}: neither its llama.cpp ({row.commit[:9]}) in {work.repo} nor {archive}")
    assert source.sha256_file(archive) == row.sha256, f"{archive} is not the vendored table's sdist"
    with tarfile.open(archive) as tar:
        member = tar.extractfile(f"{name}/{vendored.SUBDIR}/scripts/compare-llama-bench.py")
        assert member is not None
        return member.read().decode()


VERSIONS = [v.version for v in vendored.SDISTS]


def _fixture(version: str, name: str) -> Path:
    path = BASES / version / name
    if not path.is_file():
        pytest.skip(f"{version}: {name} not recorded (tests/fixtures/bases/{version}/PROVENANCE.md)")
    return path


@pytest.mark.parametrize("version", VERSIONS)
def test_each_bases_own_script_reads_its_llama_bench_database(work, version, tmp_path):
    """llama-bench.sqlite written from a base's recorded llama-bench output (its records as base and as
    +0001): that base's own compare script lists every test, each at speedup 1.00."""
    bench = _fixture(version, "lb-tiny.json")
    script = _base_script(work, version, tmp_path / "llama.cpp")
    recs = parsers.parse_llama_bench_json(bench.read_text(), bench.name)
    runs = {"base": recs, "+0001": recs}
    db = tmp_path / upstreamdb.LLAMA_BENCH_DB
    mapping = upstreamdb.write_llama_bench_db(db, runs)
    _check_llama_bench(script, db, mapping, runs, tmp_path, n_tests=4)
    _, rows = _compare(script, db, LLAMA_BENCH, *mapping, tmp_path)
    assert [row[-1] for row in rows] == ["1.00"] * 4


@pytest.mark.parametrize("version", VERSIONS)
def test_each_bases_own_script_reads_its_test_backend_ops_database(work, version, tmp_path):
    """test-backend-ops.sqlite from a base's recorded perf --output sql (as base and its A/A copy)."""
    perf = _fixture(version, "tbo-perf-fa.sql.txt")
    script = _base_script(work, version, tmp_path / "llama.cpp")
    precs = parsers.parse_perf_sql(parsers.read_log(perf), perf.name)
    pruns = [("base", precs), ("base#2", precs)]
    tdb = tmp_path / upstreamdb.TEST_BACKEND_OPS_DB
    tmap = upstreamdb.write_test_backend_ops_db(tdb, pruns)
    _check_test_backend_ops(script, tdb, tmap, pruns, tmp_path, n_cases=2)
