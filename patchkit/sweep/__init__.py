"""`patchkit sweep`: a parameter sweep of one row of a config table in the llama.cpp source (e.g. the
FA MMA config of ggml_cuda_fattn_mma_get_config_ampere), cheapest test first per point.

  spec.py    the [sweep] table: SweepSpec, parse_sweep, load_spec, override; safe constraint expressions
  table.py   the header's config table: columns from the macro, rows of a function, one row rewritten
  points.py  the points (grid, explicit points, the reference) with deterministic patches and keys
  check.py   the compile check of each point, for every arch, in the sweep's own trees and build folders (lanes)
  search.py  timing over a measure callable: the full grid or successive halving
  gpu.py     the measure callable on the GPU: each point linked from its own objects, correctness,
             interleaved timing with an A/A copy, the winner confirmed by a full build
  store.py   the sweep folder <work>/sweeps/<recipe>/<name>/ and each point's stored result
  output.py  the table, heatmap, best patch and report section, from the stored results only
  run.py     run_sweep(ctx, spec, opts, measure): the whole sweep

See docs/sweep.md.
"""
