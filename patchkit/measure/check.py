"""Step `check:<config>`: compile only the translation units the series touches, for another arch."""

from __future__ import annotations

import dataclasses
import re

from patchkit import backends
from patchkit import build as build_mod
from patchkit.build import unitcheck
from patchkit.measure import resources
from patchkit.measure.kind import Resource, StepKind
from patchkit.measure.tool import Built
from patchkit.options import RunOptions
from patchkit.results import Status, Step
from patchkit.results.data.check import CheckData, CheckKernel

_KV = re.compile(r"type_K=([A-Za-z0-9_]+),type_V=([A-Za-z0-9_]+)")
_K = re.compile(r"type_K=([A-Za-z0-9_]+)")


def base_units(params: str, path_params: str) -> tuple[str, ...]:
    """The units base compiles in the check, so that the kernels base launches in the kernel-path cases
    get registers and shared memory per arch (predictions from base on): the CUDA template instances of
    those cases' K/V cache types, `{root}/ggml-cuda/template-instances/*-<K>-<V>.cu` (for FLASH_ATTN_EXT's
    q4_0 cases `fattn-vec-instance-q4_0-q4_0.cu`, the vector kernel base runs). The pairs are the
    `type_K=<K>,type_V=<V>` literals of bench.kernel's `params`, those whose K `path-params` names where it
    names one. Nothing for regexes without such literals (other ops): base is then not compiled."""
    pairs = list(dict.fromkeys(_KV.findall(params or "") + _KV.findall(path_params or "")))
    want = set(_K.findall(path_params or ""))
    return tuple(f"{{root}}/ggml-cuda/template-instances/*-{k}-{v}.cu" for k, v in pairs if not want or k in want)


def instance(arch: str) -> str:
    """The step name of a compile check for one CUDA arch."""
    return f"check:cuda-{arch}"


def step(built: Built, opts: RunOptions, name: str) -> Step:
    arch = name.removeprefix("check:cuda-")
    one = dataclasses.replace(opts.build, backend=backends.CUDA.name, archs=(arch,))
    b = built.bundle
    states = [s for s in built.states if built.scope is None or built.scope.tests(s.name)]
    if not states:
        return Step(name=name, status=Status.NOT_RUN, reason="--changed: no variant changed")
    tc_args = build_mod.toolchain(one).cmake_args  # ptxas's resource report: registers/smem per kernel
    one = dataclasses.replace(one, cmake_options=resources.ptxas_cmake_options(tc_args, one.cmake_options))
    at_base = base_units(opts.kernel.params, opts.kernel.path_params)
    items = unitcheck.check(built.ctx.recipe, built.base, built.ctx.ws, states, one, logs=b.raw, base_units=at_base)
    bad = [i for i in items if not i.ok]
    tried = unitcheck.compiled(items)
    left = len(items) - len(tried)
    if unitcheck.interrupted(items):
        status, reason = Status.ERROR, f"Ninja stopped before it finished: {next(i.error for i in bad)}"
    elif bad:
        status, reason = Status.FAIL, f"{len(bad)} of {len(tried)} translation units failed"
    elif not tried:  # a check that compiled nothing proves nothing
        status, reason = Status.NOT_RUN, f"compiled nothing: no unit of this configuration is touched ({left} left out)"
    else:
        status, reason = Status.OK, ""
    logs = sorted(b.raw.glob(f"check-*{arch}*.log"))
    res = resources.from_logs(logs, rel=b.rel)
    return Step(
        name=name,
        status=status,
        reason=reason,
        logs=sorted({b.rel(p) for p in logs}),
        data=CheckData(
            items=items, kernels=[CheckKernel(**r) for r in res["kernels"]], resource_errors=res["resource_errors"]
        ).to_dict(),
    )


def inputs(built: Built, opts: RunOptions, name: str) -> dict:
    return {"cmake_options": opts.build.cmake_options}


# the kind, as the registry (patchkit.registry) lists it
STEP = StepKind(
    name="check",
    help="compile the touched translation units for each --check-arch (CUDA, no GPU needed)",
    resource=Resource.CPU,
    names=lambda recipe, opts: tuple(instance(a) for a in opts.check_archs),
    run=step,
    inputs=inputs,
    data=CheckData,
)
