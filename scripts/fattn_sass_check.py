#!/usr/bin/env python3
"""Prove that splitting the FA MMA instance units changes no kernel (patches/local/0005 and 0009).

    python3 scripts/fattn_sass_check.py --tree TREE --build BUILD --cuobjdump CUOBJDUMP --out DIR \
        [--units ncols1_8-ncols2_1,ncols1_2-ncols2_4] [--dkq all|256] [-j N]

TREE: a llama.cpp tree holding the split units (`...-ncols1_A-ncols2_B-dkq_D.cu`, per head size, 0005; or
`...-dkq_D.cu` and `...-dkq_notD.cu`, head size D and the rest, 0009) and git history;
BUILD: a CUDA build folder configured by CMake (its compile_commands.json, else `ninja -t compdb`: the
Ninja flags of the FA MMA instance units are used as they are, only the source and object changed).
The unsplit originals are read with git from the parent of the commit that added the split files
(`git log --diff-filter=A`), written to DIR/unsplit/ and compiled with an extra
`-I TREE/.../template-instances` (their `#include "../fattn-mma-f16.cuh"` finds the tree's header, the
same one the split parts include). Each unit is compiled to an object (its fatbin holds the cubin)
under /usr/bin/time; `cuobjdump -sass` of each object is cut into functions, and for each unsplit unit
its functions are compared, name and SASS text (every instruction and its encoding; runs of blanks
as one: cuobjdump pads the columns to the file's longest instruction), with those of its
split parts (`--dkq all`: every part, which must hold exactly the same functions; `--dkq 256`: the
hs256 part, whose functions must be the unsplit unit's, identical; a kernel two parts both hold must be
identical in both, and the line counts those held by more than one part). cuobjdump needs nvdisasm on
PATH or NVDISASM_PATH. DIR/summary.txt: one line per
unit and the verdict; DIR/times.tsv: the CPU seconds (user+sys) and wall seconds of each compile;
exit 1 if any kernel differs.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from patchkit import proc, vcs

INST = "ggml/src/ggml-cuda/template-instances"
PART = re.compile(r"fattn-mma-f16-instance-(ncols1_\d+-ncols2_\d+)-dkq_((?:not)?\d+)\.cu")  # D or notD
FUNC = re.compile(r"^\s*Function : (\S+)\s*$")
RAW: dict[Path, dict[str, str]] = {}  # object -> function -> its SASS before the bank-4 references are named
REUSE = False  # --reuse: an object compiled before (with its .time) is not compiled again


def sh(*args: str, cwd: Path | None = None) -> str:
    """A program's stdout (patchkit.proc, not echoed); its failure is an error."""
    return proc.run(list(args), cwd=cwd, echo=False, separate_stderr=True).stdout


def template_command(build: Path, tree: Path) -> tuple[list[str], str, str, str]:
    """The Ninja command of an FA MMA instance unit: (argv, its directory, its source, its object), the
    configured source folder's paths in it made TREE's (where the build was configured from another tree)."""
    home = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", (build / "CMakeCache.txt").read_text(), re.M)[1]
    db = build / "compile_commands.json"
    text = db.read_text() if db.is_file() else sh("ninja", "-C", str(build), "-t", "compdb")
    for e in json.loads(text):
        if "/fattn-mma-f16-instance-" in e["file"]:
            argv = [a.replace(home.rstrip("/") + "/", f"{tree}/") for a in shlex.split(e["command"])]
            for flag in ("-MT", "-MF"):  # Ninja's depfile flags (`ninja -t compdb`): nothing written in BUILD
                while flag in argv:
                    del argv[argv.index(flag) : argv.index(flag) + 2]
            argv = [a for a in argv if a != "-MD"]
            return (
                argv,
                e["directory"],
                e["file"].replace(home.rstrip("/") + "/", f"{tree}/"),
                argv[argv.index("-o") + 1],
            )
    raise SystemExit(f"fattn_sass_check: {build}: no FA MMA instance unit in its compile commands")


