"""What `patchkit wheel-check` reads from llama.cpp's load log, on logs recorded from real runs:
the H200 CUDA wheel (examples/h200-wheel, see its PROVENANCE.md) and the CPU wheel here."""

from __future__ import annotations

import json
from pathlib import Path

from patchkit.wheel_check import parse_llama_log

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "examples" / "h200-wheel"


def test_cuda_wheel_log_names_the_device_and_offloaded_layers():
    got = parse_llama_log((H200 / "check-generate.log").read_text())
    assert got == {"devices": ["CUDA0 (NVIDIA H200)"], "offloaded": [3, 3]}


def test_recorded_result_is_what_its_log_says():
    """The committed result's placement fields re-derive from the committed raw log."""
    res = json.loads((H200 / "wheel-check.json").read_text())
    got = parse_llama_log((H200 / "check-generate.log").read_text())
    assert (res["devices"], res["offloaded"]) == (got["devices"], got["offloaded"])
    assert res["ok"] is True and res["gpu_layers"] == -1 and res["gpu_offload"] is True
    assert res["version"] == "0.3.36+pk.0c1e5709.p0001.p0002.cuda.90"
    # the same wheel with no layers offloaded generated the same greedy tokens
    cpu_layers = json.loads((H200 / "wheel-check-cpu-layers.json").read_text())
    assert cpu_layers["offloaded"] == [0, 3] and cpu_layers["tokens"] == res["tokens"] and len(res["tokens"]) == 32


def test_cpu_wheel_log_has_no_cuda_device():
    text = (ROOT / "tests" / "fixtures" / "cpu" / "wheel_check_generate_cpu.log").read_text()
    assert "CPU_Mapped model buffer" in text
    assert parse_llama_log(text) == {"devices": [], "offloaded": None}


def test_partial_offload_is_the_last_report():
    text = "load_tensors: offloaded 1/3 layers to GPU\nllama_prepare_model_devices: using device CUDA1 (NVIDIA L4) (0000:01:00.0)\nload_tensors: offloaded 2/3 layers to GPU\n"
    assert parse_llama_log(text) == {"devices": ["CUDA1 (NVIDIA L4)"], "offloaded": [2, 3]}


def test_second_device_run_needed_no_workaround():
    """The second H200 run (fixed wheel-check, no PYTHONPATH): pip saw the parent environment's
    packages through the .pth file, and generation gave the first run's tokens."""
    run2 = H200 / "second-run"
    pip = (run2 / "check-pip.log").read_text()
    assert "Requirement already satisfied: numpy" in pip and "in /opt/torch/.venv/lib/python3.12/site-packages" in pip
    assert pip.rstrip().splitlines()[-1].startswith("# exit: 0,")
    res = json.loads((run2 / "wheel-check.json").read_text())
    assert res["ok"] is True and res["offloaded"] == parse_llama_log((run2 / "check-generate.log").read_text())[
        "offloaded"
    ] == [3, 3]
    assert res["tokens"] == json.loads((H200 / "wheel-check.json").read_text())["tokens"]
    job = (run2 / "job.log").read_text()
    assert "built in 310 s (+0001+0002, cuda-90)" in job and "offloaded [3, 3]" in job
