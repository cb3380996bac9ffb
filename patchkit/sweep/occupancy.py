"""Predicted occupancy of each sweep point on target GPUs (issue 26, item 5's sweep part).

Per point and target GPU: registers per thread and static shared memory of the row's kernel from the
point's own compile check for the target's arch (ptxas's `-v` report in `logs/check-<arch>-<point>.log`;
the check adds `--ptxas-options=-v` for every arch but the measured build's when the spec names target
GPUs), block size and dynamic shared memory from the point's row values by the kernel's own launch code
(`LAUNCHES`), then patchkit's formula (patchkit.measure.occupancy_formula, checked against
cuda_occupancy.h): blocks per SM, the limiting resource, theoretical occupancy. A point without a ptxas
report for that arch, or whose kernel is not in it, has no prediction and says why; nothing is guessed.

The prediction assumes the host picks the launch the row implies on the target (true where the target
uses the same config table: ggml's Ampere MMA table serves cc 8.0 to 12.x). It never replaces a timing:
by default it is only shown. `filter = "below-start"` drops, before timing, the points whose predicted
blocks per SM on the first target GPU is below the starting row's there; a point or start without a
prediction is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from patchkit.compare import occupancy_predict
from patchkit.errors import OptionError, ParseError
from patchkit.measure import occupancy_formula as occ
from patchkit.parsers.ptxas import parse_ptxas
from patchkit.sweep.errors import SweepError, hint

FILTERS = ("none", "below-start")
KEYS = ("targets", "kernel", "launch", "filter")
HALF2 = 4  # sizeof(half2)


@dataclass(frozen=True, kw_only=True)
class OccupancySpec:
    """The spec's `predict` table: which GPUs, which kernel, how the row sets its launch, the filter."""

    targets: tuple[str, ...]  # GPU names as patchkit/data/gpus.toml names them
    kernel: str  # the launched kernel, e.g. "flash_attn_ext_f16<256, 256, 1, 8, 0, 0, 0>"
    launch: str = "fattn-mma-f16"  # a key of LAUNCHES
    filter: str = "none"  # FILTERS


def kernel_key(name: str) -> tuple[str, tuple[str, ...]] | None:
    """patchkit.compare.occupancy_predict.kernel_key."""
    return occupancy_predict.kernel_key(name)


