"""Typed step data: one class per step kind for what it stores in `Step.data` (asv's `Results`, nox's
`serialize`/`from_dict`).

The writer (patchkit/measure/<kind>.py) builds the class and stores `to_dict()`; everything that reads a
stored step (its `reparse`, the report, attribution, the tests) loads it with `<Class>.from_step(step)`,
after patchkit.results.upgrade has brought an older results.json to today's format (upgrades work on dicts,
before the load). Loading is strict: an unknown or missing key, or a value of the wrong type, is one
ResultsError naming the step and the key. A field an older format did not write has the default ABSENT
and is left out of `to_dict()` again, so that `from_dict(d).to_dict() == d` for every stored step.
docs/results-schema.md is generated from these classes (scripts/results_schema.py).

Where each class lives: a kind's data class is in its runner module (patchkit/measure/<kind>.py: test:*,
bench:path, bench:occupancy), which names it in its `STEP` (`data=`); here only where a stage below
the runners or another kind's data reads it: build:* (build.py: not a registry kind), check:* (check.py: read
by patchkit.build.unitcheck), bench:kernel (kernel.py: bench:decode's data reuses its clocks and upstream
parts), bench:decode (decode.py) and numerics (numerics.py): their runners are near 600 lines. Every kind's
data may carry `hooks` (StepData.hooks: hook name -> that hook's own data).
"""

from patchkit.results.data.base import ABSENT, Data, StepData

__all__ = ["ABSENT", "Data", "StepData"]
