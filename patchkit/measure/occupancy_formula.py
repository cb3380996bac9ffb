"""Theoretical occupancy per launch: blocks per SM, the limiting resource, cliffs, and predictions for
GPUs you do not have.

The formula is cuda_occupancy.h's (CUDA 13.0, cudaOccMaxActiveBlocksPerMultiprocessor) for a kernel that
opts in to the large shared memory carveout (as ggml's kernels do with
cudaFuncAttributeMaxDynamicSharedMemorySize), with no partitioned global caching, no cluster and no block
barrier limit: tests/unit/test_occupancy_header.py compiles the header and compares on a grid of points.

    registers: registers per thread x 32, rounded up to 256 per warp; each of the 4 sub-partitions holds
               (regs_per_sm / 4) // that warps; blocks = 4 x that // warps per block
               (0 when the block needs more than 64 K registers counted with warps rounded up to 4)
    shared memory: (static + dynamic + 1 KB reserved from cc 8.0), rounded up to 128 B (256 B on 7.5);
               blocks = carveout // that (0 above the opt-in maximum per block + reserve)
    warps:     max warps per SM // warps per block (0 above 1024 threads)
    blocks:    max resident blocks per SM

Carveout: with `carveout=None`, blocks per SM are the header's default-preference answer (the largest
carveout), and `Occupancy.carveout` is the smallest carveout that still holds that many blocks (what the
driver picks for the 2 fattn-mma launches recorded on the H200: 135,168 and 167,936 bytes). The driver
was seen to pick larger carveouts than needed for small blocks (32 KB for `dequantize_block`, where 8 KB
holds its 8 blocks): that changes ncu's shared-memory limit, never blocks per SM. `limits` are the
header's (largest carveout) unless a carveout is given; then they are at that carveout.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from patchkit.errors import OptionError

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - python 3.10
    import tomli as tomllib

UNBOUNDED = 2**31 - 1  # the header's INT_MAX: a resource the launch does not use
RESOURCES = ("registers", "shared memory", "warps", "blocks")
# what a report shows beside every predicted row (predict's assumption, in one line)
PREDICTION_NOTE = (
    "predicted: registers and static shared memory from the compile check for the target's arch, block size, "
    "grid and dynamic shared memory from the launch measured here; assumes the host picks the same launch "
    "configuration for the target (true where both archs use the same config table)"
)


@dataclass(frozen=True)
class Limits:
    """Per compute capability limits; `sources` names the source of each field."""

    cc: str
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    regs_per_sm: int
    reg_alloc_unit: int
    max_regs_per_thread: int
    reg_alloc_granularity: str
    smem_per_sm_max: int
    smem_carveouts: tuple[int, ...]
    smem_alloc_unit: int
    smem_reserved_per_block: int
    max_smem_per_block_optin: int
    source: str
    max_regs_per_block: int = 65536
    sub_partitions: int = 4
    smem_per_block_default: int = 49152
    warp_size: int = 32
    sources: tuple[tuple[str, str], ...] = ()

    def source_of(self, field: str) -> str:
        return dict(self.sources).get(field, self.source)


@dataclass(frozen=True)
class Gpu:
    name: str
    cc: str
    sms: int
    dram_gbps: float
    source: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Launch:
    registers: int
    threads: int
    smem_static: int
    smem_dynamic: int
    grid: int | None = None


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    limiter: str
    limits: dict[str, int]
    theoretical: float
    carveout: int
    waves: float | None
    carveout_chosen: str = ""  # how `carveout` was chosen, in words

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@lru_cache(maxsize=1)
def _data() -> dict:
    text = resources.files("patchkit").joinpath("data/gpus.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def _field_sources(table: dict) -> tuple[tuple[str, str], ...]:
    named = _data()["sources"]
    per = dict(_data()["field_sources"])
    per.update(table.get("sources", {}))
    keys = re.compile(r"\b(" + "|".join(sorted(map(re.escape, named), key=len, reverse=True)) + r")\b")
    return tuple((field, keys.sub(lambda m: named[m[1]], src)) for field, src in sorted(per.items()))


def known_ccs() -> list[str]:
    return sorted(_data()["cc"], key=lambda c: tuple(int(x) for x in c.split(".")))


def limits(cc: str) -> Limits:
    """The limits of compute capability `cc` ("8.9", also "89" or "sm_89"); OptionError if unknown."""
    key = _norm_cc(cc)
    table = _data()["cc"].get(key)
    if table is None:
        raise OptionError(f"unknown compute capability {cc!r}: known are {', '.join(known_ccs())}")
    fields = {f.name for f in dataclasses.fields(Limits)}
    vals = {k: v for k, v in table.items() if k in fields}
    vals["smem_carveouts"] = tuple(vals["smem_carveouts"])
    src = "; ".join(_data()["sources"].values())
    return Limits(cc=key, source=src, sources=_field_sources(table), **vals)


def _norm_cc(cc: str) -> str:
    s = str(cc).strip().lower().removeprefix("sm_").removeprefix("compute_").removeprefix("sm")
    s = s.rstrip("af")  # sm_90a, sm_100f: same limits
    if re.fullmatch(r"\d+\.\d+", s):
        return s
    if re.fullmatch(r"\d{2,3}", s):
        return f"{s[:-1]}.{s[-1]}"
    return s


def arch_cc(arch: str) -> str:
    """The compute capability of a CUDA arch as patchkit names it ("89", "90a", "sm_86") -> "8.9"."""
    return _norm_cc(arch)


def _key(name: str) -> str:
    s = re.sub(r"[^a-z0-9]", "", name.lower())
    for word in ("nvidia", "geforce", "tesla"):
        s = s.replace(word, "")
    return s


def gpus() -> dict[str, Gpu]:
    out = {}
    for name, t in _data()["gpu"].items():
        out[name] = Gpu(name, t["cc"], t["sms"], float(t["dram_gbps"]), t["source"], tuple(t.get("aliases", ())))
    return out


def gpu(name: str) -> Gpu:
    """Look a GPU up by name, tolerant of case, spaces, vendor words and the RTX prefix ("rtx4070",
    "4070", "GeForce RTX 4070"); a unique partial match is accepted. Unknown or ambiguous: OptionError."""
    table = gpus()
    want = _key(name)
    names = {}
    for g in table.values():
        for n in (g.name, *g.aliases):
            names[_key(n)] = g
            names[_key(n).removeprefix("rtx")] = g
    if want in names:
        return names[want]
    hits = {g.name for k, g in names.items() if want and want in k}
    if len(hits) == 1:
        return table[hits.pop()]
    what = f"ambiguous GPU {name!r} (matches {', '.join(sorted(hits))})" if hits else f"unknown GPU {name!r}"
    raise OptionError(f"{what}: known are {', '.join(table)}")


def _align_carveout(size: int, lim: Limits) -> int | None:
    """The smallest carveout >= size (cudaOccAlignUpShmemSizeVoltaPlus); None above the largest."""
    return next((c for c in sorted(lim.smem_carveouts) if c >= size), None)


def carveout_for_percent(percent: int, lim: Limits) -> int:
    """The carveout (bytes) a preference of `percent` % of the maximum maps to
    (cudaFuncAttributePreferredSharedMemoryCarveout; cudaOccSMemPreferenceVoltaPlus)."""
    if not 0 <= percent <= 100:
        raise OptionError(f"shared memory carveout preference {percent} %: expected 0..100")
    size = _align_carveout(percent * lim.smem_per_sm_max // 100, lim)
    return lim.smem_per_sm_max if size is None else size


def smem_per_block(launch: Launch, lim: Limits) -> int:
    """Shared memory allocated per block: static + dynamic + the driver's reserve, rounded up."""
    total = launch.smem_static + launch.smem_dynamic + lim.smem_reserved_per_block
    unit = lim.smem_alloc_unit
    return -(-total // unit) * unit


def _smem_limit(launch: Launch, lim: Limits, carveout: int) -> int:
    per = smem_per_block(launch, lim)
    if per > lim.max_smem_per_block_optin + lim.smem_reserved_per_block:
        return 0
    if per == 0:
        return UNBOUNDED
    return _effective_carveout(per, lim, carveout) // per


def _effective_carveout(per: int, lim: Limits, carveout: int) -> int:
    """The carveout a block of `per` bytes runs with under a preference of `carveout` bytes: the
    preference is ignored when one block does not fit in it (the header, Volta and newer)."""
    if carveout >= per:
        return carveout
    return _align_carveout(per, lim) or 0


def _warps_per_block(launch: Launch, lim: Limits) -> int:
    return -(-launch.threads // lim.warp_size)


def _reg_limit(launch: Launch, lim: Limits) -> int:
    warps = _warps_per_block(launch, lim)
    unit = lim.reg_alloc_unit
    per_warp = -(-launch.registers * lim.warp_size // unit) * unit
    assumed = per_warp * (-(-warps // lim.sub_partitions) * lim.sub_partitions)
    if assumed > lim.max_regs_per_block or per_warp * warps > lim.max_regs_per_block:
        return 0
    if launch.registers > lim.max_regs_per_thread:
        return 0
    if per_warp == 0:
        return UNBOUNDED
    per_sub = (lim.regs_per_sm // lim.sub_partitions) // per_warp
    return per_sub * lim.sub_partitions // warps


def _other_limits(launch: Launch, lim: Limits) -> dict[str, int]:
    warps = _warps_per_block(launch, lim)
    return {
        "registers": _reg_limit(launch, lim),
        "warps": 0 if launch.threads > lim.max_threads_per_block else lim.max_warps_per_sm // warps,
        "blocks": lim.max_blocks_per_sm,
    }


def _check(launch: Launch) -> None:
    if launch.threads <= 0 or launch.registers < 0 or launch.smem_static < 0 or launch.smem_dynamic < 0:
        raise OptionError(f"invalid launch {launch}: threads must be > 0, registers and shared memory >= 0")


def occupancy(launch: Launch, lim: Limits, *, carveout: int | None = None, sms: int | None = None) -> Occupancy:
    """Blocks per SM of `launch` on compute capability `lim`, and which resource limits it.

    `carveout` (bytes): the shared memory carveout the driver chose (ncu's launch__shared_mem_config_size),
    or None for the default preference (see the module docstring). `sms`: the GPU's SM count, for waves."""
    _check(launch)
    other = _other_limits(launch, lim)
    at = lim.smem_per_sm_max if carveout is None else carveout
    lims = {"registers": other["registers"], "shared memory": _smem_limit(launch, lim, at)}
    lims.update(warps=other["warps"], blocks=other["blocks"])
    blocks = min(lims.values())
    limiter = " and ".join(r for r in RESOURCES if lims[r] == blocks)
    per = smem_per_block(launch, lim)
    if carveout is None:
        fits = [c for c in sorted(lim.smem_carveouts) if c >= per and (not per or c // per >= blocks)]
        chosen = fits[0] if fits else lim.smem_per_sm_max
        how = "smallest carveout that holds the blocks the largest one does (default preference)"
    else:
        chosen = _effective_carveout(per, lim, carveout)
        how = "given" if chosen == carveout else f"given {carveout}, raised to fit one block"
    warps = blocks * _warps_per_block(launch, lim)
    waves = None
    if launch.grid is not None and sms and blocks:
        waves = launch.grid / (blocks * sms)
    return Occupancy(
        blocks_per_sm=blocks,
        limiter=limiter,
        limits=lims,
        theoretical=warps / lim.max_warps_per_sm,
        carveout=chosen,
        waves=waves,
        carveout_chosen=how,
    )


def _first(lo: int, hi: int, pred) -> int | None:
    """The smallest x in [lo, hi] with pred(x) (pred monotone false..true), or None."""
    if lo > hi or not pred(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def cliff(launch: Launch, lim: Limits, *, carveout: int | None = None) -> dict:
    """How far the launch is from one block more or one block less per SM, changing one resource.

    shared_memory_to_one_more: bytes of shared memory per block to remove for one more block (None: no
    amount does it, another resource binds); shared_memory_to_one_less: bytes to add for one block less;
    registers_to_one_more / registers_to_one_less: registers per thread to remove / add (None: not
    reachable within 0..max_regs_per_thread)."""
    n = occupancy(launch, lim, carveout=carveout).blocks_per_sm
    total = launch.smem_static + launch.smem_dynamic

    def with_smem(s: int) -> int:
        ln = dataclasses.replace(launch, smem_static=0, smem_dynamic=s)
        return occupancy(ln, lim, carveout=carveout).blocks_per_sm

    def with_regs(r: int) -> int:
        return occupancy(dataclasses.replace(launch, registers=r), lim, carveout=carveout).blocks_per_sm

    cap = lim.max_smem_per_block_optin + lim.smem_alloc_unit
    more_s = _first(0, total, lambda d: with_smem(total - d) > n) if n else None
    less_s = _first(1, cap, lambda d: with_smem(total + d) < n) if n else None
    r = launch.registers
    more_r = _first(1, r, lambda d: with_regs(r - d) > n)
    less_r = _first(1, lim.max_regs_per_thread - r, lambda d: with_regs(r + d) < n) if n else None
    return {
        "blocks_per_sm": n,
        "shared_memory_to_one_more": more_s,
        "shared_memory_to_one_less": less_s,
        "registers_to_one_more": more_r,
        "registers_to_one_less": less_r,
    }


def predict(launch_measured: Launch, registers_for_arch: int, smem_static_for_arch: int, target: Gpu) -> Occupancy:
    """Predicted occupancy of a measured launch on `target`.

    Block size, grid and dynamic shared memory come from the launch measured on the GPU at hand;
    registers per thread and static shared memory come from the compile check for the target's arch.
    Assumption (say it wherever the result is shown): the host picks the same launch configuration for
    the target arch as for the measured one. That holds where both archs use the same config table (ggml's
    Ampere MMA config serves cc 8.0 to 9.x) and fails where the host code branches on the arch, the SM
    count (stream-k grids are sized from it) or the shared memory available per block."""
    launch = dataclasses.replace(launch_measured, registers=registers_for_arch, smem_static=smem_static_for_arch)
    return occupancy(launch, limits(target.cc), sms=target.sms)
