"""patchkit: carry, build, test and benchmark llama.cpp ggml-CUDA patch series.

The CLI (`patchkit.cli`) is a thin layer; the stages are modules named after the pipeline:
recipe -> source -> series -> build -> run -> results -> report.
"""

__version__ = "0.1.0"
