"""Transitional shim: the parsers live in patchkit.parsers (one module per tool). This module only
re-exports the names that modules not yet switched import from here; the lead deletes it."""

from __future__ import annotations

from patchkit.parsers import (
    BACKEND_STATUSES,
    CASE_STATUSES,
    RUN_STATUSES,
    BackendRun,
    BenchRecord,
    KernelLaunch,
    KernelSummary,
    PerfRecord,
    TestCase,
    TestRun,
    completion_finished,
    parse_llama_bench_json,
    parse_llama_bench_jsonl,
    parse_ncu_csv,
    parse_perf_console,
    parse_perf_sql,
    parse_test_console,
    read_log,
    strip_interleaved_logs,
    summarize_kernels,
)

__all__ = [
    "BACKEND_STATUSES",
    "CASE_STATUSES",
    "RUN_STATUSES",
    "BackendRun",
    "BenchRecord",
    "KernelLaunch",
    "KernelSummary",
    "PerfRecord",
    "TestCase",
    "TestRun",
    "completion_finished",
    "parse_llama_bench_json",
    "parse_llama_bench_jsonl",
    "parse_ncu_csv",
    "parse_perf_console",
    "parse_perf_sql",
    "parse_test_console",
    "read_log",
    "strip_interleaved_logs",
    "summarize_kernels",
]
