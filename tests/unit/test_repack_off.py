"""A real model on the CPU backend of a CPU with AMX-INT8: ggml's AMX matrix multiply crashes on Q4_K weights at the
pinned base (SIGSEGV in ggml_backend_amx_mul_mat, upstream llama.cpp#20824; seen with Gemma 3 270M Q4_K_M on the
project's Intel Xeon machine: llama-completion, llama-perplexity and llama-bench, each fine with repacking off).
Numerics then runs every variant with repacking off and says so (tests/integration/test_cpu_change.py runs it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.measure import tool
from patchkit.report import numerics as report_numerics
from patchkit.report.evidence import NumericsData

BASES = Path(__file__).parent.parent / "fixtures" / "bases"
AMX = {"cpu_isa": {"extensions": ["AVX2", "AVX512F", "AMX-TILE", "AMX-INT8"]}}


def test_repacking_off_only_for_a_cpu_build_with_amx_int8():
    why = tool.repack_off("cpu", AMX)
    assert "AMX-INT8" in why and tool.AMX_CRASH in why and "not exercised" in why
    assert tool.repack_off("cuda", AMX) == ""  # the weights are on the GPU
    assert tool.repack_off("cpu", {"cpu_isa": {"extensions": ["AVX2", "AVX512F", "AMX-TILE"]}}) == ""
    assert tool.repack_off("cpu", {}) == ""  # no ISA recorded: nothing to say


@pytest.mark.parametrize(
    ("tool_name", "fixture", "args"),
    [
        ("llama-perplexity", "0.3.36/perplexity-help.txt", ["--no-repack"]),
        ("llama-bench", "0.3.36/lb-help.txt", ["--repack", "0"]),
        ("llama-bench", "0.3.35/lb-help.txt", []),  # an older llama-bench has no such option: run as upstream's
    ],
)
def test_the_option_each_base_has(tool_name, fixture, args):
    usage = (BASES / fixture).read_text()
    assert tool.repack_args(tool_name, usage, tool.repack_off("cpu", AMX)) == args
    assert tool.repack_args(tool_name, usage, "") == []  # no AMX: upstream's own behaviour


def _numerics(repack_off: str | None) -> NumericsData:
    return NumericsData(
        pairs=[],
        depths=[256],
        prompts=["p"],
        n_predict=16,
        model="Gemma 3 270m Q4_K_M",
        text="t",
        repack_off=repack_off,
    )


def test_the_report_says_it_with_the_model():
    why = tool.repack_off("cpu", AMX)
    lines = report_numerics._model_lines(_numerics(why))
    assert f"Every variant ran with {why}." in lines
    assert not any("repacking" in ln for ln in report_numerics._model_lines(_numerics(None)))
