"""The measurement steps' runners: one module per step kind, each returning a results.Step.

Each runner takes the built variants (name -> bin dir), runs the real tools through `proc.run`
(logs under the run's raw/), parses the output with `patchkit.parsers`, and returns a `Step`.
A variant that crashes or times out is recorded as such and the others still run.
"""
