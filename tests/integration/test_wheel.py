"""`patchkit wheel`: a llama-cpp-python wheel whose llama.cpp is a built variant, installed into a fresh
virtual environment and run on the synthetic model; and the refusals (not built, dirty, changed).

The wheel test compiles llama.cpp again through the sdist's scikit-build-core build (CPU backend,
`-j 2`, mtmd left out with LLAVA_BUILD=OFF to keep it to a few minutes on 2 cores). Its output goes to
the shared work folder, so a second session on the same folder reuses the wheel (and the test checks
that a second `patchkit wheel` says so).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from patchkit import series, wheel
from patchkit.errors import BuildError
from patchkit.model import spec_from_mapping, write_synthetic_gguf

from .conftest import ROOT, copy_cache

pytestmark = pytest.mark.integration

VARIANT = "+0001+0002"
UPSTREAM = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
N_GEN = 6

# a small model with the seed's attention geometry (head dim 256, GQA 6)
MODEL = {"n_layer": 2, "n_embd": 256, "n_head": 6, "n_head_kv": 1, "head_dim": 256, "n_ff": 512,
         "n_vocab": 512, "context_length": 1024}  # fmt: skip

GENERATE = r"""
import json, pathlib, sys
import llama_cpp
from llama_cpp import Llama

info = json.loads((pathlib.Path(llama_cpp.__file__).parent / "patchkit.json").read_text())
llm = Llama(model_path=sys.argv[1], n_ctx=256, n_threads=2, n_batch=64, seed=0, verbose=False,
            flash_attn=True, type_k=llama_cpp.GGML_TYPE_Q4_0, type_v=llama_cpp.GGML_TYPE_Q4_0)
prompt = llm.tokenize(b"hello world")
out = []
for tok in llm.generate(prompt, temp=0.0):
    out.append(int(tok))
    if len(out) >= int(sys.argv[2]):
        break