def _fattn_mma_f16(row: Mapping[str, int | bool], args: tuple[str, ...], cc: str) -> tuple[int, int]:
    """(threads, dynamic shared memory) of `ggml_cuda_flash_attn_ext_mma_f16_case<DKQ, DV, ncols1,
    ncols2>` (fattn-mma-f16.cuh, `nbytes_shared_total`, lines 2017-2052 at the seed's base) for the row's
    values on an NVIDIA GPU of compute capability `cc` >= 8.0 (Ampere table, ldmatrix, cp.async).
    Checked against ncu's recorded launches on the H200 (tests/fixtures/occupancy): +0001's row 65,680 B
    at 128 threads, +0001+0002's 32,848 B at 64 threads."""
    if tuple(int(x) for x in occ.arch_cc(cc).split(".")) < (8, 0):
        raise OptionError(f"cc {cc}: the launch formula covers cc 8.0 and newer (the Ampere config table)")
    dkq, dv, ncols1, ncols2 = (int(a) for a in args[:4])
    ncols = ncols1 * ncols2
    nthreads, nbatch_fa = int(row["nthreads"]), int(row["nbatch_fa"])
    k2, v2, combine = int(row["nbatch_K2"]), int(row["nbatch_V2"]), int(row["nbatch_combine"])
    swizzled = all(n >= 32 and n % 32 == 0 for n in (k2, v2))  # ggml_cuda_fattn_mma_get_swizzled
    stride_k = k2 if swizzled else k2 + 4
    stride_v = stride_k if dkq == 576 else (v2 if swizzled else v2 + 4)
    nstages = int(row["nstages_target"]) if ncols2 >= 2 else 0  # ggml_cuda_fattn_mma_get_nstages (host)
    cols_per_warp = min(ncols, 16)  # get_cols_per_warp: 16 with Turing MMA
    kv = nbatch_fa * (max(stride_k, stride_v) if nstages <= 1 else stride_k + stride_v) * HALF2
    q = ncols * (dkq // 2 + 4) * HALF2
    mask = ncols1 * (nbatch_fa // 2 + 4) * HALF2
    comb = (nthreads // 32) * cols_per_warp * (combine + 4) * HALF2
    total = max(comb, max(q, kv + mask) if row["Q_in_reg"] else q + kv + mask)
    del dv
    return nthreads, total


LAUNCHES: dict[str, Callable[[Mapping[str, int | bool], tuple[str, ...], str], tuple[int, int]]] = {
    "fattn-mma-f16": _fattn_mma_f16,
}
LAUNCH_NOTES = {
    "fattn-mma-f16": "threads = nthreads, dynamic shared memory by the kernel's own nbytes_shared_total "
    "(fattn-mma-f16.cuh, checked against the 2 launches ncu recorded on the H200)",
}


def parse(v: object, where: str) -> OccupancySpec:
    """The spec's `predict` table; SweepError, one line naming the key (an unknown GPU by its name)."""
    if not isinstance(v, Mapping):
        raise SweepError(f"{where}: expected a table {{targets, kernel, launch, filter}}, got {type(v).__name__}")
    for k in v:
        if k not in KEYS:
            raise SweepError(f"{where}.{k}: unknown key{hint(k, KEYS)}")
    raw = v.get("targets", [])
    if not isinstance(raw, list) or not raw or not all(isinstance(t, str) for t in raw):
        raise SweepError(f"{where}.targets: expected a list of GPU names, e.g. ['RTX 4070', 'A100'], got {raw!r}")
    kernel = v.get("kernel")
    if not isinstance(kernel, str) or kernel_key(kernel) is None:
        raise SweepError(
            f"{where}.kernel: expected the launched kernel with its template arguments, "
            f"e.g. 'flash_attn_ext_f16<256, 256, 1, 8, 0, 0, 0>', got {kernel!r}"
        )
    launch = v.get("launch", "fattn-mma-f16")
    if launch not in LAUNCHES:
        raise SweepError(f"{where}.launch: unknown launch formula {launch!r} (known: {', '.join(LAUNCHES)})")
    filt = v.get("filter", "none")
    if filt not in FILTERS:
        raise SweepError(f"{where}.filter: expected one of {', '.join(FILTERS)}, got {filt!r}")
    return OccupancySpec(targets=targets(raw, f"{where}.targets"), kernel=kernel, launch=launch, filter=filt)


def targets(names: list[str] | tuple[str, ...], where: str) -> tuple[str, ...]:
    """GPU names resolved to gpus.toml's (one line naming an unknown or ambiguous one)."""
    out = []
    for t in names:
        try:
            out.append(occ.gpu(t).name)
        except OptionError as e:
            raise SweepError(f"{where}: {e}") from None
    return tuple(dict.fromkeys(out))


def target_arch(target: str, archs: list[str] | tuple[str, ...]) -> str | None:
    """The compile-check arch whose compute capability is the target GPU's (None: not checked)."""
    cc = occ.gpu(target).cc
    return next((a for a in archs if occ.arch_cc(a) == cc), None)


def check_targets(o: OccupancySpec, archs: tuple[str, ...], where: str) -> None:
    """Every target GPU needs its arch among the compile-check archs (SweepError, one line)."""
    for t in o.targets:
        if target_arch(t, archs) is None:
            cc = occ.gpu(t).cc
            raise SweepError(
                f"{where}: target GPU {t} (cc {cc}) is not compile-checked: add {cc.replace('.', '')} to archs "
                f"(or --arch), compile-checked now: {', '.join(archs)}"
            )


def _kernel_record(log: Path, arch: str, kernel: str) -> tuple[dict | None, str]:
    """Registers and static shared memory of `kernel` in one compile log's ptxas report, or (None, why)."""
    if not log.is_file():
        return None, f"no compile log {log.name}"
    try:
        recs = parse_ptxas(log.read_text(encoding="utf-8", errors="replace"), str(log))
    except ParseError as e:
        return None, f"ptxas report unreadable: {e}"
    if not recs:
        return None, "no ptxas report in its compile log (checked without --ptxas-options=-v)"
    want = kernel_key(kernel)
    cc = occ.arch_cc(arch)
    hits = {(r.registers, r.smem) for r in recs if occ.arch_cc(r.arch) == cc and kernel_key(r.name) == want}
    if not hits:
        return None, f"{kernel} not in the sm_{arch} ptxas report"
    if len(hits) > 1:
        return None, f"{kernel} compiled with different resources in one check"
    regs, smem = hits.pop()
    return {"registers": regs, "smem_static": smem}, ""


def predict_point(root: Path, plan: dict, point: dict, rec: dict) -> dict[str, dict]:
    """{target GPU: prediction} of one stored point (plan: sweep.json; point: its entry; rec: its record).
    A prediction: arch, registers, smem_static, threads, smem_dynamic, blocks_per_sm, limiter,
    theoretical_pct; or {arch, why} when there is none."""
    o = plan["spec"].get("predict") or {}
    out: dict[str, dict] = {}
    args = kernel_key(o.get("kernel", "")) or ("", ())
    for t in o.get("targets", []):
        arch = target_arch(t, plan["archs"])
        c = (rec.get("check") or {}).get(arch or "", {})
        if arch is None or not c:
            out[t] = {"arch": arch, "why": "not compile-checked for its arch"}
            continue
        if not c.get("ok"):
            out[t] = {"arch": arch, "why": "invalid"}
            continue
        if not c.get("log"):
            out[t] = {"arch": arch, "why": f"sm_{arch} compiled by {c.get('by') or 'another build'}: no ptxas report"}
            continue
        got, why = _kernel_record(root / c["log"], arch, o["kernel"])
        if got is None:
            out[t] = {"arch": arch, "why": why}
            continue
        g = occ.gpu(t)
        try:
            threads, dyn = LAUNCHES[o.get("launch", "fattn-mma-f16")](point["row"], args[1], g.cc)
            r = occ.occupancy(occ.Launch(got["registers"], threads, got["smem_static"], dyn), occ.limits(g.cc))
        except (OptionError, KeyError, ValueError) as e:
            out[t] = {"arch": arch, "why": f"no launch: {e}"}
            continue
        out[t] = {
            "arch": arch,
            **got,
            "threads": threads,
            "smem_dynamic": dyn,
            "blocks_per_sm": r.blocks_per_sm,
            "limiter": r.limiter,
            "theoretical_pct": round(100 * r.theoretical, 2),
        }
    return out


def predictions(root: Path, plan: dict, records: dict[str, dict]) -> dict[str, dict[str, dict]]:
    """{point name: {target: prediction}} of every point of the stored plan ({} without targets)."""
    if not (plan["spec"].get("predict") or {}).get("targets"):
        return {}
    return {p["name"]: predict_point(root, plan, p, records.get(p["name"], {})) for p in plan["points"]}


def filtered(plan: dict, preds: dict[str, dict[str, dict]]) -> dict[str, str]:
    """{point name: why} of the points the spec's filter drops before timing (never the starting row;
    a point without a prediction on the first target, or a start without one, is kept)."""
    o = plan["spec"].get("predict") or {}
    if o.get("filter", "none") != "below-start" or not o.get("targets"):
        return {}
    t = o["targets"][0]
    ref = plan["points"][0]["name"]
    start = preds.get(ref, {}).get(t, {}).get("blocks_per_sm")
    if start is None:
        return {}
    out = {}
    for p in plan["points"][1:]:
        n = preds.get(p["name"], {}).get(t, {}).get("blocks_per_sm")
        if n is not None and n < start:
            out[p["name"]] = f"predicted {n} blocks/SM on {t} < the starting row's {start}"
    return out


def cell(pred: dict | None) -> str:
    """A table cell: '2 (registers), 16.7 %' or '- (why)'."""
    if not pred:
        return "-"
    if "blocks_per_sm" not in pred:
        return f"- ({pred.get('why', '')})".replace("|", "\\|")
    return f"{pred['blocks_per_sm']} ({pred['limiter']}), {pred['theoretical_pct']:.1f} %"


def note(plan: dict) -> str:
    """The paragraph under the table: what the predicted columns assume."""
    o = plan["spec"].get("predict") or {}
    if not o.get("targets"):
        return ""
    filt = o.get("filter", "none")
    how = (
        f"points predicted below the starting row's blocks per SM on {o['targets'][0]} were not timed"
        if filt == "below-start"
        else "shown only: no point was left out for it"
    )
    return (
        f"\nPredicted columns (blocks per SM (limiter), theoretical occupancy) for `{o['kernel']}`: registers and "
        f"static shared memory from the point's own ptxas report for the target's arch; "
        f"{LAUNCH_NOTES.get(o.get('launch', ''), o.get('launch', ''))}; assumes the host picks that launch on "
        f"the target (same config table). Predicted, not measured; {how}.\n"
    )
