"""bench:decode's llama-bench arguments: the matrix's processes (docs/decode-matrix.md), the real model's, a cell's
identity, and a process cut to some of its cells (a later round's open cells, or --changed's round 1:
patchkit.run.rowscope). patchkit.measure.decode runs them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

IDENTITY = ("model_type", "n_prompt", "n_gen", "n_depth", "n_batch", "n_ubatch", "type_k", "type_v", "n_gpu_layers")
DEPTH, UBATCH = IDENTITY.index("n_depth"), IDENTITY.index("n_ubatch")  # their positions in an identity


def identity(rec) -> tuple:
    """llama-bench's own test identity of a record: one row per identity and variant, never merged."""
    return tuple(getattr(rec, k) for k in IDENTITY)


def _csv(xs) -> str:
    return ",".join(str(x) for x in xs)


def decode_args(
    model: Path,
    *,
    depths: tuple[int, ...],
    type_k: str,
    type_v: str,
    n_prompt: tuple[int, ...],
    n_gen: tuple[int, ...],
    ubatch: tuple[int, ...],
    repetitions: int,
    threads: int,
    ngl: int,
    extra: tuple[str, ...],
) -> list[str]:
    """One llama-bench process: every test of -p x -n x -d x -ub."""
    args = ["-m", str(model), "-fa", "1", "-ctk", type_k, "-ctv", type_v, "-p", _csv(n_prompt or (0,))]
    args += ["-n", _csv(n_gen or (0,)), "-d", _csv(depths), "-r", str(repetitions), "-ngl", str(ngl)]
    if ubatch:
        args += ["-ub", _csv(ubatch)]
    if threads:
        args += ["-t", str(threads)]
    return [*args, "-o", "json", *extra]


def matrix_argvs(
    model: Path, *, depths: tuple[int, ...], pp_depths: tuple[int, ...], n_prompt, n_gen, ubatch, **kw
) -> list[list[str]]:
    """The reviewer's matrix as llama-bench processes, grouped so that each process prefills a depth once.

    llama-bench runs its tests ubatch by ubatch, depth by depth inside (tools/llama-bench), and keeps the state
    of the last depth it prefilled (its repetitions and the next test at that depth restore it): so the pp
    tests get one process per depth above 0 (depth 0 joins the first), their ubatch sizes largest first (the
    depth's prefill runs at the first test's micro-batch: 512, not 1); the tg tests one process over their
    depths (each prefilled once, at llama-bench's default micro-batch). Without pp tests, one process as
    before (every -n x -d x -ub)."""
    pp = tuple(p for p in n_prompt if p)
    if not pp:
        return [decode_args(model, depths=depths, n_prompt=n_prompt, n_gen=n_gen, ubatch=ubatch, **kw)]
    ub = tuple(sorted(set(ubatch), reverse=True))
    ds = pp_depths or depths
    deep = sorted({d for d in ds if d})
    groups = [([0] if 0 in ds else []) + deep[:1], *([d] for d in deep[1:])] if deep else [[0]]
    out = [decode_args(model, depths=tuple(g), n_prompt=pp, n_gen=(0,), ubatch=ub, **kw) for g in groups]
    if any(n_gen):
        out.append(decode_args(model, depths=depths, n_prompt=(0,), n_gen=n_gen, ubatch=(), **kw))
    return out


def real_argv(model: Path, *, n_prompt: int, n_gen: int, **kw) -> list[str]:
    """The real model's cells: tg at depth 0 (what a user of the model sees) and one pp test at llama-bench's
    default micro-batch (a prompt of n_prompt <= 512 tokens runs in one micro-batch); no depths, no -ub list."""
    return decode_args(model, depths=(0,), n_prompt=(n_prompt,), n_gen=(n_gen,), ubatch=(), **kw)


def with_values(args: list[str], flag: str, values: list[int]) -> list[str]:
    """`args` with the value of `flag` (where given) set to `values`."""
    out = list(args)
    if flag in out:
        out[out.index(flag) + 1] = _csv(values)
    return out


def cut_to(argv: list[str], cells: Iterable[tuple]) -> list[str]:
    """A process's arguments with -d and -ub cut to those of `cells` (identities: IDENTITY), micro-batches largest
    first as matrix_argvs orders them."""
    cells = list(cells)
    out = with_values(argv, "-d", sorted({k[DEPTH] for k in cells}))
    return with_values(out, "-ub", sorted({k[UBATCH] for k in cells}, reverse=True))
