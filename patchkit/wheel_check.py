"""`patchkit wheel-check`: install a patchkit wheel into a fresh virtual environment and generate.

What a user does with the wheel, done once by the tool so that a wheel is proven before it is handed
on: a new virtual environment that sees the system site packages (and, where patchkit's Python is
itself a virtual environment, that one's packages too), so numpy and friends need no download;
`pip install` of the wheel with its dependencies (`--find-links DIR --no-index` offline); a model (the
one given, or a synthetic llama-architecture model with the seed's attention geometry: head dim 256,
GQA 6); and greedy generation through `llama_cpp.Llama` with flash attention
and q4_0 K/V cache, all layers offloaded for a CUDA wheel. The check fails (one line, exit 2) unless
the imported package is the one installed from the wheel, its version and patchkit.json are the
wheel's, and it generated the tokens asked for; for a CUDA wheel, also unless llama.cpp reported the
layers offloaded to a CUDA device. llama.cpp's own log (stderr) is saved with the pip output in the log
file; the result (tokens, text, devices, seconds, tokens/s) is printed and written as JSON.
"""

from __future__ import annotations

import argparse
import json
import re
import site
import sys
import tempfile
import time
from pathlib import Path

from patchkit import proc
from patchkit.errors import BuildError, CommandError
from patchkit.wheel import read_wheel_info
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

_OFFLOADED_RE = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
_DEVICE_RE = re.compile(r"using device (CUDA\d+) \(([^)]*)\)")


def parse_llama_log(text: str) -> dict:
    """What llama.cpp's load log says about placement: the CUDA devices used and the offloaded layers."""
    devices = sorted({f"{m.group(1)} ({m.group(2)})" for m in _DEVICE_RE.finditer(text)})
    offloaded = _OFFLOADED_RE.findall(text)
    return {"devices": devices, "offloaded": [int(n) for n in offloaded[-1]] if offloaded else None}


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


def check_wheel(args: argparse.Namespace) -> dict:
    whl = Path(args.wheel).resolve()
    if not whl.is_file():
        raise BuildError(f"{whl}: no such wheel")
    info = read_wheel_info(whl)
    if info is None:
        raise BuildError(f"{whl}: no llama_cpp/patchkit.json inside: not a wheel made by `patchkit wheel`")
    cuda = info.get("backend") == "cuda"
    ngl = args.gpu_layers if args.gpu_layers is not None else (-1 if cuda else 0)
    ws = Workspace.at(args.work)
    logs = ws.root / "logs" / "wheel-check"
    log = logs / f"{whl.stem}.log"
    tmp_root = ws.root / "wheels" / ".tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=tmp_root, prefix="check-") as tmp_s:
        tmp = Path(tmp_s)
        venv = tmp / "venv"
        t0 = time.monotonic()
        proc.run([sys.executable, "-m", "venv", "--system-site-packages", venv], log=logs / f"{whl.stem}-venv.log")
        py = venv / "bin" / "python"
        see_parent_packages(py)
        pip = [py, "-m", "pip", "install", "--disable-pip-version-check", "--no-cache-dir"]
        if args.find_links:
            pip += ["--no-index", "--find-links", str(Path(args.find_links).resolve())]
        proc.run([*pip, whl], log=logs / f"{whl.stem}-pip.log")
        install_s = time.monotonic() - t0
        if args.model:
            model = Path(args.model).resolve()
            if not model.is_file():
                raise BuildError(f"{model}: no such model file")
        else:
            from patchkit.model import spec_from_mapping, write_synthetic_gguf

            model = write_synthetic_gguf(tmp / "smoke.gguf", spec_from_mapping(SMOKE_MODEL))
        r = proc.run(
            [py, "-c", GENERATE, model, str(args.tokens), str(ngl)],
            log=log,
            cwd=tmp,
            separate_stderr=True,
            timeout=args.timeout,
        )
    try:
        got = json.loads(r.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise CommandError(f"wheel-check: no result line from the generation (log: {log})") from None
    placement = parse_llama_log(log.read_text(errors="replace"))
    result = {
        "wheel": whl.name,
        "version": info["version"],
        "variant": info.get("variant"),
        "config": info.get("config"),
        "install_seconds": round(install_s, 1),
        "gpu_layers": ngl,
        **placement,
        **got,
        "tokens_per_second": round(len(got["tokens"]) / got["seconds"], 1) if got.get("seconds") else None,
        "log": str(log),
    }
    problems = []
    if not Path(got["file"]).is_relative_to(venv):
        problems.append(f"imported {got['file']}, not the wheel's package in the new environment")
    if got["version"] != info["version"] or got["wheel_key"] != info["wheel_key"]:
        problems.append(f"imported version {got['version']}, not the wheel's {info['version']}")
    if len(got["tokens"]) != args.tokens:
        problems.append(f"generated {len(got['tokens'])} tokens, not {args.tokens}")
    if cuda and ngl != 0:
        off = placement["offloaded"]
        if not got["gpu_offload"] or not placement["devices"] or not off or off[0] != off[1]:
            problems.append(
                f"layers not on a CUDA device (gpu offload {got['gpu_offload']}, devices {placement['devices']}, offloaded {off})"
            )
    result["ok"] = not problems
    out = Path(args.json).resolve() if args.json else log.with_suffix(".json")
    write_json(out, result)
    print(
        f"wheel-check: {whl.name}: installed in {install_s:.1f} s; generated {len(got['tokens'])} tokens in {got['seconds']:.3f} s"
        f" ({result['tokens_per_second']} t/s); devices {', '.join(placement['devices']) or 'CPU'}; offloaded {placement['offloaded']}"
    )
    print(f"result: {out}")
    if problems:
        raise BuildError(f"wheel-check {whl.name}: {'; '.join(problems)} (log: {log})")
    return result


def cmd_wheel_check(args: argparse.Namespace) -> int:
    check_wheel(args)
    return 0


def add_parsers(sub, common, build_opts) -> None:
    p = sub.add_parser(
        "wheel-check", help="install a patchkit wheel into a fresh virtual environment and generate tokens with it"
    )
    p.add_argument("wheel", help="the .whl made by `patchkit wheel`")
    p.add_argument("--work", default=None, help="work folder for logs (default: $PATCHKIT_WORK or ./.patchkit)")
    p.add_argument(
        "--model",
        default=None,
        help="a GGUF model (default: a synthetic one with the seed's attention shape; needs gguf)",
    )
    p.add_argument("--tokens", type=int, default=16, help="tokens to generate (default 16)")
    p.add_argument(
        "--gpu-layers", type=int, default=None, help="n_gpu_layers (default: all for a CUDA wheel, 0 for a CPU wheel)"
    )
    p.add_argument("--find-links", default=None, metavar="DIR", help="install dependencies from DIR only (no index)")
    p.add_argument("--timeout", type=float, default=600, help="seconds for the generation (default 600)")
    p.add_argument("--json", default=None, help="write the result here (default: next to the log)")
    p.set_defaults(func=cmd_wheel_check)
