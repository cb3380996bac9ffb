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

`--dkq D` splits each unit in two instead (patches/local/0009 with D = 256): `...-dkq_D.cu` holds its
lines of head size D, `...-dkq_notD.cu` all its other lines (a unit without a line of D becomes its
`-dkq_notD.cu` alone, one with only such lines its `-dkq_D.cu`), so that a row of head size D is read in
the `dkq_D` units and a row of any other head size in the `dkq_notD` ones (the default recipe's
[[affects]] rule). Its default output is patches/local/0009-..., its message says so.
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
OUT2 = "patches/local/0009-cuda-fattn-mma-instances-hs{dkq}-and-rest.patch"  # --dkq D
IDENT = {
    "GIT_AUTHOR_NAME": "patchkit seed port",
    "GIT_AUTHOR_EMAIL": "seed-port@patchkit.invalid",
    "GIT_AUTHOR_DATE": "Sat, 5 Dec 2026 00:00:00 +0000",
    "GIT_COMMITTER_NAME": "patchkit seed port",
    "GIT_COMMITTER_EMAIL": "seed-port@patchkit.invalid",
    "GIT_COMMITTER_DATE": "Sat, 5 Dec 2026 00:00:00 +0000",
}
SUBJECT = "cuda: one FA MMA instance unit per (ncols1, ncols2, head size)"
WHY = """\
Local, build-only patch for patchkit measurements; not part of the PR.

Each template-instances/fattn-mma-f16-instance-ncols1_A-ncols2_B.cu
instantiated the MMA kernel for every head size, so an edit of one
head size's row of the MMA config table (fattn-mma-f16.cuh) recompiled
all of them: in the warm loop on the H200 a (256, 256, 8) row edit
rebuilt the four ncols1*ncols2 == 8 units, 36.7-53.2 s each, beside
fattn.cu's 34.6 s (examples/h200-2026-12-05, .ninja_log).

"""
BODY = (
    WHY
    + """\
Split every such unit into one unit per head size,
fattn-mma-f16-instance-ncols1_A-ncols2_B-dkq_D.cu, holding the same
DECL_FATTN_MMA_F16_CASE line (the 576/512 pair as dkq_576), so that the
recipe's [[affects]] rule can leave the other head sizes' units alone.
The CMake glob template-instances/fattn-mma*.cu picks the new files up.
The kernels are the same: scripts/fattn_sass_check.py compares the SASS
of every kernel of the split and unsplit units.
"""
)
SUBJECT2 = "cuda: FA MMA instance units split in two, head size {dkq} and the rest"
BODY2 = (
    WHY
    + """\
Split every such unit in two: ...-ncols1_A-ncols2_B-dkq_{dkq}.cu holds
its DECL_FATTN_MMA_F16_CASE line of head size {dkq}, and
...-ncols1_A-ncols2_B-dkq_not{dkq}.cu all its other lines, as the original
has them (a unit without a head size {dkq} line is renamed to its
-dkq_not{dkq}.cu), so that the recipe's [[affects]] rule can leave the
other part alone: two units per instance instead of one per head size
(patches/local/0005), fewer extra units for the same gain on rows of
head size {dkq}. The CMake glob template-instances/fattn-mma*.cu picks
the new files up. The kernels are the same: scripts/fattn_sass_check.py
compares the SASS of every kernel of the split and unsplit units.
"""
)


def git(cwd: Path, *args: str, env: dict | None = None) -> str:
    return vcs.git(cwd, *args, env=env, check=True).stdout.decode()


def parts(by_dkq: dict[int, list[str]], two: int | None) -> dict[str, list[str]]:
    """A unit's parts: name suffix (after `-dkq_`) -> its lines; one per head size, or with `two` = D the
    lines of D and the rest (`notD`), an empty part left out."""
    if two is None:
        return {str(k): v for k, v in by_dkq.items()}
    out = {str(two): by_dkq.get(two, []), f"not{two}": [x for k, v in by_dkq.items() if k != two for x in v]}
    return {k: v for k, v in out.items() if v}


def split(folder: Path, two: int | None = None) -> int:
    """Replace each unsplit instance unit of `folder` by its parts (per head size, or with `two` = D head
    size D and the rest); the number of units split."""
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
        for suffix, mine in parts(by_dkq, two).items():
            (folder / f"{f.stem}-dkq_{suffix}.cu").write_text("".join(head) + "".join(mine))
        f.unlink()
        n += 1
    return n


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree", type=Path)
    ap.add_argument("-o", "--output", type=Path)
    ap.add_argument("--numbers", type=Path, help="text appended to the message (the measured numbers)")
    ap.add_argument("--dkq", type=int, help="split each unit in two: this head size and the rest (0009)")
    a = ap.parse_args(argv)
    tree = a.tree.resolve()
    output = a.output or Path(OUT if a.dkq is None else OUT2.format(dkq=a.dkq))
    subject, body = (SUBJECT, BODY) if a.dkq is None else (SUBJECT2.format(dkq=a.dkq), BODY2.format(dkq=a.dkq))
    with tempfile.TemporaryDirectory(prefix="split-fattn-") as tmp:
        wt = Path(tmp) / "tree"
        git(tree, "worktree", "add", "--detach", "-q", str(wt), "HEAD")
        try:
            n = split(wt / INSTANCES, a.dkq)
            if not n:
                raise SystemExit(f"split_fattn_instances: {tree / INSTANCES}: no unsplit FA MMA instance unit")
            if a.dkq is not None and not list((wt / INSTANCES).glob(f"*-dkq_{a.dkq}.cu")):
                raise SystemExit(f"split_fattn_instances: {tree / INSTANCES}: no line of DKQ {a.dkq}")
            body += "\n" + a.numbers.read_text() if a.numbers else ""
            git(wt, "add", "-A", INSTANCES)
            git(wt, "commit", "-q", "--no-verify", "-m", subject, "-m", body.rstrip("\n"), env=IDENT)
            patch = git(wt, "format-patch", "-1", "--no-renames", "--no-signature", "--stdout", "HEAD")
        finally:
            git(tree, "worktree", "remove", "--force", str(wt))
    patch = re.sub(r"\AFrom [0-9a-f]{40} ", "From " + "0" * 40 + " ", patch)
    output.write_text(patch)
    print(f"{output}: {n} units split")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
