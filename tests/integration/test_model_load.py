"""The synthetic model loads and runs in a real llama.cpp build (CPU is enough).

PATCHKIT_TEST_BIN names the directory holding llama-bench and llama-completion; unset: the base
variant's CPU build in the test work folder (built by test_cli_cpu's session fixture).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from patchkit import parsers
from patchkit.measure import numerics as run_mod
from patchkit.measure.model import SyntheticModelSpec, describe, write_synthetic_gguf

pytestmark = pytest.mark.integration

pytest.importorskip("gguf")

THREADS = "2"
TIMEOUT = 600


@pytest.fixture(scope="module")
def bin_dir(request) -> Path:
    env = os.environ.get("PATCHKIT_TEST_BIN")
    if env:
        d = Path(env)
    else:
        request.getfixturevalue("cpu_build")  # the real CPU build of the default recipe (reused if done)
        d = request.getfixturevalue("work").builds("seed-fattn", "cpu") / "bin" / "base"
    for tool in ("llama-bench", "llama-completion"):
        # set but wrong is a broken setup, not a reason to skip
        assert os.access(d / tool, os.X_OK), f"PATCHKIT_TEST_BIN={d}: no executable {tool}"
    return d


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return write_synthetic_gguf(tmp_path_factory.mktemp("model") / "synthetic.gguf", SyntheticModelSpec())


def run(argv: list) -> subprocess.CompletedProcess:
    r = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL
    )
    assert r.returncode == 0, f"{argv[0]} exited {r.returncode}\n--- stderr tail:\n{r.stderr[-4000:]}"
    return r


def run_whole(argv: list) -> subprocess.CompletedProcess:
    """llama-completion as patchkit's numerics runs it: at this base llama.cpp's async logger can drop
    the tail of the output at exit (exit 0; seen in CI with the whole generated text and the perf lines
    lost), so a run without its closing common_perf_print lines is run again, up to run.ATTEMPTS."""
    for _ in range(run_mod.ATTEMPTS):
        r = run(argv)
        # the eval line too: a rehearsal of CI (2026-12-05) lost it with the lines after the sampler's
        if parsers.completion_finished(r.stderr) and re.search(r"\beval time =.*?/\s*(\d+) runs", r.stderr):
            return r
    raise AssertionError(
        f"{argv[0]}: output cut short in {run_mod.ATTEMPTS} runs\n--- stderr tail:\n{r.stderr[-3000:]}"
    )


def test_llama_bench_decodes_with_quantized_kv(bin_dir, model):
    n_gen = 4
    r = run(
        [
            bin_dir / "llama-bench",
            "-m",
            model,
            "-p",
            "0",
            "-n",
            n_gen,
            "-r",
            "1",
            "-fa",
            "1",
            "-ctk",
            "q4_0",
            "-ctv",
            "q4_0",
            "-t",
            THREADS,
            "-o",
            "json",
        ]
    )
    rows = json.loads(r.stdout)
    assert len(rows) == 1, rows
    row = rows[0]
    assert row["n_gen"] == n_gen and row["n_prompt"] == 0
    assert row["type_k"] == "q4_0" and row["type_v"] == "q4_0"
    assert row["flash_attn"] in (True, 1)
    assert row["avg_ts"] > 0
    assert row["model_n_params"] == describe(SyntheticModelSpec())["n_params"]
    assert row["model_size"] > 0


def test_llama_completion_generates_and_loads_cleanly(bin_dir, model):
    n_predict = 8
    prompt = "hello World, 123 tokens: ~{[<x>]}!"
    # -c 256: the model's own context (131072) would allocate GiBs of KV cache for nothing.
    # --ignore-eos: random weights may well pick </s>; the test is about producing n tokens.
    # -lv 4: the load log (print_info, vocab) is logged at this verbosity, warnings too.
    r = run_whole(
        [
            bin_dir / "llama-completion",
            "-m",
            model,
            "-p",
            prompt,
            "-n",
            n_predict,
            "--temp",
            "0",
            "-no-cnv",
            "-c",
            "256",
            "-t",
            THREADS,
            "-s",
            "0",
            "--ignore-eos",
            "-lv",
            "4",
            "--log-colors",
            "off",
        ]
    )
    log = r.stderr

    # the prompt round-trips through the tokenizer (SPM adds a leading space) and text follows it
    assert r.stdout.lstrip().startswith(prompt), r.stdout
    assert len(r.stdout.strip()) > len(prompt)

    # the first generated token is sampled from the prompt's logits; the other n-1 are decode runs
    m = re.search(r"\beval time =.*?/\s*(\d+) runs", log)
    assert m, log[-3000:]
    assert int(m.group(1)) == n_predict - 1

    # the attention geometry llama.cpp saw: key_length honoured, GQA 6
    for key, value in [
        ("n_head", "24"),
        ("n_head_kv", "4"),
        ("n_embd_head_k", "256"),
        ("n_embd_head_v", "256"),
        ("n_rot", "256"),
        ("n_gqa", "6"),
        ("n_ctx_train", "131072"),
        ("vocab type", "SPM"),
        ("n_vocab", "512"),
    ]:
        assert re.search(rf"print_info: {key}\s+= {value}\b", log), f"{key} != {value} in load log"
    assert re.search(r"LF token\s+= 13 '<0x0A>'", log)

    # llama.cpp had nothing to warn about (vocab, tensors, hparams)
    warnings = [ln for ln in log.splitlines() if re.match(r"^\s*(?:[\d.]+ )?[WE] ", ln)]
    assert not warnings, "\n".join(warnings)
