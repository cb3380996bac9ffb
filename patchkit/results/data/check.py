"""`check:<config>`'s stored data (patchkit.measure.check writes it): translation units compiled for one
CUDA arch, not run, and ptxas's resource report of the kernels they hold (patchkit.measure.resources)."""

from __future__ import annotations

from dataclasses import dataclass

from patchkit.results.data.base import ABSENT, Data, StepData

# CheckItem.cleared of a unit only local (test-only) patches change, in a check without base: the PR variants compile
# the units of their own (non-local) patches, base those of the local patches (patchkit.build.unitcheck.check)
LOCAL_AT_BASE = "a local patch's unit: compile-checked with base only, and base was not among the checked variants"


@dataclass(kw_only=True)
class CheckItem(Data):
    """One source of one variant compiled for the arch (patchkit.build.unitcheck), or left out and why."""

    variant: str
    arch: str  # the CUDA arch ('89')
    source: str  # the translation unit (relative to the source tree) or the Ninja object
    ok: bool  # compiled, or left out
    error: str = ""  # the compiler's first error line ('' when ok)
    cleared: str = ABSENT  # not compiled: why ('' when compiled; absent: runs before [[affects]] units)


@dataclass(kw_only=True)
class CheckKernel(Data):
    """One kernel of one unit for one arch, as ptxas reports it (patchkit.parsers.ptxas.KernelResources)."""

    name: str  # mangled
    arch: str  # 'sm_89'
    registers: int
    smem: int  # static shared memory (bytes)
    stack: int  # cumulative stack size (bytes; the stack frame when ptxas gives no cumulative size)
    spill_stores: int  # bytes
    spill_loads: int  # bytes
    barriers: int
    line: int  # the `Used` line of the log, 1-based
    unit: str  # the Ninja object it came from ('' when not known)
    log: str  # relative to the run folder
    variant: str  # from the log's name check-<config>-<variant>.log ('' otherwise)
    display: str  # demangled, without 'void ' and the parameter list


@dataclass(kw_only=True)
class CheckData(StepData):
    """check:<config> (check:cuda-<arch>). A step that did not run holds only `inputs`."""

    KIND = "check:"  # a prefix: one step per configuration
    items: list[CheckItem] = ABSENT  # absent: the step compiled nothing
    kernels: list[CheckKernel] = ABSENT  # absent: runs before the resource report
    resource_errors: list[str] = ABSENT  # one line per log ptxas's report could not be read from
