"""Upstream-readable databases for a run folder: `llama-bench.sqlite` and `test-backend-ops.sqlite`.

They hold the records patchkit measured in the exact tables `llama-bench -o sql` and `test-backend-ops
perf --output sql` write at the pinned base (llama.cpp 0c1e57098), so llama.cpp's own
`scripts/compare-llama-bench.py` reads a run folder unedited:

    python3 scripts/compare-llama-bench.py -i RUN/llama-bench.sqlite -b base______ -c +0001_____
    python3 scripts/compare-llama-bench.py --tool test-backend-ops -i RUN/test-backend-ops.sqlite -b ... -c ...

Schemas (column names, C++ field types and order) are copied from the pinned source:
  llama_bench:      tools/llama-bench/llama-bench.cpp:1598 (test::get_fields), :1616 (test::get_field_type),
                    :2123 (sql_printer: STRING -> TEXT, BOOL and INT -> INTEGER, FLOAT -> REAL)
  test_backend_ops: tests/test-backend-ops.cpp:614 (test_result::get_fields), :625 (get_field_type),
                    :1041 (sql_printer, same type mapping)
The CREATE TABLE text is the one those printers emit, character for character.

build_commit: every variant gets its own label, since compare-llama-bench.py averages all rows of one
build_commit together and keys -b/-c on it. The script also truncates every build_commit of a database to
the shortest one when their lengths differ (scripts/compare-llama-bench.py:352), so labels are padded
with '_' to one length: base______, +0001_____, +0001+0002, base.aa2__ (the A/A copy `base#2`),
all-0001__ (leave-one-out `-0001`). A label is never a hex string, so the script's git lookups never
turn it into a branch name. The table `patchkit_variants` in each file maps label -> variant and the
build_commit the tool itself wrote (the short commit of the base the variant is built on: build.version_args;
builds made before it, the variant tree's own); the script ignores that table.
"""

from __future__ import annotations

import os
import re
import shlex
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchkit.errors import ResultsError

LLAMA_BENCH_DB = "llama-bench.sqlite"
TEST_BACKEND_OPS_DB = "test-backend-ops.sqlite"
VARIANTS_TABLE = "patchkit_variants"
COMPARE_SCRIPT = "scripts/compare-llama-bench.py"

PAD = "_"
# variant -> records, or (variant, records) pairs (e.g. one per round and variant, in run order)
Runs = Mapping[str, Iterable[Any]] | Iterable[tuple[str, Iterable[Any]]]
# C++ field type (the printers' `field_type`) -> SQL type, as both sql_printers map them
SQL_TYPES = {"STRING": "TEXT", "BOOL": "INTEGER", "INT": "INTEGER", "FLOAT": "REAL"}


@dataclass(frozen=True)
class Table:
    """One upstream table: its name, its columns (name, C++ field type) in order, the tool it belongs
    to (compare-llama-bench.py's --tool), and the columns compare-llama-bench.py reads (a record
    lacking one cannot be compared, so it is an error; any other missing column is NULL)."""

    name: str
    tool: str
    columns: tuple[tuple[str, str], ...]
    required: tuple[str, ...]

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.columns)

    @property
    def create_sql(self) -> str:
        """The CREATE TABLE statement exactly as the tool's sql_printer prints it (without the blank line)."""
        cols = ",\n".join(f"  {c} {SQL_TYPES[t]}" for c, t in self.columns)
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n{cols}\n);\n"


def _words(s: str) -> tuple[str, ...]:
    return tuple(s.split())


