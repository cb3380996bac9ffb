#!/usr/bin/env python3
"""Write the build-only local patch that splits llama.cpp's FA MMA instance units per head size.

    python3 scripts/split_fattn_instances.py TREE [-o patches/local/0005-cuda-fattn-mma-instances-per-head-size.patch]

TREE is a clean git checkout of the base (llama.cpp's root). Every
`ggml/src/ggml-cuda/template-instances/fattn-mma-f16-instance-ncols1_A-ncols2_B.cu` of it is replaced by
one file per head size, `...-ncols1_A-ncols2_B-dkq_D.cu`, holding that head size's DECL_FATTN_MMA_F16_CASE
line exactly as the original has it (D is the line's DKQ: the 576/512 pair is dkq_576). The edit is made
in a temporary detached worktree of TREE's HEAD (TREE itself is not touched), committed with the message
below and written with `git format-patch --no-renames` (git through patchkit.vcs), so the patch is made
from whatever base the tree holds. ggml-cuda's CMakeLists.txt globs `template-instances/fattn-mma*.cu`:
no CMake change is needed.
`--numbers FILE` appends FILE's text (the measured numbers) to the message.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

from patchkit import vcs

INSTANCES = "ggml/src/ggml-cuda/template-instances"
UNIT = re.compile(r"fattn-mma-f16-instance-ncols1_(\d+)-ncols2_(\d+)\.cu")
DECL = re.compile(r"^DECL_FATTN_MMA_F16_CASE\((\d+), *(\d+), *(\d+), *(\d+)\);$")
OUT = "patches/local/0005-cuda-fattn-mma-instances-per-head-size.patch"
IDENT = {
    "GIT_AUTHOR_NAME": "patchkit seed port",
    "GIT_AUTHOR_EMAIL": "seed-port@patchkit.invalid",
    "GIT_AUTHOR_DATE": "Sat, 5 Dec 2026 00:00:00 +0000",
    "GIT_COMMITTER_NAME": "patchkit seed port",
    "GIT_COMMITTER_EMAIL": "seed-port@patchkit.invalid",
    "GIT_COMMITTER_DATE": "Sat, 5 Dec 2026 00:00:00 +0000",
}
SUBJECT = "cuda: one FA MMA instance unit per (ncols1, ncols2, head size)"
BODY = """\
Local, build-only patch for patchkit measurements; not part of the PR.

Each template-instances/fattn-mma-f16-instance-ncols1_A-ncols2_B.cu
instantiated the MMA kernel for every head size, so an edit of one
head size's row of the MMA config table (fattn-mma-f16.cuh) recompiled
all of them: in the warm loop on the H200 a (256, 256, 8) row edit
rebuilt the four ncols1*ncols2 == 8 units, 36.7-53.2 s each, beside
fattn.cu's 34.6 s (examples/h200-2026-12-05, .ninja_log).

Split every such unit into one unit per head size,
fattn-mma-f16-instance-ncols1_A-ncols2_B-dkq_D.cu, holding the same
DECL_FATTN_MMA_F16_CASE line (the 576/512 pair as dkq_576), so that the
recipe's [[affects]] rule can leave the other head sizes' units alone.
The CMake glob template-instances/fattn-mma*.cu picks the new files up.
The kernels are the same: scripts/fattn_sass_check.py compares the SASS
of every kernel of the split and unsplit units.
"""


def git(cwd: Path, *args: str, env: dict | None = None) -> str:
    return vcs.git(cwd, *args, env=env, check=True).stdout.decode()


def split(folder: Path) -> int:
    """Replace each unsplit instance unit of `folder` by its per-head-size parts; the number of units split."""
    n = 0
    for f in sorted(folder.iterdir()):
        m = UNIT.fullmatch(f.name)
        if not m:
            continue
        lines = f.read_text().splitlines(keepends=True)
        decls = [(i, DECL.match(line.rstrip("\n"))) for i, line in enumerate(lines)]
        decls = [(i, d) for i, d in decls if d]
        if not decls:
            raise SystemExit(f"split_fattn_instances: {f}: no DECL_FATTN_MMA_F16_CASE line")
        first = decls[0][0]
        head = [line for line in lines[:first] if not DECL.match(line.rstrip("\n"))]
        rest = [line for i, line in enumerate(lines) if i >= first and not DECL.match(line.rstrip("\n"))]
        if any(line.strip() for line in rest):
            raise SystemExit(f"split_fattn_instances: {f}: lines other than DECL_FATTN_MMA_F16_CASE after the first")
        by_dkq: dict[int, list[str]] = {}
        for i, d in decls:
            if (d[3], d[4]) != m.groups():
                raise SystemExit(f"split_fattn_instances: {f}: {lines[i].strip()} does not match the file's name")
            by_dkq.setdefault(int(d[1]), []).append(lines[i])
        for dkq, mine in by_dkq.items():
            (folder / f"{f.stem}-dkq_{dkq}.cu").write_text("".join(head) + "".join(mine))
        f.unlink()
        n += 1
    return n


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree", type=Path)
    ap.add_argument("-o", "--output", type=Path, default=Path(OUT))
    ap.add_argument("--numbers", type=Path, help="text appended to the message (the measured numbers)")
    a = ap.parse_args(argv)
    tree = a.tree.resolve()
    with tempfile.TemporaryDirectory(prefix="split-fattn-") as tmp:
        wt = Path(tmp) / "tree"
        git(tree, "worktree", "add", "--detach", "-q", str(wt), "HEAD")
        try:
            n = split(wt / INSTANCES)
            if not n:
                raise SystemExit(f"split_fattn_instances: {tree / INSTANCES}: no unsplit FA MMA instance unit")
            body = BODY + ("\n" + a.numbers.read_text() if a.numbers else "")
            git(wt, "add", "-A", INSTANCES)
            git(wt, "commit", "-q", "--no-verify", "-m", SUBJECT, "-m", body.rstrip("\n"), env=IDENT)
            patch = git(wt, "format-patch", "-1", "--no-renames", "--no-signature", "--stdout", "HEAD")
        finally:
            git(tree, "worktree", "remove", "--force", str(wt))
    patch = re.sub(r"\AFrom [0-9a-f]{40} ", "From " + "0" * 40 + " ", patch)
    a.output.write_text(patch)
    print(f"{a.output}: {n} units split")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