def compile_one(cmd: tuple, src: Path, obj: Path, extra: list[str]) -> tuple[float, float]:
    """Compile `src` to `obj` with the Ninja command; (user+sys, wall) seconds of /usr/bin/time."""
    argv, cwd, old_src, old_obj = cmd
    new = [str(src) if a == old_src else str(obj) if a == old_obj else a for a in argv]
    new[1:1] = extra
    obj.parent.mkdir(parents=True, exist_ok=True)
    tfile = obj.with_suffix(".time")
    if REUSE and obj.is_file() and tfile.is_file():
        u, s, e = map(float, tfile.read_text().split()[-3:])
        return u + s, e
    r = proc.run(["/usr/bin/time", "-f", "%U %S %e", "-o", str(tfile), *new], cwd=Path(cwd), check=False, echo=False)
    if not r.ok:
        raise SystemExit(f"fattn_sass_check: compile of {src} failed:\n{r.stdout[-2000:]}")
    u, s, e = map(float, tfile.read_text().split()[-3:])
    return u + s, e


def slots(cuobjdump: str, obj: Path) -> dict[int, str]:
    """The unit's table of global addresses (constant bank 4, filled by the linker): offset -> symbol, from
    the relocations of .nv.constant4 (`cuobjdump -elf`); `__unnamed_N` (numbered per unit) as `__unnamed`."""
    out, on = {}, False
    for line in sh(cuobjdump, "-elf", str(obj)).splitlines():
        if line.startswith(".section .rela.nv.constant4"):
            on = True
        elif on and not line.strip():
            if out:
                break
        elif on:
            off, sym = line.split()[:2]
            out[int(off, 16)] = re.sub(r"^__unnamed_\d+$", "__unnamed", sym)
    return out


def normalize(lines: list[str], table: dict[int, str]) -> list[str]:
    """A kernel's SASS with each reference to a bank-4 slot (`c[0x4][0x90]`, or `MOV Rn, 0x78` of a
    register later used as `c[0x4][Rn]`) written as the slot's symbol, and that instruction's encoding
    (which holds the offset) left out; every other instruction is kept with its encoding."""
    regs = set(re.findall(r"c\[0x4\]\[(R\d+)\]", "\n".join(lines)))
    out: list[str] = []
    drop_next = False
    for line in lines:
        if drop_next and line.startswith("/* 0x"):
            out.append("/* encoding of a bank-4 reference */")
            drop_next = False
            continue
        new = re.sub(r"c\[0x4\]\[(0x[0-9a-f]+)\]", lambda m: f"c[0x4][{table.get(int(m[1], 16), m[1])}]", line)
        m = re.match(r"(/\*[0-9a-f]+\*/ MOV (R\d+), )(0x[0-9a-f]+)( ;.*)", new)
        if m and m[2] in regs:
            new = m[1] + table.get(int(m[3], 16), m[3]) + m[4]
        if new != line:
            new, drop_next = re.sub(r" /\* 0x[0-9a-f]+ \*/$", "", new), True
        out.append(new)
    return out


def functions(cuobjdump: str, obj: Path) -> dict[str, str]:
    """`cuobjdump -sass` of the object, by function: name -> its SASS text (bank-4 references by symbol)."""
    table = slots(cuobjdump, obj)
    out: dict[str, list[str]] = {}
    cur: list[str] | None = None
    for line in sh(cuobjdump, "-sass", str(obj)).splitlines():
        m = FUNC.match(line)
        if m:
            cur = out.setdefault(m[1], [])
            continue
        if cur is not None and line.strip():
            cur.append(" ".join(line.split()))  # the padding between columns is the file's, not the kernel's
    RAW[obj] = {k: "\n".join(v) for k, v in out.items()}
    return {k: "\n".join(normalize(v, table)) for k, v in out.items()}