print(json.dumps({
    "file": llama_cpp.__file__, "version": llama_cpp.__version__, "prompt": prompt, "tokens": out,
    "text": llm.detokenize(out).decode("utf-8", "replace"), "info": info,
    "flash_attn": llm.context_params.flash_attn_type, "type_k": llm.context_params.type_k,
    "type_v": llm.context_params.type_v,
}))
"""


def _wheel_path(stdout: str) -> Path:
    m = re.search(r"^wheel(?: up to date)?: (.+\.whl)$", stdout, re.MULTILINE)
    assert m, stdout
    return Path(m.group(1))


def test_version_label_is_pep440_local():
    assert wheel.wheel_version("0.3.36", UPSTREAM, ["0001", "0002"], "cpu") == "0.3.36+pk.0c1e5709.p0001.p0002.cpu"
    assert wheel.wheel_version("0.3.36", UPSTREAM, [], "cuda-89_90") == "0.3.36+pk.0c1e5709.cuda.89.90"
    assert wheel.local_version(UPSTREAM, ["Perf_Cases-2"], "cuda-native") == "pk.0c1e5709.pperfcases2.cuda.native"
    with pytest.raises(BuildError):
        wheel.wheel_version("0.3.36+local", UPSTREAM, [], "cpu")


def test_sdist_is_extracted_without_its_vendored_tree():
    names = ["p-1", "p-1/pyproject.toml", "p-1/llama_cpp/__init__.py", "p-1/.git/HEAD", "p-1/vendor",
             "p-1/vendor/llama.cpp", "p-1/vendor/llama.cpp/CMakeLists.txt", "p-1/vendor/other/x.c"]  # fmt: skip
    assert wheel._keep_prefixes(names, "p-1", "vendor/llama.cpp") == ("llama_cpp", "pyproject.toml", "vendor/other")


def test_cpu_wheel_installs_and_generates(work, cli, default_recipe, tmp_path):
    pytest.importorskip("gguf")
    w = ["--work", str(work.root)]
    # the variant's CPU build (a finished build is never redone; the other integration tests make it too)
    cli("build", *w, "--backend", "cpu", "--variant", VARIANT, "-j", "2")
    args = ["wheel", *w, "--variant", VARIANT, "--backend", "cpu", "-j", "2", "-D", "LLAVA_BUILD=OFF"]
    if importlib.util.find_spec("scikit_build_core") is not None:
        args.append("--no-isolation")  # else pip's build isolation fetches scikit-build-core from PyPI
    r = cli(*args, env={"CMAKE_BUILD_PARALLEL_LEVEL": "2"})
    whl = _wheel_path(r.stdout)
    assert whl.is_file()
    assert re.fullmatch(r"llama_cpp_python-0\.3\.36\+pk\.0c1e5709\.p0001\.p0002\.cpu-py3-none-[a-z0-9_]+\.whl", whl.name), whl.name
    if "up to date" not in r.stdout:
        assert re.search(r"^built in \d+ s", r.stdout, re.MULTILINE), r.stdout
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        assert any(re.fullmatch(r"llama_cpp/lib/libllama\.so.*", n) for n in names), names
        assert "llama_cpp/patchkit.json" in names

    # the same inputs again: the wheel is reused, not rebuilt
    again = cli(*args)
    assert "wheel up to date" in again.stdout and _wheel_path(again.stdout) == whl

    venv = tmp_path / "venv"
    # system site packages: numpy, jinja2, typing-extensions from this environment; pip adds the rest
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = venv / "bin" / "python"
    inst = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(whl)], check=False, capture_output=True, text=True)
    assert inst.returncode == 0, inst.stdout + inst.stderr[-4000:]

    model = write_synthetic_gguf(tmp_path / "model.gguf", spec_from_mapping(MODEL))
    run = subprocess.run([py, "-c", GENERATE, str(model), str(N_GEN)], check=False, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-4000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])

    # the installed package is the wheel's, not something else on the path
    assert Path(got["file"]).is_relative_to(venv), got["file"]
    assert got["version"] == "0.3.36+pk.0c1e5709.p0001.p0002.cpu"
    assert len(got["tokens"]) == N_GEN and all(0 <= t < MODEL["n_vocab"] for t in got["tokens"])
    assert got["flash_attn"] == 1 and got["type_k"] == got["type_v"] == 2  # enabled, GGML_TYPE_Q4_0

    info = got["info"]
    state = json.loads(series.state_path(work, default_recipe, series.plan_variants(default_recipe, only=(VARIANT,))[0]).read_text())
    assert info["variant"] == VARIANT and info["recipe"] == default_recipe.name
    assert info["base"]["commit"] == UPSTREAM and info["head"] == state["head"]
    assert info["variant_key"] == state["key"]
    assert [p["id"] for p in info["patches"]] == ["perf-cases", "0001", "0002"]
    for p in info["patches"]:
        assert p["sha256"] == series.patch_sha256(ROOT / p["file"]), p
    assert "-DLLAVA_BUILD=OFF" in info["cmake_args"] and "-DGGML_CUDA=OFF" in info["cmake_args"]


def test_refuses_a_variant_that_was_not_built(work, cli, tmp_path):
    ws = copy_cache(work, tmp_path / "w")
    r = cli("wheel", "--work", str(ws.root), "--variant", VARIANT, "--backend", "cpu", check=False)
    assert r.returncode == 2, r.stdout + r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("patchkit: error: "), r.stderr
    assert f"variant {VARIANT} was not built" in err[0]
    assert f"patchkit build --work {ws.root} --backend cpu --variant {VARIANT}" in err[0]


def test_refuses_unbuilt_dirty_or_changed_variant(work, cli, tmp_path):
    """An applied but unbuilt variant, then the same tree with an edit, then a changed patch file."""
    proj = tmp_path / "proj"
    (proj / "recipes").mkdir(parents=True)
    shutil.copy(ROOT / "recipes" / "default.toml", proj / "recipes" / "default.toml")
    shutil.copytree(ROOT / "patches", proj / "patches")
    ws = copy_cache(work, tmp_path / "w")
    w = ["-r", str(proj / "recipes" / "default.toml"), "--work", str(ws.root)]
    cli("apply", *w, "--variant", "+0001")

    def refused(*extra: str) -> str:
        r = cli("wheel", *w, "--variant", "+0001", "--backend", "cpu", *extra, check=False)
        assert r.returncode == 2, r.stdout + r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("patchkit: error: variant +0001"), r.stderr
        return lines[0]

    assert "was not built for cpu: no finished build" in refused() and "patchkit build" in refused()

    tree = ws.variants("seed-fattn") / "+0001"
    edited = tree / "ggml" / "src" / "ggml-cuda" / "fattn.cu"
    edited.write_text(edited.read_text() + "\n// local edit\n")
    msg = refused()
    assert "uncommitted edits" in msg and "ggml/src/ggml-cuda/fattn.cu" in msg
    subprocess.run(["git", "-C", str(tree), "checkout", "--", "."], check=True)

    patch = proj / "patches" / "0001-cuda-mma-fattn-gqa-quantized-kv.patch"
    text = patch.read_text()
    patch.write_text(text.replace("\ndiff --git ", "\nChanged after the build.\n\ndiff --git ", 1))
    assert patch.read_text() != text
    assert "changed since it was built" in refused()
