"""Wheels: one variant as an installable llama-cpp-python wheel, and the check that it works.

- `patchkit.wheel.info`: the wheel's name (PEP 440 local label), its key and its patchkit.json;
- `patchkit.wheel.build`: `build_wheel(ctx, WheelOptions)`, the sdist's own build with the variant's tree;
- `patchkit.wheel.check`: `check_wheel(ws, CheckOptions)`, install into a fresh environment and generate.

git runs through `patchkit.vcs`, every other program through `patchkit.proc.run`; the command line
(argparse) is in `patchkit.cli.wheel`.
"""