def originals(tree: Path, parts: list[Path], dest: Path) -> dict[str, Path]:
    """The unsplit units, from the parent of the commit that added the split files: unit -> file in dest."""
    rel = f"{INST}/{parts[0].name}"
    added = vcs.git(tree, "log", "-1", "--format=%H", "--diff-filter=A", "--", rel, check=True).text.strip()
    if not added:
        raise SystemExit(f"fattn_sass_check: {tree}: no commit adds {rel}")
    out = {}
    for unit in sorted({PART.fullmatch(p.name)[1] for p in parts}):
        name = f"fattn-mma-f16-instance-{unit}.cu"
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_bytes(vcs.git(tree, "show", f"{added}^:{INST}/{name}", check=True).stdout)
        out[unit] = dest / name
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--build", type=Path, required=True)
    ap.add_argument("--cuobjdump", default="cuobjdump")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--units", default="ncols1_8-ncols2_1,ncols1_2-ncols2_4")
    ap.add_argument("--dkq", default="all", help="all, or one part (256, not256) compared alone")
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("--reuse", action="store_true", help="keep the objects (and times) of an earlier run in DIR")
    a = ap.parse_args(argv)
    global REUSE
    REUSE = a.reuse
    tree, out = a.tree.resolve(), a.out.resolve()
    wanted = a.units.split(",")
    parts = sorted(
        p
        for p in (tree / INST).glob("fattn-mma-f16-instance-*-dkq_*.cu")
        if PART.fullmatch(p.name)[1] in wanted and a.dkq in ("all", PART.fullmatch(p.name)[2])
    )
    if {PART.fullmatch(p.name)[1] for p in parts} != set(wanted):
        raise SystemExit(f"fattn_sass_check: {tree / INST}: no split part of some of {wanted} (dkq {a.dkq})")
    unsplit = originals(tree, parts, out / "unsplit")
    cmd = template_command(a.build.resolve(), tree)
    jobs = [(src, out / "obj" / f"{u}.o", ["-I", str(tree / INST)]) for u, src in unsplit.items()]
    jobs += [(p, out / "obj" / f"{p.stem}.o", []) for p in parts]
    with ThreadPoolExecutor(a.jobs) as ex:
        times = dict(zip([j[1] for j in jobs], ex.map(lambda j: compile_one(cmd, *j), jobs)))
    lines, bad = [], 0
    for u in wanted:
        whole = functions(a.cuobjdump, out / "obj" / f"{u}.o")
        mine = [p for p in parts if PART.fullmatch(p.name)[1] == u]
        split: dict[str, str] = {}
        raw_split: dict[str, str] = {}
        shared = set()  # kernels more than one part holds
        for p in mine:
            fs = functions(a.cuobjdump, out / "obj" / f"{p.stem}.o")
            raw_split.update(RAW[out / "obj" / f"{p.stem}.o"])
            shared |= set(fs) & set(split)
            # a template both parts instantiate (flash_attn_combine_results<512>: DV 512 of dkq 512 and 576)
            bad += sum(1 for n in set(fs) & set(split) if fs[n] != split[n])
            split.update(fs)
        names = set(split) if a.dkq != "all" else set(whole) | set(split)
        missing = sorted(n for n in names if n not in whole or n not in split)
        differ = sorted(n for n in names if n in whole and n in split and whole[n] != split[n])
        bad += len(missing) + len(differ)
        same = len(names) - len(missing) - len(differ)
        raw = RAW[out / "obj" / f"{u}.o"]
        slot = sum(1 for n in names if n in whole and whole.get(n) == split.get(n) and raw[n] != raw_split[n])
        lines.append(
            f"{u}: {len(whole)} kernels unsplit, {len(split)} in {len(mine)} split parts (dkq {a.dkq}); "
            f"{same} identical SASS ({slot} of them only once bank-4 slots are read as their symbols), "
            f"{len(differ)} differ, {len(missing)} in one side only, {len(shared)} in more than one part"
        )
        lines += [f"  in more than one part: {n}" for n in sorted(shared)]
        lines += [f"  differs: {n}" for n in differ] + [f"  one side only: {n}" for n in missing]
    lines.append("verdict: " + ("every compared kernel's SASS is identical" if not bad else f"{bad} differences"))
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    rows = ["unit\tcpu_s\twall_s"] + [f"{o.stem}\t{c:.2f}\t{w:.2f}" for o, (c, w) in times.items()]
    (out / "times.tsv").write_text("\n".join(rows) + "\n")
    print("\n".join(lines))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
