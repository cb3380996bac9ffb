"""Every base of patchkit's vendored table (patchkit/vendored.py): the parsers, the usage-text check and the
llama-bench.sqlite writer on the real output of THAT base's CPU tools (issue 34).

Fixtures: tests/fixtures/bases/<version>/ (see its PROVENANCE.md): test-backend-ops --help, test mode and
perf mode (console and --output sql) on a few FLASH_ATTN_EXT cases, llama-bench --help, one llama-bench
run writing -o json to stdout and -oe sql to stderr, and the decode matrix's pp process (-o json, --progress).
Every base of the table has them all (test_every_base_of_the_table_and_no_other_is_recorded); a missing file
would skip the tests that read it, naming its PROVENANCE.md.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from patchkit import parsers, vendored
from patchkit.measure import decode
from patchkit.measure.tool import options_not_listed
from patchkit.results import upstreamdb

ROOT = Path(__file__).resolve().parents[3]
BASES = ROOT / "tests" / "fixtures" / "bases"
VERSIONS = [v.version for v in vendored.SDISTS]
HAS_J = {"0.3.16": False, "0.3.17": False, "0.3.34": True, "0.3.35": True, "0.3.36": True}


def _fix(version: str, name: str) -> Path:
    path = BASES / version / name
    if not path.is_file():
        pytest.skip(f"{version}: {name} not recorded (tests/fixtures/bases/{version}/PROVENANCE.md)")
    return path


def _create(text: str) -> str:
    m = re.search(r"^CREATE TABLE IF NOT EXISTS \w+ \(\n.*?^\);\n", text, re.S | re.M)
    assert m, "no CREATE TABLE in the recorded output"
    return m.group(0)


def _statements(text: str) -> str:
    """The SQL of a tool's -oe sql (stderr) output, from its CREATE TABLE on: llama-bench also prints warnings
    there before it (0.3.34's, built at -O0: 'warning: debug build, performance may be affected')."""
    return text[text.index("CREATE TABLE IF NOT EXISTS ") :]


def _rows(con: sqlite3.Connection, table: str, cols: tuple[str, ...]) -> list[tuple]:
    sel = ", ".join(f"{c}, typeof({c})" for c in cols)
    return con.execute(f"SELECT {sel} FROM {table} ORDER BY rowid").fetchall()


@pytest.mark.parametrize("version", VERSIONS)
def test_test_backend_ops_usage_says_whether_it_has_j(version):
    usage = _fix(version, "tbo-help.txt").read_text()
    assert usage.startswith("Usage: ./test-backend-ops [mode] ")  # 0.3.36 lists its options below, older bases inline
    assert options_not_listed(usage, ["-j"]) == ([] if HAS_J[version] else ["-j"])
    assert options_not_listed(usage, ["--output"]) == []  # bench:kernel's sql records: every base has it


@pytest.mark.parametrize("version", VERSIONS)
def test_test_mode_output_parses(version):
    path = _fix(version, "tbo-test-fa.txt")
    run = parsers.parse_test_console(path.read_text(), str(path))
    assert run.status == "ok" and run.complete, run
    [backend] = run.backends
    assert backend.name == "CPU" and backend.status == "ok"
    cases = backend.cases
    assert len(cases) == backend.tests_total == backend.tests_passed == 4, [c.params for c in cases]
    assert {c.op for c in cases} == {"FLASH_ATTN_EXT"} and all(c.status == "ok" for c in cases)
    assert all("hsk=64,hsv=64" in c.params and "nb=" in c.params for c in cases)


@pytest.mark.parametrize("version", VERSIONS)
def test_perf_sql_and_console_parse_to_the_same_cases(version):
    sql = _fix(version, "tbo-perf-fa.sql.txt")
    recs = parsers.parse_perf_sql(parsers.read_log(sql), str(sql))
    assert len(recs) == 2 and all(r.op_name == "FLASH_ATTN_EXT" and r.backend_name == "CPU" for r in recs)
    assert all(r.supported and r.time_us > 0 and r.n_runs > 0 for r in recs), recs
    assert upstreamdb.TEST_BACKEND_OPS.create_sql == _create(sql.read_text())
    console = _fix(version, "tbo-perf-fa.txt")
    crecs = parsers.parse_perf_console(console.read_text(), str(console))
    assert len(crecs) == 1 and crecs[0].time_us > 0 and crecs[0].n_runs > 0, crecs
    assert [r.op_params for r in crecs] == [r.op_params for r in recs if "nr23=[1,1]" in r.op_params]


@pytest.mark.parametrize("version", VERSIONS)
def test_test_backend_ops_sqlite_rows_equal_the_tools(version, tmp_path):
    sql = _fix(version, "tbo-perf-fa.sql.txt")
    text = sql.read_text()
    db = tmp_path / upstreamdb.TEST_BACKEND_OPS_DB
    upstreamdb.write_test_backend_ops_db(db, {"base": parsers.parse_perf_sql(text, str(sql))})
    tool = sqlite3.connect(":memory:")
    inserts = [ln for ln in parsers.strip_interleaved_logs(text).splitlines() if ln.startswith("INSERT INTO ")]
    tool.executescript(_create(text) + "\n".join(inserts) + "\n")
    cols = tuple(c for c in upstreamdb.TEST_BACKEND_OPS.column_names if c != "build_commit")
    assert _rows(sqlite3.connect(db), "test_backend_ops", cols) == _rows(tool, "test_backend_ops", cols)


# llama-bench of every base, one command (lb-tiny.json: -p 32 -n 8 -d 0,256, q4_0 K/V, 3 repetitions, -t 2, as
# tests/fixtures/cpu/bench_tiny_pair.* and on the same model; see each PROVENANCE.md)
TINY_TESTS = [(0, 8, 0), (0, 8, 256), (32, 0, 0), (32, 0, 256)]  # (n_prompt, n_gen, n_depth)


def _bench(version: str) -> tuple[Path, Path]:
    """A base's llama-bench run: its -o json and -oe sql output."""
    return _fix(version, "lb-tiny.json"), _fix(version, "lb-tiny.sql.txt")


FILES = (
    *("tbo-help.txt", "tbo-bad-option.txt", "tbo-test-fa.txt", "tbo-perf-fa.sql.txt", "tbo-perf-fa.txt"),
    *("lb-help.txt", "lb-tiny.json", "lb-tiny.sql.txt", "lb-matrix-pp.json", "lb-matrix-pp.stderr.txt"),
)


def test_every_base_of_the_table_and_no_other_is_recorded():
    """The fixtures of every base in the vendored table (issue 34): a base added to patchkit/vendored.py fails
    here until its tools' output is recorded (scripts/record_base_bench.sh and its PROVENANCE.md)."""
    assert {p.name for p in BASES.iterdir()} == set(VERSIONS)
    for version in VERSIONS:
        prov = (BASES / version / "PROVENANCE.md").read_text()
        for name in FILES:
            assert (BASES / version / name).is_file(), f"{version}: {name} not recorded"
            assert f"`{name}`" in prov, f"{version}/PROVENANCE.md does not say how {name} was recorded"


@pytest.mark.parametrize("version", VERSIONS)
def test_llama_bench_json_parses(version):
    path, _ = _bench(version)
    recs = parsers.parse_llama_bench_json(path.read_text(), str(path))
    assert sorted((r.n_prompt, r.n_gen, r.n_depth) for r in recs) == TINY_TESTS
    for r in recs:
        assert r.flash_attn == 1 and r.type_k == r.type_v == "q4_0" and r.avg_ts > 0, r
        assert len(r.samples_ts) == len(r.samples_ns) == 3 and r.n_threads == 2 and r.backends == "CPU"
    assert len({decode.identity(r) for r in recs}) == 4


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("as_records", [False, True], ids=["json-objects", "BenchRecords"])
def test_llama_bench_sqlite_is_that_bases_own_table_and_rows(version, as_records, tmp_path):
    """The table patchkit writes for a base's records is the one that base's llama-bench -o sql creates
    (columns, types, order), and its rows are the tool's own rows: never a missing-field error."""
    path, sql_path = _bench(version)
    sql = _statements(sql_path.read_text())
    text = path.read_text()
    records = parsers.parse_llama_bench_json(text, str(path)) if as_records else json.loads(text)
    table = upstreamdb.llama_bench_table(records)
    assert table is dict(upstreamdb.LLAMA_BENCH_FORMATS)[version]
    assert table.create_sql == _create(sql)
    db = tmp_path / upstreamdb.LLAMA_BENCH_DB
    upstreamdb.write_llama_bench_db(db, {"base": records, "+0001": records})
    ours, tool = sqlite3.connect(db), sqlite3.connect(":memory:")
    tool.executescript(sql)
    info = "PRAGMA table_info(llama_bench)"
    assert ours.execute(info).fetchall() == tool.execute(info).fetchall()
    cols = tuple(c for c in table.column_names if c != "build_commit")
    assert _rows(ours, "llama_bench", cols)[:4] == _rows(tool, "llama_bench", cols)
    for col in table.required:  # every column the base's compare script joins on is filled
        assert ours.execute(f"SELECT COUNT(*) FROM llama_bench WHERE {col} IS NULL").fetchone() == (0,), col


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_matrix_pp_process(version, tmp_path):
    """The CPU profile's pp process of the decode matrix (pp16 at micro-batches 16, 4, 1, depths 0 and 256): one
    record per cell, each its own identity, each its own row of that base's table."""
    path = _fix(version, "lb-matrix-pp.json")
    recs = parsers.parse_llama_bench_json(path.read_text(), str(path))
    assert sorted((r.n_ubatch, r.n_depth) for r in recs) == sorted((u, d) for u in (16, 4, 1) for d in (0, 256))
    assert len({decode.identity(r) for r in recs}) == 6
    assert upstreamdb.llama_bench_table(recs) is dict(upstreamdb.LLAMA_BENCH_FORMATS)[version]
    db = tmp_path / upstreamdb.LLAMA_BENCH_DB
    upstreamdb.write_llama_bench_db(db, {"base": recs})
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM llama_bench").fetchone() == (6,)
    progress = _fix(version, "lb-matrix-pp.stderr.txt").read_text()
    assert "benchmark 6/6" in progress  # --progress (the flag the matrix's processes may pass) is the base's


@pytest.mark.parametrize("version", VERSIONS)
def test_every_flag_decode_passes_is_in_the_bases_usage(version):
    """The flags of the decode matrix's processes (decode.matrix_argvs, threads and micro-batches given) are
    options of the base's llama-bench, by the check patchkit runs on usage texts (tool.options_not_listed)."""
    usage = _fix(version, "lb-help.txt").read_text()
    argvs = decode.matrix_argvs(
        Path("m.gguf"),
        depths=(0, 256),
        pp_depths=(),
        n_prompt=(16,),
        n_gen=(8,),
        ubatch=(16, 4, 1),
        type_k="q4_0",
        type_v="q4_0",
        repetitions=2,
        threads=2,
        ngl=0,
        extra=(),
    )
    flags = sorted({a for argv in argvs for a in argv if re.fullmatch(r"-[a-z]+", a)})
    assert flags == ["-ctk", "-ctv", "-d", "-fa", "-m", "-n", "-ngl", "-o", "-p", "-r", "-t", "-ub"]
    assert options_not_listed(usage, [*flags, "-oe", "--progress"]) == []
    assert "json" in re.search(r"-o, --output <([^>]*)>", usage).group(1).split("|")
