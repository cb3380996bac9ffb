"""Parsers of the output of the tools patchkit runs (llama.cpp's at the pinned base
ggml-org/llama.cpp@0c1e57098, Nsight Compute, compilers, git), one module per tool.

Text in, frozen records out (patchkit.parsers.records): pure functions, no subprocess, no file I/O
except `read_log` / `read_raw_log`. Every parser takes the text and a `source` (the log path, or any
name the user will recognise) and raises `patchkit.errors.ParseError` with one line naming the source,
the line number where known, and what was expected. Fields are taken by name; added fields are kept (in
`extra`) and missing required ones are refused. Output that stops early is reported as truncated, never
as passed.

    from patchkit import parsers
    parsers.parse_perf_sql(parsers.read_log(path), str(path))
"""

from __future__ import annotations

from patchkit.parsers.common import strip_ansi, strip_interleaved_logs
from patchkit.parsers.compiler import first_compiler_error, ninja_failures
from patchkit.parsers.completion import completion_finished, parse_kld, prompt_tokens
from patchkit.parsers.llama_bench import parse_llama_bench_json, parse_llama_bench_jsonl
from patchkit.parsers.ncu import LaunchStats, parse_ncu_csv, parse_ncu_occupancy, summarize_kernels
from patchkit.parsers.patch import CONFLICT, Hunk, conflict_files, parse_hunks, split_hunks
from patchkit.parsers.perf import parse_perf_console, parse_perf_sql
from patchkit.parsers.ptxas import KernelResources, parse_ptxas
from patchkit.parsers.rawlog import parse_raw_log, read_log, read_raw_log
from patchkit.parsers.records import (
    BACKEND_STATUSES,
    CASE_STATUSES,
    RUN_STATUSES,
    BackendRun,
    BenchRecord,
    KernelLaunch,
    KernelSummary,
    PerfRecord,
    RawLog,
    TestCase,
    TestRun,
)
from patchkit.parsers.test_backend_ops import parse_test_console

__all__ = [
    "BACKEND_STATUSES",
    "CASE_STATUSES",
    "CONFLICT",
    "RUN_STATUSES",
    "BackendRun",
    "BenchRecord",
    "Hunk",
    "KernelLaunch",
    "KernelResources",
    "KernelSummary",
    "LaunchStats",
    "PerfRecord",
    "RawLog",
    "TestCase",
    "TestRun",
    "completion_finished",
    "conflict_files",
    "first_compiler_error",
    "ninja_failures",
    "parse_hunks",
    "parse_kld",
    "parse_llama_bench_json",
    "parse_llama_bench_jsonl",
    "parse_ncu_csv",
    "parse_ncu_occupancy",
    "parse_perf_console",
    "parse_perf_sql",
    "parse_ptxas",
    "parse_raw_log",
    "parse_test_console",
    "prompt_tokens",
    "read_log",
    "read_raw_log",
    "split_hunks",
    "strip_ansi",
    "strip_interleaved_logs",
    "summarize_kernels",
]
