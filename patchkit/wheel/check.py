"""`patchkit wheel-check`: install a patchkit wheel into a fresh virtual environment and generate.

What a user does with the wheel, done once by the tool so that a wheel is proven before it is handed
on: a new virtual environment that sees the system site packages (and, where patchkit's Python is
itself a virtual environment, that one's packages too), so numpy and friends need no download;
`pip install` of the wheel with its dependencies (`--find-links DIR --no-index` offline); a model (the
one given, or a synthetic llama-architecture model with the seed's attention geometry: head dim 256,
GQA 6); and greedy generation through `llama_cpp.Llama` with flash attention and q4_0 K/V cache, all
layers offloaded for a CUDA wheel. The check fails (one line, exit 2) unless the imported package is
the one installed from the wheel, its version and patchkit.json are the wheel's, and it generated the
tokens asked for; for a CUDA wheel, also unless llama.cpp reported the layers offloaded to a CUDA
device. llama.cpp's own log (stderr) is saved with the pip output in the log file; the result (tokens,
text, devices, seconds, tokens/s) is printed and written as JSON.
"""

from __future__ import annotations

import site
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from patchkit import backends, proc
from patchkit.errors import BuildError
from patchkit.measure.model import spec_from_mapping, write_synthetic_gguf
from patchkit.parsers.wheel_check import GenerateResult, Placement, parse_generate_result, parse_llama_log
from patchkit.wheel.info import PACKAGE, PATCHKIT_JSON, read_wheel_info
from patchkit.workspace import Workspace, write_json

# the seed's attention geometry at toy size (head dim 256, 6 query heads on 1 KV head)
SMOKE_MODEL = {
    "n_layer": 2,
    "n_embd": 256,
    "n_head": 6,
    "n_head_kv": 1,
    "head_dim": 256,
    "n_ff": 512,
    "n_vocab": 512,
    "context_length": 1024,
}

# runs inside the new environment: argv = model, tokens, gpu layers; prints one JSON line
GENERATE = r"""
import json, pathlib, sys, time
import llama_cpp
from llama_cpp import Llama

model, n_gen, ngl = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
info = json.loads((pathlib.Path(llama_cpp.__file__).parent / "patchkit.json").read_text())
llm = Llama(model_path=model, n_ctx=256, n_batch=64, seed=0, verbose=True, n_gpu_layers=ngl,
            flash_attn=True, type_k=llama_cpp.GGML_TYPE_Q4_0, type_v=llama_cpp.GGML_TYPE_Q4_0)
prompt = llm.tokenize(b"hello world")
out = []
t0 = time.perf_counter()
for tok in llm.generate(prompt, temp=0.0):
    out.append(int(tok))
    if len(out) >= n_gen:
        break
dt = time.perf_counter() - t0
print(json.dumps({
    "file": llama_cpp.__file__, "version": llama_cpp.__version__, "prompt": prompt, "tokens": out,
    "text": llm.detokenize(out).decode("utf-8", "replace"), "wheel_key": info.get("wheel_key"),
    "gpu_offload": bool(llama_cpp.llama_supports_gpu_offload()), "seconds": dt,
    "flash_attn": int(llm.context_params.flash_attn_type), "type_k": int(llm.context_params.type_k),
    "type_v": int(llm.context_params.type_v),
}))
"""


@dataclass(frozen=True, kw_only=True)
class CheckOptions:
    """What `patchkit wheel-check` was asked for."""

    wheel: Path  # the .whl made by `patchkit wheel`
    model: Path | None = None  # a GGUF model (default: a synthetic one with the seed's attention shape)
    tokens: int = 16  # tokens to generate
    gpu_layers: int | None = None  # n_gpu_layers (default: all for a CUDA wheel, 0 for a CPU wheel)
    find_links: Path | None = None  # install dependencies from this folder only (no index)
    timeout: float = 600  # seconds for the generation
    json_out: Path | None = None  # where the result goes (default: next to the log)


def see_parent_packages(py: Path) -> None:
    """Where patchkit's own Python is a virtual environment, `--system-site-packages` shows the new
    one only the base interpreter's packages: a .pth file adds patchkit's site-packages after the new
    environment's own, so the wheel's dependencies that are here already count as installed (and the
    wheel's own package, installed in the new environment, comes first)."""
    if sys.prefix == sys.base_prefix:
        return
    purelib = proc.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], echo=False
    ).stdout.strip()
    Path(purelib, "_patchkit_parent.pth").write_text(
        "".join(f"{d}\n" for d in site.getsitepackages()), encoding="utf-8"
    )