def _typed(names: tuple[str, ...], types: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple((n, types.get(n, "STRING")) for n in names)


# llama-bench.cpp:1598 test::get_fields(), in order
_LB_FIELDS = _words(
    "build_commit build_number cpu_info gpu_info backends model_filename model_type model_size "
    "model_n_params n_batch n_ubatch n_threads cpu_mask cpu_strict poll type_k type_v n_gpu_layers "
    "n_cpu_moe split_mode main_gpu no_kv_offload flash_attn devices tensor_split tensor_buft_overrides "
    "load_mode lazy_mode embeddings no_op_offload no_host repack fit_target fit_min_ctx n_prompt n_gen "
    "n_depth test_time avg_ns stddev_ns avg_ts stddev_ts"
)
# llama-bench.cpp:1616 test::get_field_type() (every other field is STRING)
_LB_INT = _words(
    "build_number n_batch n_ubatch n_threads poll model_size model_n_params n_gpu_layers main_gpu "
    "n_prompt n_gen n_depth avg_ns stddev_ns no_op_offload n_cpu_moe fit_target fit_min_ctx flash_attn"
)
_LB_BOOL = _words("no_kv_offload cpu_strict embeddings no_host repack")
_LB_FLOAT = _words("avg_ts stddev_ts")
# compare-llama-bench.py:63 LLAMA_BENCH_KEY_PROPERTIES (the join keys), plus test_time and avg_ts it reads
_LB_COMPARED = _words(
    "cpu_info gpu_info backends n_gpu_layers n_cpu_moe tensor_buft_overrides model_filename model_type "
    "n_batch n_ubatch embeddings cpu_mask cpu_strict poll n_threads type_k type_v load_mode no_kv_offload "
    "split_mode main_gpu tensor_split flash_attn n_prompt n_gen n_depth fit_target fit_min_ctx test_time "
    "avg_ts"
)

LLAMA_BENCH_TYPES = {
    **dict.fromkeys(_LB_INT, "INT"),
    **dict.fromkeys(_LB_BOOL, "BOOL"),
    **dict.fromkeys(_LB_FLOAT, "FLOAT"),
}
LLAMA_BENCH = Table(
    name="llama_bench", tool="llama-bench", columns=_typed(_LB_FIELDS, LLAMA_BENCH_TYPES), required=_LB_COMPARED
)

# The llama-bench of an older base writes other fields (use_mmap before load_mode, ...), and that base's own
# compare-llama-bench.py joins on other keys: one schema per output format of the bases in patchkit's
# vendored table (patchkit/vendored.py), each from that base's llama-bench.cpp (test::get_fields,
# test::get_field_type) and scripts/compare-llama-bench.py (LLAMA_BENCH_KEY_PROPERTIES). A run's records
# name their format by their fields (`llama_bench_table`); a field a base lacks is no column of its table.
_LB_OLD_COMPARED = _words(
    "cpu_info gpu_info backends n_gpu_layers tensor_buft_overrides model_filename model_type n_batch n_ubatch "
    "embeddings cpu_mask cpu_strict poll n_threads type_k type_v use_mmap no_kv_offload split_mode main_gpu "
    "tensor_split flash_attn n_prompt n_gen n_depth test_time avg_ts"
)
_LB_OLD_FIELDS = _words(
    "build_commit build_number cpu_info gpu_info backends model_filename model_type model_size model_n_params "
    "n_batch n_ubatch n_threads cpu_mask cpu_strict poll type_k type_v n_gpu_layers n_cpu_moe split_mode main_gpu "
    "no_kv_offload flash_attn devices tensor_split tensor_buft_overrides use_mmap use_direct_io embeddings "
    "no_op_offload no_host fit_target fit_min_ctx n_prompt n_gen n_depth test_time avg_ns stddev_ns avg_ts "
    "stddev_ts"
)

_LB_0316_FIELDS = _words(
    "build_commit build_number cpu_info gpu_info backends model_filename model_type model_size model_n_params "
    "n_batch n_ubatch n_threads cpu_mask cpu_strict poll type_k type_v n_gpu_layers split_mode main_gpu "
    "no_kv_offload flash_attn tensor_split tensor_buft_overrides defrag_thold use_mmap embeddings no_op_offload "
    "n_prompt n_gen n_depth test_time avg_ns stddev_ns avg_ts stddev_ts"
)


def _older(fields: tuple[str, ...], compared: tuple[str, ...], *, fa_bool: bool = False) -> Table:
    """An older base's llama_bench table: the newer fields' types (use_mmap, use_direct_io: BOOL,
    defrag_thold: FLOAT), flash_attn BOOL where it was (before it took -fa auto)."""
    types = {
        **dict.fromkeys(_LB_INT, "INT"),
        **dict.fromkeys((*_LB_BOOL, "use_mmap", "use_direct_io"), "BOOL"),
        **dict.fromkeys((*_LB_FLOAT, "defrag_thold"), "FLOAT"),
    }
    if fa_bool:
        types["flash_attn"] = "BOOL"
    return Table(name="llama_bench", tool="llama-bench", columns=_typed(fields, types), required=compared)


def _without(names: tuple[str, ...], *drop: str) -> tuple[str, ...]:
    return tuple(n for n in names if n not in drop)


# (the vendored base whose llama-bench.cpp and compare-llama-bench.py it is, its table), newest first
LLAMA_BENCH_FORMATS: tuple[tuple[str, Table], ...] = (
    ("0.3.36", LLAMA_BENCH),
    (
        "0.3.35",
        Table(
            "llama_bench",
            "llama-bench",
            _typed(_without(_LB_FIELDS, "lazy_mode", "repack"), LLAMA_BENCH_TYPES),
            _LB_COMPARED,
        ),
    ),
    ("0.3.34", _older(_LB_OLD_FIELDS, (*_LB_OLD_COMPARED, "n_cpu_moe", "fit_target", "fit_min_ctx"))),
    (
        "0.3.17",
        _older(_without(_LB_OLD_FIELDS, "fit_target", "fit_min_ctx"), ("n_cpu_moe", *_LB_OLD_COMPARED), fa_bool=True),
    ),
    ("0.3.16", _older(_LB_0316_FIELDS, _LB_OLD_COMPARED, fa_bool=True)),
)
_SAMPLES = frozenset(("samples_ns", "samples_ts"))  # in llama-bench's -o json, no column of its -o sql


def llama_bench_table(records: Iterable[Any]) -> Table:
    """The llama_bench table of the base whose llama-bench wrote `records`: the format whose columns are
    their fields (the fewest columns missing or fields left over; the newest of equals)."""
    fields: set[str] = set()
    for r in records:
        fields |= set(record_fields(r)) - _SAMPLES
    if not fields:
        return LLAMA_BENCH

    def misfit(t: Table) -> int:
        return len(set(t.column_names) ^ fields)

    return min((t for _, t in LLAMA_BENCH_FORMATS), key=misfit)


# test-backend-ops.cpp:614 test_result::get_fields(), :625 get_field_type()
_TBO_FIELDS = _words(
    "test_time build_commit backend_name op_name op_params test_mode supported passed error_message "
    "time_us flops bandwidth_gb_s memory_kb n_runs device_description backend_reg_name"
)
_TBO_TYPES = {
    "supported": "BOOL",
    "passed": "BOOL",
    "memory_kb": "INT",
    "n_runs": "INT",
    "time_us": "FLOAT",
    "flops": "FLOAT",
    "bandwidth_gb_s": "FLOAT",
}
# compare-llama-bench.py:71 TEST_BACKEND_OPS_KEY_PROPERTIES, test_time, its supported/passed filter, its metrics
_TBO_COMPARED = _words("backend_name op_name op_params test_mode test_time supported passed flops bandwidth_gb_s")

TEST_BACKEND_OPS = Table(
    name="test_backend_ops", tool="test-backend-ops", columns=_typed(_TBO_FIELDS, _TBO_TYPES), required=_TBO_COMPARED
)

# ------------------------------------------------------------------------------------------- labels

_UNSAFE = re.compile(r"[^A-Za-z0-9+._-]")
_AA = re.compile(r"#(\d+)$")


def _label_stem(variant: str) -> str:
    """base -> base, +0001+0002 -> +0001+0002, base#2 (the A/A copy) -> base.aa2, -0001 -> all-0001."""
    s = _AA.sub(r".aa\1", variant)
    if s.startswith("-"):
        s = "all" + s  # leave-one-out: a leading '-' would read as an option to the script's argparse
    return _UNSAFE.sub(".", s) or "unnamed"


def labels(variants: Iterable[str]) -> dict[str, str]:
    """label -> variant for these variants (in their first-seen order): unique, all of one length, safe
    to type unquoted as compare-llama-bench.py's -b/-c values."""
    order = list(dict.fromkeys(variants))
    stems = [_label_stem(v) for v in order]
    width = max((len(s) for s in stems), default=0)
    out: dict[str, str] = {}
    for v, s in zip(order, stems):
        label = s.ljust(width, PAD)
        if label in out:
            raise ResultsError(f"variants {out[label]!r} and {v!r} get the same compare-llama-bench label {label!r}")
        out[label] = v
    return out


# -------------------------------------------------------------------------------------------- rows


def record_fields(record: Any) -> dict[str, Any]:
    """A record as {field: value}: a mapping (llama-bench's JSON object, a row) as it is, or a patchkit
    parser record (to_dict(), with its `extra` fields merged back and unset fields left out)."""
    if isinstance(record, Mapping):
        return dict(record)
    d = record.to_dict()
    extra = d.pop("extra", None) or {}
    return {**extra, **{k: v for k, v in d.items() if v is not None}}


def _cell(kind: str, value: Any) -> Any:
    """The value the tool's sql printer would have stored (SQLite's column affinity applied): a bool is
    0/1 (std::to_string(bool)), an INT an int, a FLOAT a float, a STRING the string."""
    if value is None:
        return None
    if kind == "STRING" and isinstance(value, str):
        return value
    if kind == "BOOL" and (isinstance(value, bool) or value in (0, 1)):
        return int(value)
    if kind == "INT" and isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer():
        return int(value)
    if kind == "FLOAT" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise ValueError(f"expected {SQL_TYPES[kind]} ({kind.lower()}), got {value!r}")


def _row(table: Table, fields: Mapping[str, Any], label: str, where: str) -> tuple[Any, ...]:
    for col in table.required:
        if fields.get(col) is None:
            raise ResultsError(f"{where}: no '{col}' (compare-llama-bench.py compares on it)")
    row = []
    for col, kind in table.columns:
        try:
            row.append(label if col == "build_commit" else _cell(kind, fields.get(col)))
        except ValueError as e:
            raise ResultsError(f"{where}: column {col}: {e}") from None
    return tuple(row)


def _pairs(runs: Runs) -> list[tuple[str, list]]:
    items = runs.items() if isinstance(runs, Mapping) else runs
    return [(variant, list(records)) for variant, records in items]


# ------------------------------------------------------------------------------------------ writing


def write_db(path: Path, table: Table, runs: Runs) -> dict[str, str]:
    """Write `path` (replacing it) with `table` holding every record of `runs` (variant -> records, or
    (variant, records) pairs, e.g. one per round; a variant may come more than once), each row's
    build_commit being its variant's label, plus the label table. Returns label -> variant."""
    pairs = _pairs(runs)
    mapping = labels(v for v, _ in pairs)
    label_of = {v: lab for lab, v in mapping.items()}
    rows: list[tuple[Any, ...]] = []
    commits: dict[str, dict[str, None]] = {v: {} for v in mapping.values()}
    n_rows: dict[str, int] = dict.fromkeys(mapping.values(), 0)
    for variant, records in pairs:
        for i, record in enumerate(records, 1):
            fields = record_fields(record)
            where = f"{path.name}: variant {variant!r}, record {i}"
            rows.append(_row(table, fields, label_of[variant], where))
            if fields.get("build_commit") is not None:
                commits[variant][str(fields["build_commit"])] = None
            n_rows[variant] += 1
    variants = [(lab, v, ",".join(commits[v]), n_rows[v]) for lab, v in mapping.items()]
    _write_file(path, table, rows, variants)
    return mapping


def _write_file(path: Path, table: Table, rows: list[tuple[Any, ...]], variants: list[tuple]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    cols = ", ".join(table.column_names)
    marks = ", ".join("?" * len(table.columns))
    con = sqlite3.connect(tmp)
    try:
        with con:
            con.execute(table.create_sql)
            con.executemany(f"INSERT INTO {table.name} ({cols}) VALUES ({marks})", rows)
            con.execute(
                f"CREATE TABLE {VARIANTS_TABLE} (label TEXT, variant TEXT, tool_build_commit TEXT, n_rows INTEGER)"
            )
            con.executemany(f"INSERT INTO {VARIANTS_TABLE} VALUES (?, ?, ?, ?)", variants)
    except BaseException:
        con.close()
        tmp.unlink(missing_ok=True)
        raise
    con.close()
    os.replace(tmp, path)


def write_llama_bench_db(path: Path, runs: Runs) -> dict[str, str]:
    """`llama-bench.sqlite` from llama-bench records (its -o json objects, or patchkit BenchRecords), in the
    table of the base whose llama-bench wrote them (`llama_bench_table`)."""
    pairs = _pairs(runs)
    return write_db(path, llama_bench_table(r for _, records in pairs for r in records), pairs)


def write_test_backend_ops_db(path: Path, runs: Runs) -> dict[str, str]:
    """`test-backend-ops.sqlite` from `test-backend-ops perf --output sql` records (rows, or PerfRecords)."""
    return write_db(path, TEST_BACKEND_OPS, runs)


def read_labels(path: Path) -> dict[str, str]:
    """label -> variant, as written into `path`."""
    con = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        return dict(con.execute(f"SELECT label, variant FROM {VARIANTS_TABLE} ORDER BY rowid"))
    finally:
        con.close()


# ----------------------------------------------------------------------------------------- commands


def compare_command(db: Path | str, table: Table, baseline: str, compare: str, *, script: str = COMPARE_SCRIPT) -> str:
    """The shell command that compares two labels of `db` with llama.cpp's script (run from the llama.cpp
    tree, or give `script` as a path)."""
    argv = ["python3", script]
    if table.tool != "llama-bench":
        argv += ["--tool", table.tool]
    argv += ["-i", str(db), "-b", baseline, "-c", compare]
    return shlex.join(argv)


def compare_commands(
    db: Path | str, table: Table, mapping: Mapping[str, str], *, script: str = COMPARE_SCRIPT
) -> list[tuple[str, str]]:
    """One compare command per label against the first label (base), as [(label, command)]."""
    labs = list(mapping)
    return [(lab, compare_command(db, table, labs[0], lab, script=script)) for lab in labs[1:]]
