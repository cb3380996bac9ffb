"""What `patchkit wheel-check` reads from its generation, on logs recorded from real runs: the H200
CUDA wheel (examples/h200-wheel, see its PROVENANCE.md) and the CPU wheel here. The result line is the
generation's stdout; in the recorded logs (both streams) it is the one line that is a JSON object."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchkit.errors import ParseError
from patchkit.parsers.wheel_check import Placement, parse_generate_result, parse_llama_log

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "examples" / "h200-wheel"
CPU_LOG = ROOT / "tests" / "fixtures" / "cpu" / "wheel_check_generate_cpu.log"


def _stdout_of(log: Path) -> str:
    """The generation's stdout as recorded in its log: the JSON line (llama.cpp's log is stderr)."""
    return "".join(ln for ln in log.read_text().splitlines(keepends=True) if ln.startswith("{"))


def test_cuda_wheel_log_names_the_device_and_offloaded_layers():
    got = parse_llama_log((H200 / "check-generate.log").read_text())
    assert got == Placement(devices=("CUDA0 (NVIDIA H200)",), offloaded=(3, 3))
    assert got.to_dict() == {"devices": ["CUDA0 (NVIDIA H200)"], "offloaded": [3, 3]}


def test_recorded_result_is_what_its_log_says():
    """The committed result's placement fields re-derive from the committed raw log."""
    res = json.loads((H200 / "wheel-check.json").read_text())
    got = parse_llama_log((H200 / "check-generate.log").read_text())
    assert (res["devices"], res["offloaded"]) == (got.to_dict()["devices"], got.to_dict()["offloaded"])
    assert res["ok"] is True and res["gpu_layers"] == -1 and res["gpu_offload"] is True
    assert res["version"] == "0.3.36+pk.0c1e5709.p0001.p0002.cuda.90"
    # the same wheel with no layers offloaded generated the same greedy tokens
    cpu_layers = json.loads((H200 / "wheel-check-cpu-layers.json").read_text())
    assert cpu_layers["offloaded"] == [0, 3] and cpu_layers["tokens"] == res["tokens"] and len(res["tokens"]) == 32


def test_recorded_result_line_is_the_recorded_result():
    """The result line in the H200 log parses into the fields wheel-check.json recorded from it."""
    got = parse_generate_result(_stdout_of(H200 / "check-generate.log"), "check-generate.log")
    res = json.loads((H200 / "wheel-check.json").read_text())
    line = got.to_dict()
    assert line == json.loads(_stdout_of(H200 / "check-generate.log"))  # nothing lost
    for k in ("file", "version", "tokens", "text", "wheel_key", "gpu_offload", "seconds", "flash_attn"):
        assert line[k] == res[k], k
    assert got.tokens == tuple(res["tokens"]) and got.extra["type_k"] == 2 and "prompt" in got.extra
    cpu = parse_generate_result(_stdout_of(CPU_LOG), CPU_LOG.name)
    # the generation's arguments close the command line (the log's first lines): MODEL N_GEN GPU_LAYERS
    argv_end = next(ln for ln in CPU_LOG.read_text().splitlines() if ln.startswith("' "))
    n_gen, ngl = (int(x) for x in argv_end.split()[-2:])
    assert cpu.version == "0.3.36+pk.0c1e5709.p0001.p0002.cpu" and len(cpu.tokens) == n_gen == 6
    assert cpu.gpu_offload is False and ngl == 0


def test_no_result_line_is_a_one_line_parse_error():
    with pytest.raises(ParseError, match=r"^gen\.log: the generation exited 0 but printed nothing on stdout"):
        parse_generate_result("\n  \n", "gen.log")
    cut = _stdout_of(CPU_LOG)[:100]  # the recorded line, cut short
    with pytest.raises(ParseError, match=r"^gen\.log: the generation's last stdout line is not its JSON result: '\{"):
        parse_generate_result("loading...\n" + cut, "gen.log")
    with pytest.raises(ParseError, match=r"not its JSON result: '\[1, 2\]'"):
        parse_generate_result("[1, 2]\n", "gen.log")


def test_result_line_missing_or_mistyped_field_is_named():
    line = json.loads(_stdout_of(CPU_LOG))
    del line["tokens"]
    with pytest.raises(ParseError, match=r"^gen\.log: the generation's result line has no 'tokens'$"):
        parse_generate_result(json.dumps(line), "gen.log")
    line = json.loads(_stdout_of(CPU_LOG))
    line["seconds"] = True
    with pytest.raises(ParseError, match=r"result 'seconds' has the wrong type \(bool\)"):
        parse_generate_result(json.dumps(line), "gen.log")
    line = json.loads(_stdout_of(CPU_LOG))
    line["tokens"] = ["86"]
    with pytest.raises(ParseError, match=r"result 'tokens' is not a list of token ids"):
        parse_generate_result(json.dumps(line), "gen.log")


def test_cpu_wheel_log_has_no_cuda_device():
    text = CPU_LOG.read_text()
    assert "CPU_Mapped model buffer" in text
    assert parse_llama_log(text) == Placement(devices=(), offloaded=None)


def test_partial_offload_is_the_last_report():
    text = (
        "load_tensors: offloaded 1/3 layers to GPU\n"
        "llama_prepare_model_devices: using device CUDA1 (NVIDIA L4) (0000:01:00.0)\n"
        "load_tensors: offloaded 2/3 layers to GPU\n"
    )
    assert parse_llama_log(text) == Placement(devices=("CUDA1 (NVIDIA L4)",), offloaded=(2, 3))


def test_second_device_run_needed_no_workaround():
    """The second H200 run (fixed wheel-check, no PYTHONPATH): pip saw the parent environment's
    packages through the .pth file, and generation gave the first run's tokens."""
    run2 = H200 / "second-run"
    pip = (run2 / "check-pip.log").read_text()
    assert "Requirement already satisfied: numpy" in pip and "in /opt/torch/.venv/lib/python3.12/site-packages" in pip
    assert pip.rstrip().splitlines()[-1].startswith("# exit: 0,")
    res = json.loads((run2 / "wheel-check.json").read_text())
    placement = parse_llama_log((run2 / "check-generate.log").read_text())
    assert res["ok"] is True and tuple(res["offloaded"]) == placement.offloaded == (3, 3)
    assert res["tokens"] == json.loads((H200 / "wheel-check.json").read_text())["tokens"]
    job = (run2 / "job.log").read_text()
    assert "built in 310 s (+0001+0002, cuda-90)" in job and "offloaded [3, 3]" in job