def install(whl: Path, venv: Path, logs: Path, find_links: Path | None) -> Path:
    """A fresh virtual environment at `venv` with the wheel installed; returns its python."""
    proc.run([sys.executable, "-m", "venv", "--system-site-packages", venv], log=logs / f"{whl.stem}-venv.log")
    py = venv / "bin" / "python"
    see_parent_packages(py)
    pip = [py, "-m", "pip", "install", "--disable-pip-version-check", "--no-cache-dir"]
    if find_links:
        pip += ["--no-index", "--find-links", str(find_links.resolve())]
    proc.run([*pip, whl], log=logs / f"{whl.stem}-pip.log")
    return py


def problems(
    got: GenerateResult, info: dict, placement: Placement, venv: Path, *, tokens: int, cuda: bool, ngl: int
) -> list[str]:
    """Why the generation does not prove the wheel (empty when it does)."""
    out = []
    if not Path(got.file).is_relative_to(venv):
        out.append(f"imported {got.file}, not the wheel's package in the new environment")
    if got.version != info["version"] or got.wheel_key != info["wheel_key"]:
        out.append(f"imported version {got.version}, not the wheel's {info['version']}")
    if len(got.tokens) != tokens:
        out.append(f"generated {len(got.tokens)} tokens, not {tokens}")
    if cuda and ngl != 0:
        off = placement.offloaded
        if not got.gpu_offload or not placement.devices or not off or off[0] != off[1]:
            out.append(
                f"layers not on a CUDA device (gpu offload {got.gpu_offload}, "
                f"devices {list(placement.devices)}, offloaded {list(off) if off else None})"
            )
    return out


def _wheel_info(whl: Path) -> dict:
    if not whl.is_file():
        raise BuildError(f"{whl}: no such wheel")
    info = read_wheel_info(whl)
    if info is None:
        raise BuildError(f"{whl}: no {PACKAGE}/{PATCHKIT_JSON} inside: not a wheel made by `patchkit wheel`")
    return info


def check_wheel(ws: Workspace, opts: CheckOptions) -> dict:
    """Install the wheel into a fresh environment and generate; returns the result (also written as
    JSON), or raises BuildError naming what the generation did not prove."""
    whl = opts.wheel.resolve()
    info = _wheel_info(whl)
    model = opts.model.resolve() if opts.model else None
    if model is not None and not model.is_file():
        raise BuildError(f"{model}: no such model file")
    be = backends.BACKENDS.get(info.get("backend") or "", backends.CPU)  # a wheel without the record: CPU
    cuda = be.needs_gpu
    ngl = opts.gpu_layers if opts.gpu_layers is not None else be.wheel_gpu_layers
    logs = ws.root / "logs" / "wheel-check"
    log = logs / f"{whl.stem}.log"
    tmp_root = ws.root / "wheels" / ".tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=tmp_root, prefix="check-") as tmp_s:
        tmp = Path(tmp_s)
        venv = tmp / "venv"
        t0 = time.monotonic()
        py = install(whl, venv, logs, opts.find_links)
        install_s = time.monotonic() - t0
        if model is None:
            model = write_synthetic_gguf(tmp / "smoke.gguf", spec_from_mapping(SMOKE_MODEL))
        argv = [py, "-c", GENERATE, model, str(opts.tokens), str(ngl)]
        r = proc.run(argv, log=log, cwd=tmp, separate_stderr=True, timeout=opts.timeout)
    got = parse_generate_result(r.stdout, str(log))
    placement = parse_llama_log(proc.read_both(log))  # llama.cpp logs on stderr, kept beside the log
    result = {
        "wheel": whl.name,
        "version": info["version"],
        "variant": info.get("variant"),
        "config": info.get("config"),
        "install_seconds": round(install_s, 1),
        "gpu_layers": ngl,
        **placement.to_dict(),
        **got.to_dict(),
        "tokens_per_second": round(len(got.tokens) / got.seconds, 1) if got.seconds else None,
        "log": str(log),
    }
    found = problems(got, info, placement, venv, tokens=opts.tokens, cuda=cuda, ngl=ngl)
    result["ok"] = not found
    out = opts.json_out.resolve() if opts.json_out else log.with_suffix(".json")
    write_json(out, result)
    print(
        f"wheel-check: {whl.name}: installed in {install_s:.1f} s; generated {len(got.tokens)} tokens in "
        f"{got.seconds:.3f} s ({result['tokens_per_second']} t/s); "
        f"devices {', '.join(placement.devices) or 'CPU'}; offloaded {result['offloaded']}"
    )
    print(f"result: {out}")
    if found:
        raise BuildError(f"wheel-check {whl.name}: {'; '.join(found)} (log: {log})")
    return result
