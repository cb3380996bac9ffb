"""TODO(lead): transitional shim for patchkit.maintain until it uses the pipeline API; deleted then."""

from __future__ import annotations

from patchkit import pipeline
from patchkit.options import Context, resolve_run

step_fetch = pipeline.fetch
step_apply = pipeline.apply

__all__ = ["Context", "run_steps", "step_apply", "step_fetch"]


def run_steps(ctx, args, wanted, *, label):
    names = {"test": "test", "bench-kernel": "bench:kernel", "kernel-path": "bench:path"}
    opts = resolve_run(ctx.recipe, vars(args), steps=tuple(names.get(w, w) for w in wanted))
    return pipeline.run(ctx, opts, label=label)
