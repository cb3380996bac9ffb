"""`patchkit wheel`: a llama-cpp-python wheel whose llama.cpp is a built variant, installed into a fresh
virtual environment and run on the synthetic model; and the refusals (not built, dirty, changed).

The wheel test compiles llama.cpp again through the sdist's scikit-build-core build (CPU backend,
`-j 2`, mtmd left out with LLAVA_BUILD=OFF to keep it to a few minutes on 2 cores). Its output goes to
the shared work folder, so a second session on the same folder reuses the wheel (and the test checks
that a second `patchkit wheel` says so).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from patchkit import proc, series, source
from patchkit.errors import BuildError, FetchError
from patchkit.wheel import check, info
from patchkit.workspace import Workspace
from tests.conftest import default_local

from .conftest import ROOT, copy_base, copy_cache

pytestmark = pytest.mark.integration

VARIANT = "+0001+0002"
UPSTREAM = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
N_GEN = 6


def _wheel_path(stdout: str) -> Path:
    m = re.search(r"^wheel(?: up to date)?: (.+\.whl)$", stdout, re.MULTILINE)
    assert m, stdout
    return Path(m.group(1))


def test_version_label_is_pep440_local():
    assert info.wheel_version("0.3.36", UPSTREAM, ["0001", "0002"], "cpu") == "0.3.36+pk.0c1e5709.p0001.p0002.cpu"
    assert info.wheel_version("0.3.36", UPSTREAM, [], "cuda-89_90") == "0.3.36+pk.0c1e5709.cuda.89.90"
    assert info.local_version(UPSTREAM, ["Perf_Cases-2"], "cuda-native") == "pk.0c1e5709.pperfcases2.cuda.native"
    with pytest.raises(BuildError):
        info.wheel_version("0.3.36+local", UPSTREAM, [], "cpu")


def test_sdist_is_extracted_without_its_vendored_tree():
    names = [
        "p-1",
        "p-1/pyproject.toml",
        "p-1/llama_cpp/__init__.py",
        "p-1/.git/HEAD",
        "p-1/vendor",
        "p-1/vendor/llama.cpp",
        "p-1/vendor/llama.cpp/CMakeLists.txt",
        "p-1/vendor/other/x.c",
    ]
    assert source.keep_prefixes(names, "p-1", "vendor/llama.cpp") == ("llama_cpp", "pyproject.toml", "vendor/other")


def test_project_archive_is_the_sdist_without_its_vendored_tree(work, base, default_recipe):
    """Cut once from the verified sdist (by fetch), and byte for byte the sdist's files."""
    sd = default_recipe.base.sdist
    path = source.sdist_project(sd, work)
    rec = json.loads(source.project_paths(work, sd)[1].read_text())
    assert rec["sdist_sha256"] == sd.sha256 and rec["sha256"] == source.sha256_file(path)
    with tarfile.open(path) as cut, tarfile.open(work.sdist(source.sdist_filename(sd))) as full:
        names = cut.getnames()
        assert len(names) == rec["members"]
        rel = {n.split("/", 1)[1] for n in names if "/" in n}
        assert "pyproject.toml" in rel and "llama_cpp/__init__.py" in rel and "CMakeLists.txt" in rel
        assert not [n for n in rel if n.startswith(("vendor/llama.cpp", ".git/"))]
        for n in names:
            if n.endswith(("pyproject.toml", "llama_cpp/__init__.py", "llama_cpp/llama_cpp.py")):
                assert cut.extractfile(n).read() == full.extractfile(n).read(), n
    assert path.stat().st_size < 2_000_000  # vs 76 MB for the whole sdist


def test_project_archive_alone_serves_offline_and_is_checked(work, base, default_recipe, tmp_path):
    """A machine that has only the project archive (what travels to the GPU machine) uses it offline;
    a changed archive or a record from another sdist is refused, naming the file."""
    sd = default_recipe.base.sdist
    path, record = source.project_paths(work, sd)
    source.sdist_project(sd, work)
    ws = Workspace.at(tmp_path / "w")
    with pytest.raises(FetchError, match=r"not in the cache and --offline was given \(nor is its project archive "):
        source.sdist_project(sd, ws, offline=True)
    dst, dst_rec = source.project_paths(ws, sd)
    dst.parent.mkdir(parents=True)
    shutil.copy(path, dst)
    shutil.copy(record, dst_rec)
    assert source.sdist_project(sd, ws, offline=True) == dst  # no sdist in this work folder
    assert not ws.sdist(source.sdist_filename(sd)).exists()

    recorded = json.loads(record.read_text())["sha256"]
    with open(dst, "ab") as f:
        f.write(b"x")
    with pytest.raises(
        FetchError,
        match=rf"{re.escape(str(dst))}: sha256 [0-9a-f]{{64}} is not the {recorded} recorded",
    ):
        source.sdist_project(sd, ws, offline=True)
    shutil.copy(path, dst)
    other = dataclasses.replace(sd, sha256="0" * 64)
    with pytest.raises(FetchError) as e:
        source.sdist_project(other, ws, offline=True)
    msg = str(e.value)  # one line: the record, the sdist it was cut from, the recipe's
    assert msg.startswith(f"{dst_rec}: ") and "\n" not in msg, msg
    assert "cut from another sdist" in msg and sd.sha256 in msg and "0" * 64 in msg, msg


