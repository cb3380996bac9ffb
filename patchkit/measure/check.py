"""Step `check:<config>`: compile only the translation units the series touches, for another arch."""

from __future__ import annotations

import dataclasses

from patchkit import backends
from patchkit import build as build_mod
from patchkit.build import unitcheck
from patchkit.measure import resources
from patchkit.measure.tool import Built
from patchkit.options import RunOptions
from patchkit.results import Status, Step


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
    items = unitcheck.check(built.ctx.recipe, built.base, built.ctx.ws, states, one, logs=b.raw)
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
    return Step(
        name=name,
        status=status,
        reason=reason,
        logs=sorted({b.rel(p) for p in logs}),
        data={"items": [i.to_dict() for i in items], **resources.from_logs(logs, rel=b.rel)},
    )


def inputs(built: Built, opts: RunOptions, name: str) -> dict:
    return {"cmake_options": opts.build.cmake_options}
