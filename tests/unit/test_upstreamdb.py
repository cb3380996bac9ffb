"""patchkit.results.upstreamdb on real recorded output: the databases have the tools' own tables, their rows are
the rows the tools' own `-o sql` output gives, and every variant has its own build_commit label.

Fixtures: tests/fixtures/cpu/bench_tiny_pair.{json,sql.txt} (one llama-bench run writing -o json to stdout
and -oe sql to stderr), tests/fixtures/cpu/perf_fa_cpu.sql.txt and examples/h200/raw (see their
provenance). When the pinned llama.cpp source is in $PATCHKIT_TEST_WORK's cache repo, the schemas are
also derived from the C++ printers themselves (tools/llama-bench/llama-bench.cpp, tests/test-backend-ops.cpp).
"""

from __future__ import annotations

import ast
import json
import os
import re
import sqlite3
from pathlib import Path

import pytest

from patchkit import parsers, vcs, vendored
from patchkit.errors import ResultsError
from patchkit.results import upstreamdb
from patchkit.results.upstreamdb import LLAMA_BENCH, TEST_BACKEND_OPS
from patchkit.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "cpu"
H200 = ROOT / "examples" / "h200" / "raw"
PINNED = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
H200_PERF = {"base": "base", "+0001": "+0001", "+0001+0002": "+0001+0002", "base#2": "base_aa2"}


def _sql_create(text: str) -> str:
    """The CREATE TABLE statement of a tool's sql output, as printed."""
    m = re.search(r"^CREATE TABLE IF NOT EXISTS \w+ \(\n.*?^\);\n", text, re.S | re.M)
    assert m, "no CREATE TABLE in the recorded output"
    return m.group(0)


def _sql_only(text: str) -> str:
    """The statements of a raw log (its CREATE TABLE and INSERT lines), without the command line, the
    tool's stderr logs (some landed inside an INSERT line) and the exit line."""
    text = parsers.strip_interleaved_logs(text)
    create = _sql_create(text)
    inserts = [ln for ln in text.splitlines() if ln.startswith("INSERT INTO ")]
    return create + "\n".join(inserts) + "\n"


def _rows(con: sqlite3.Connection, table: str, cols: tuple[str, ...]) -> list[tuple]:
    """Every row as (value, typeof(value)) pairs, in insertion order."""
    sel = ", ".join(f"{c}, typeof({c})" for c in cols)
    return con.execute(f"SELECT {sel} FROM {table} ORDER BY rowid").fetchall()


def _tool_db(sql_text: str) -> sqlite3.Connection:
    con = sqlite3.connect(":memory:")
    con.executescript(sql_text)
    return con


def _bench_json(name: str) -> list[dict]:
    return json.loads((FIX / name).read_text())


def _perf(path: Path) -> list:
    return parsers.parse_perf_sql(parsers.read_log(path), str(path))