def test_wheel_check_environment_sees_a_parent_virtualenv(tmp_path):
    """Run from a virtual environment, the new one also sees that environment's packages (after its own)."""
    parent = tmp_path / "parent"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(parent)], check=True)
    code = (
        "import subprocess, sys, site, pathlib\n"
        "from patchkit.wheel.check import see_parent_packages\n"
        "child = pathlib.Path(sys.argv[1])\n"
        "subprocess.run([sys.executable, '-m', 'venv', '--without-pip', '--system-site-packages', str(child)],\n"
        "               check=True)\n"
        "see_parent_packages(child / 'bin' / 'python')\n"
        "print(site.getsitepackages()[0])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [parent / "bin" / "python", "-c", code, tmp_path / "child"], check=True, capture_output=True, text=True, env=env
    )
    parent_site = r.stdout.strip().splitlines()[-1]
    assert parent_site.startswith(str(parent))
    path = subprocess.run(
        [tmp_path / "child" / "bin" / "python", "-c", "import sys; print('\\n'.join(sys.path))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    assert parent_site in path
    own = [p for p in path if p.startswith(str(tmp_path / "child")) and p.endswith("site-packages")]
    assert own and path.index(own[0]) < path.index(parent_site)


# A stand-in llama_cpp with the API the generation uses, whose start-up leaves stdout on /dev/null (what
# llama-cpp-python's suppress_stdout_stderr leaves behind when it is not undone): the generation runs,
# exits 0 and its result line goes nowhere.
SILENT_LLAMA_CPP = """\
import os

__version__ = "0.0.1+pk.test.cpu"
GGML_TYPE_Q4_0 = 2
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)


def llama_supports_gpu_offload():
    return False


class _Params:
    flash_attn_type = 1
    type_k = type_v = GGML_TYPE_Q4_0


class Llama:
    def __init__(self, model_path, **kw):
        self.context_params = _Params()

    def tokenize(self, text):
        return list(text)

    def generate(self, prompt, temp=0.0):
        while True:
            yield 1

    def detokenize(self, tokens):
        return bytes(tokens)
"""


def _wheel_file(folder: Path, files: dict[str, str], version: str = "0.0.1+pk.test.cpu") -> Path:
    """A real, installable wheel of `llama_cpp_python` holding `files` (plus its dist-info)."""
    dist = f"llama_cpp_python-{version}"
    meta = {
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: llama_cpp_python\nVersion: {version}\n",
        f"{dist}.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: patchkit-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    entries = {**files, **meta}
    record = "".join(f"{name},,\n" for name in entries) + f"{dist}.dist-info/RECORD,,\n"
    whl = folder / f"{dist}-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(whl, "w") as z:
        for name, text in {**entries, f"{dist}.dist-info/RECORD": record}.items():
            z.writestr(name, text)
    return whl


def _one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    err = r.stderr.strip().splitlines()
    assert err and err[-1].startswith("patchkit: error: "), r.stderr
    assert not [ln for ln in err if ln.startswith("patchkit:")][:-1], r.stderr  # one error line, the last
    return err[-1]


def test_wheel_check_refuses_a_wheel_patchkit_did_not_make(cli, tmp_path):
    whl = _wheel_file(tmp_path / "dist", {"llama_cpp/__init__.py": '__version__ = "0.0.1+pk.test.cpu"\n'})
    r = cli("wheel-check", str(whl), "--work", str(tmp_path / "w"), check=False)
    msg = _one_line_error(r)
    assert msg == f"patchkit: error: {whl}: no llama_cpp/patchkit.json inside: not a wheel made by `patchkit wheel`"


def test_wheel_check_generation_without_result_line_is_one_error(cli, tmp_path):
    """A wheel that installs and runs but whose generation prints no result line: one line naming the
    log and the cause, exit 2 (once a TypeError traceback: CommandError built with one argument)."""
    version = "0.0.1+pk.test.cpu"
    pk = {"wheel_key": "0" * 64, "version": version, "backend": "cpu", "variant": "+test", "config": "cpu"}
    whl = _wheel_file(
        tmp_path / "dist",
        {"llama_cpp/__init__.py": SILENT_LLAMA_CPP, "llama_cpp/patchkit.json": json.dumps(pk)},
        version,
    )
    model = tmp_path / "not-read.gguf"
    model.write_bytes(b"GGUF")  # the stand-in never reads it
    work = tmp_path / "w"
    r = cli(
        "wheel-check",
        str(whl),
        "--work",
        str(work),
        "--model",
        str(model),
        "--find-links",
        str(whl.parent),
        check=False,
    )
    log = work / "logs" / "wheel-check" / f"{whl.stem}.log"
    msg = _one_line_error(r)
    assert msg == f"patchkit: error: {log}: the generation exited 0 but printed nothing on stdout: no result line"
    assert log.read_text().rstrip().splitlines()[-1].startswith("# exit: 0,")  # it ran, to the end
    pip_log = (work / "logs" / "wheel-check" / f"{whl.stem}-pip.log").read_text()
    assert (
        f"Successfully installed llama_cpp_python-{version}" in pip_log
        or "Successfully installed llama-cpp-python" in pip_log
    )
    assert not (log.with_suffix(".json")).exists()  # no result written


@pytest.mark.slow
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
    assert re.fullmatch(
        r"llama_cpp_python-0\.3\.36\+pk\.0c1e5709\.p0001\.p0002\.cpu-py3-none-[a-z0-9_]+\.whl", whl.name
    ), whl.name
    if "up to date" not in r.stdout:
        assert re.search(r"^built in \d+ s", r.stdout, re.MULTILINE), r.stdout
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        assert any(re.fullmatch(r"llama_cpp/lib/libllama\.so.*", n) for n in names), names
        assert "llama_cpp/patchkit.json" in names

    # the same inputs again: the wheel is reused, not rebuilt
    again = cli(*args)
    assert "wheel up to date" in again.stdout and _wheel_path(again.stdout) == whl

    # what a user does with it: a fresh virtual environment, pip install, generate (patchkit wheel-check)
    out = tmp_path / "check.json"
    chk = cli("wheel-check", str(whl), "--work", str(work.root), "--tokens", str(N_GEN), "--json", str(out))
    assert re.search(rf"generated {N_GEN} tokens in [0-9.]+ s", chk.stdout), chk.stdout
    got = json.loads(out.read_text())
    assert got["ok"] is True

    # the installed package is the wheel's, not something else on the path
    assert "/wheels/.tmp/check-" in got["file"] and got["file"].endswith("/site-packages/llama_cpp/__init__.py"), got[
        "file"
    ]
    assert got["version"] == "0.3.36+pk.0c1e5709.p0001.p0002.cpu"
    assert len(got["tokens"]) == N_GEN and all(0 <= t < check.SMOKE_MODEL["n_vocab"] for t in got["tokens"])
    assert got["flash_attn"] == 1 and got["type_k"] == got["type_v"] == 2  # enabled, GGML_TYPE_Q4_0
    assert got["gpu_layers"] == 0 and got["devices"] == []  # a CPU wheel: no CUDA device in llama.cpp's log
    assert Path(got["log"]).is_file() and "llama_model_loader" in proc.read_both(Path(got["log"]))  # stderr beside

    wi = info.read_wheel_info(whl)
    assert wi["wheel_key"] == got["wheel_key"]
    state = json.loads(
        series.state_path(work, default_recipe, series.plan_variants(default_recipe, only=(VARIANT,))[0]).read_text()
    )
    assert wi["variant"] == VARIANT and wi["recipe"] == default_recipe.name
    assert wi["base"]["commit"] == UPSTREAM and wi["head"] == state["head"]
    assert wi["variant_key"] == state["key"]
    assert [p["id"] for p in wi["patches"]] == [*default_local(), "0001", "0002"]
    for p in wi["patches"]:
        assert p["sha256"] == series.patch_sha256(ROOT / p["file"]), p
    assert "-DLLAVA_BUILD=OFF" in wi["cmake_args"] and "-DGGML_CUDA=OFF" in wi["cmake_args"]


def test_refuses_a_variant_that_was_not_built(work, cli, tmp_path):
    ws = copy_cache(work, tmp_path / "w")
    r = cli("wheel", "--work", str(ws.root), "--variant", VARIANT, "--backend", "cpu", check=False)
    assert r.returncode == 2, r.stdout + r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("patchkit: error: "), r.stderr
    assert f"variant {VARIANT} was not built" in err[0]
    assert f"patchkit build --work {ws.root} --backend cpu --variant {VARIANT}" in err[0]


def test_refuses_unbuilt_dirty_or_changed_variant(work, base, cli, tmp_path):
    """An applied but unbuilt variant, then the same tree with an edit, then a changed patch file."""
    proj = tmp_path / "proj"
    (proj / "recipes").mkdir(parents=True)
    shutil.copy(ROOT / "recipes" / "default.toml", proj / "recipes" / "default.toml")
    shutil.copytree(ROOT / "patches", proj / "patches")
    ws = copy_base(work, base, tmp_path / "w")
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