def _no_commit(cols: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(c for c in cols if c != "build_commit")


# ------------------------------------------------------------------------------------------- schema


def test_create_sql_is_the_one_llama_bench_prints():
    assert LLAMA_BENCH.create_sql == _sql_create((FIX / "bench_tiny_pair.sql.txt").read_text())
    assert len(LLAMA_BENCH.columns) == 42 and LLAMA_BENCH.column_names[0] == "build_commit"


@pytest.mark.parametrize("path", [FIX / "perf_fa_cpu.sql.txt", H200 / "perf-r1-base.log"], ids=["cpu", "h200"])
def test_create_sql_is_the_one_test_backend_ops_prints(path):
    assert TEST_BACKEND_OPS.create_sql == _sql_create(path.read_text())


def test_written_tables_equal_the_tools_own(tmp_path):
    """sqlite_master and PRAGMA table_info of our files equal those `tool -o sql | sqlite3` gives."""
    for table, sql_file, write in (
        (LLAMA_BENCH, FIX / "bench_tiny_pair.sql.txt", upstreamdb.write_llama_bench_db),
        (TEST_BACKEND_OPS, FIX / "perf_fa_cpu.sql.txt", upstreamdb.write_test_backend_ops_db),
    ):
        db = tmp_path / f"{table.name}.sqlite"
        write(db, {"base": []})
        ours, tool = sqlite3.connect(db), _tool_db(sql_file.read_text())
        q = "SELECT type, name, sql FROM sqlite_master WHERE name = ?"
        assert ours.execute(q, (table.name,)).fetchall() == tool.execute(q, (table.name,)).fetchall()
        info = f"PRAGMA table_info({table.name})"
        assert ours.execute(info).fetchall() == tool.execute(info).fetchall()
        names = {n for (n,) in ours.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert names == {table.name, upstreamdb.VARIANTS_TABLE}


def _pinned_source(path: str, commit: str = PINNED) -> str:
    root = Path(os.environ.get("PATCHKIT_TEST_WORK", Path.home() / ".cache" / "patchkit-test"))
    repo = Workspace.at(root).repo
    if not (repo / "HEAD").is_file():
        pytest.skip(f"the pinned llama.cpp source is not in {repo} (an integration test fetches it)")
    r = vcs.git(repo, "show", f"{commit}:{path}", env={"GIT_DIR": str(repo)})
    if not r.ok:
        pytest.skip(f"{commit[:9]} is not in {repo} yet (patchkit fetch of its base fetches it)")
    return r.stdout.decode()


def _body(src: str, start: str) -> str:
    """The text of the C++ function or struct that starts at `start`, up to its matching '}'."""
    i = src.index(start)
    depth, j = 0, src.index("{", i)
    for k in range(j, len(src)):
        depth += {"{": 1, "}": -1}.get(src[k], 0)
        if depth == 0:
            return src[i : k + 1]
    raise AssertionError(f"unbalanced braces after {start!r}")


def _schema_from_cpp(src: str, struct: str) -> str:
    """The CREATE TABLE text the C++ sql_printer emits: its table name, get_fields() in order, the
    get_field_type() if-chain, and get_sql_field_type()'s switch (cases fall through to a return)."""
    body = _body(src, f"struct {struct} {{")
    fields = re.findall(r'"(\w+)"', _body(body, "get_fields() {"))
    kinds: dict[str, str] = {}
    for cond, kind in re.findall(r"if \((.*?)\) \{\s*return (\w+);", _body(body, "get_field_type("), re.S):
        for f in re.findall(r'field == "(\w+)"', cond):
            kinds.setdefault(f, kind)
    printer = _body(src, "struct sql_printer : public printer {")
    sql_type, pending = {}, []
    for case, ret in re.findall(r"case \w+::(\w+):|return \"(\w+)\";", _body(printer, "get_sql_field_type(")):
        if case:
            pending.append(case)
        else:
            sql_type.update(dict.fromkeys(pending, ret))
            pending = []
    (table,) = re.findall(r"CREATE TABLE IF NOT EXISTS (\w+) \(", printer)
    cols = ",\n".join(f"  {f} {sql_type[kinds.get(f, 'STRING')]}" for f in fields)
    return f"CREATE TABLE IF NOT EXISTS {table} (\n{cols}\n);\n"


def test_schemas_are_derived_from_the_pinned_source():
    lb = _pinned_source("tools/llama-bench/llama-bench.cpp")
    assert _schema_from_cpp(lb, "test") == LLAMA_BENCH.create_sql
    tbo = _pinned_source("tests/test-backend-ops.cpp")
    assert _schema_from_cpp(tbo, "test_result") == TEST_BACKEND_OPS.create_sql


def _key_properties(script: str) -> dict[str, list[str]]:
    tree = ast.parse(script)
    return {
        t.id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name) and t.id.endswith("_KEY_PROPERTIES")
    }


def test_required_columns_are_what_compare_llama_bench_reads():
    lists = _key_properties(_pinned_source("scripts/compare-llama-bench.py"))
    assert set(LLAMA_BENCH.required) == {*lists["LLAMA_BENCH_KEY_PROPERTIES"], "test_time", "avg_ts"}
    assert set(TEST_BACKEND_OPS.required) == {
        *lists["TEST_BACKEND_OPS_KEY_PROPERTIES"],
        *("test_time", "supported", "passed", "flops", "bandwidth_gb_s"),
    }
    for table in (LLAMA_BENCH, TEST_BACKEND_OPS):
        assert set(table.required) <= set(table.column_names)


FORMATS = dict(upstreamdb.LLAMA_BENCH_FORMATS)


def test_every_base_of_the_vendored_table_has_its_llama_bench_format():
    assert list(FORMATS) == [v.version for v in reversed(vendored.SDISTS)]
    assert FORMATS["0.3.36"] is LLAMA_BENCH


@pytest.mark.parametrize("version", list(FORMATS))
def test_each_bases_formats_are_derived_from_its_own_source(version):
    """Each base's llama_bench table is what its llama-bench.cpp prints, its required columns are what its
    own compare-llama-bench.py joins on, and its test_backend_ops table is the one patchkit writes."""
    commit = vendored.by_version(version).commit
    table = FORMATS[version]
    assert _schema_from_cpp(_pinned_source("tools/llama-bench/llama-bench.cpp", commit), "test") == table.create_sql
    lists = _key_properties(_pinned_source("scripts/compare-llama-bench.py", commit))
    assert set(table.required) == {*lists["LLAMA_BENCH_KEY_PROPERTIES"], "test_time", "avg_ts"}
    assert set(table.required) <= set(table.column_names)
    tbo = _pinned_source("tests/test-backend-ops.cpp", commit)
    assert _schema_from_cpp(tbo, "test_result") == TEST_BACKEND_OPS.create_sql
    assert set(lists["TEST_BACKEND_OPS_KEY_PROPERTIES"]) <= set(TEST_BACKEND_OPS.required)


# --------------------------------------------------------------------------------------- round trip


@pytest.mark.parametrize("as_records", [False, True], ids=["json-objects", "BenchRecords"])
def test_llama_bench_rows_equal_the_tools_sql(tmp_path, as_records):
    text = (FIX / "bench_tiny_pair.json").read_text()
    records = parsers.parse_llama_bench_json(text, "bench_tiny_pair.json") if as_records else json.loads(text)
    db = tmp_path / upstreamdb.LLAMA_BENCH_DB
    assert upstreamdb.write_llama_bench_db(db, {"base": records}) == {"base": "base"}
    cols = _no_commit(LLAMA_BENCH.column_names)
    tool = _tool_db((FIX / "bench_tiny_pair.sql.txt").read_text())
    ours = sqlite3.connect(db)
    assert _rows(ours, "llama_bench", cols) == _rows(tool, "llama_bench", cols)
    assert len(_rows(ours, "llama_bench", cols)) == 4
    assert ours.execute("SELECT DISTINCT build_commit FROM llama_bench").fetchall() == [("base",)]
    assert tool.execute("SELECT DISTINCT build_commit FROM llama_bench").fetchall() == [("1bb4b74",)]
    assert upstreamdb.read_labels(db) == {"base": "base"}
    assert ours.execute("SELECT tool_build_commit, n_rows FROM patchkit_variants").fetchall() == [("1bb4b74", 4)]


@pytest.mark.parametrize(
    "path", [FIX / "perf_fa_cpu.sql.txt", *(H200 / f"perf-r{r}-base.log" for r in (1, 2, 3))], ids=lambda p: p.name
)
def test_test_backend_ops_rows_equal_the_tools_sql(tmp_path, path):
    db = tmp_path / upstreamdb.TEST_BACKEND_OPS_DB
    upstreamdb.write_test_backend_ops_db(db, {"base": _perf(path)})
    cols = _no_commit(TEST_BACKEND_OPS.column_names)
    tool = _tool_db(_sql_only(path.read_text()))
    rows = _rows(sqlite3.connect(db), "test_backend_ops", cols)
    assert rows == _rows(tool, "test_backend_ops", cols)
    assert len(rows) >= 3


def test_plain_rows_give_the_same_database_as_records(tmp_path):
    """Rows as dicts (e.g. read back from the tool's own SQL) and parser records write the same rows."""
    tool = _tool_db((FIX / "perf_fa_cpu.sql.txt").read_text())
    tool.row_factory = sqlite3.Row
    dicts = [dict(r) for r in tool.execute("SELECT * FROM test_backend_ops")]
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    upstreamdb.write_test_backend_ops_db(a, {"base": dicts})
    upstreamdb.write_test_backend_ops_db(b, {"base": _perf(FIX / "perf_fa_cpu.sql.txt")})
    cols = TEST_BACKEND_OPS.column_names
    assert _rows(sqlite3.connect(a), "test_backend_ops", cols) == _rows(sqlite3.connect(b), "test_backend_ops", cols)


def test_raw_h200_log_does_not_load_as_sql_but_its_records_do(tmp_path):
    """The raw log holds the command line, ggml's stderr lines and the exit line around the SQL: fed to
    sqlite3 as it is it fails; the database is written from the parsed records, so it does not matter."""
    text = (H200 / "perf-r1-base.log").read_text()
    assert "ggml_cuda_init: found 1 CUDA devices" in text
    with pytest.raises(sqlite3.OperationalError):
        _tool_db(text)
    db = tmp_path / "t.sqlite"
    upstreamdb.write_test_backend_ops_db(db, {"base": _perf(H200 / "perf-r1-base.log")})
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM test_backend_ops").fetchone() == (13,)


# -------------------------------------------------------------------------------------------- labels


def test_labels_are_unique_of_one_length_and_say_which_variant():
    got = upstreamdb.labels(["base", "+0001", "+0001+0002", "base#2", "-0001"])
    assert got == {
        "base______": "base",
        "+0001_____": "+0001",
        "+0001+0002": "+0001+0002",
        "base.aa2__": "base#2",
        "all-0001__": "-0001",
    }
    assert len({len(lab) for lab in got}) == 1
    for lab in got:
        assert not re.fullmatch(r"[0-9a-f]+", lab) and not lab.startswith("-") and "'" not in lab


def test_labels_keep_first_seen_order_and_refuse_a_clash():
    assert list(upstreamdb.labels(["base", "+0001", "base", "base#2", "+0001"])) == ["base____", "+0001___", "base.aa2"]
    assert upstreamdb.labels(["base"]) == {"base": "base"}
    with pytest.raises(ResultsError, match="same compare-llama-bench label"):
        upstreamdb.labels(["a b", "a.b"])


def test_every_variant_of_the_h200_run_gets_its_own_build_commit(tmp_path):
    runs = [(v, _perf(H200 / f"perf-r{r}-{f}.log")) for r in (1, 2, 3) for v, f in H200_PERF.items()]
    db = tmp_path / upstreamdb.TEST_BACKEND_OPS_DB
    mapping = upstreamdb.write_test_backend_ops_db(db, runs)
    assert list(mapping.values()) == ["base", "+0001", "+0001+0002", "base#2"]
    con = sqlite3.connect(db)
    per = dict(con.execute("SELECT build_commit, COUNT(*) FROM test_backend_ops GROUP BY build_commit"))
    assert per == dict.fromkeys(mapping, 39)  # 13 cases a run (one case is listed twice), 3 rounds
    commits = dict(con.execute("SELECT variant, tool_build_commit FROM patchkit_variants"))
    # base and its A/A copy are one binary (one tool build_commit) but two labels
    assert commits == {"base": "1bb4b74", "+0001": "b4461f5", "+0001+0002": "3f0f70a", "base#2": "1bb4b74"}
    assert upstreamdb.read_labels(db) == mapping


def test_decode_logs_of_the_h200_run(tmp_path):
    variants = ("base", "+0001", "+0001+0002")
    runs = {v: parsers.parse_llama_bench_json(parsers.read_log(H200 / f"decode-r1-{v}.log"), v) for v in variants}
    db = tmp_path / upstreamdb.LLAMA_BENCH_DB
    mapping = upstreamdb.write_llama_bench_db(db, runs)
    con = sqlite3.connect(db)
    got = con.execute("SELECT build_commit, n_depth, avg_ts FROM llama_bench ORDER BY rowid").fetchall()
    want = [(lab, r.n_depth, r.avg_ts) for lab, v in mapping.items() for r in runs[v]]
    assert got == want and len(got) == 9


# ------------------------------------------------------------------------------------------- errors


def test_a_record_lacking_a_compared_field_is_refused(tmp_path):
    recs = _bench_json("bench_tiny_pair.json")
    del recs[2]["n_depth"]
    with pytest.raises(ResultsError, match=r"variant '\+0001', record 3: no 'n_depth'"):
        upstreamdb.write_llama_bench_db(tmp_path / "x.sqlite", {"base": _bench_json("bench_tiny.json"), "+0001": recs})
    assert not list(tmp_path.iterdir())


def test_a_field_of_the_wrong_type_is_refused(tmp_path):
    recs = _bench_json("bench_tiny_pair.json")
    recs[0]["avg_ts"] = "fast"
    with pytest.raises(ResultsError, match="column avg_ts: expected REAL"):
        upstreamdb.write_llama_bench_db(tmp_path / "x.sqlite", {"base": recs})


def test_a_missing_uncompared_field_is_null(tmp_path):
    recs = _bench_json("bench_tiny_pair.json")
    for r in recs:
        del r["devices"], r["samples_ns"]
    db = tmp_path / "x.sqlite"
    upstreamdb.write_llama_bench_db(db, {"base": recs})
    assert sqlite3.connect(db).execute("SELECT DISTINCT devices FROM llama_bench").fetchall() == [(None,)]


def test_rewriting_replaces_the_file(tmp_path):
    db = tmp_path / upstreamdb.LLAMA_BENCH_DB
    upstreamdb.write_llama_bench_db(
        db, {"base": _bench_json("bench_tiny.json"), "+0001": _bench_json("bench_tiny.json")}
    )
    upstreamdb.write_llama_bench_db(db, {"base": _bench_json("bench_tiny_pair.json")[:1]})
    assert sqlite3.connect(db).execute("SELECT build_commit FROM llama_bench").fetchall() == [("base",)]
    assert [p.name for p in tmp_path.iterdir()] == [upstreamdb.LLAMA_BENCH_DB]


# ----------------------------------------------------------------------------------------- commands


def test_compare_commands():
    mapping = upstreamdb.labels(["base", "+0001", "base#2"])
    assert upstreamdb.compare_commands("runs/r1/test-backend-ops.sqlite", TEST_BACKEND_OPS, mapping) == [
        (
            "+0001___",
            "python3 scripts/compare-llama-bench.py --tool test-backend-ops -i runs/r1/test-backend-ops.sqlite "
            "-b base____ -c +0001___",
        ),
        (
            "base.aa2",
            "python3 scripts/compare-llama-bench.py --tool test-backend-ops -i runs/r1/test-backend-ops.sqlite "
            "-b base____ -c base.aa2",
        ),
    ]
    assert (
        upstreamdb.compare_command("my run/llama-bench.sqlite", LLAMA_BENCH, "base__", "+0001_", script="/x/c.py")
        == "python3 /x/c.py -i 'my run/llama-bench.sqlite' -b base__ -c +0001_"
    )
