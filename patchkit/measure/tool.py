"""Running one tool for a step: its raw log, a crash or timeout as a reason, replay from a recorded log."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from patchkit import backends, parsers, proc
from patchkit.errors import ParseError, ToolNotFound
from patchkit.options import Context
from patchkit.results import Bundle, Status, Step
from patchkit.run.scope import Scope
from patchkit.run.scope import both as scope_both
from patchkit.series import VariantState
from patchkit.source import BaseInfo


class Variants(Protocol):
    """The built variants as a step sees them: all of them (once built), or each as soon as built."""

    def all(self) -> list[Bins]: ...

    def stream(self) -> Iterator[Bins]: ...

    def same_code(self) -> dict[str, str]: ...


@dataclass(frozen=True, kw_only=True)
class Built:
    """What every measurement step gets: the run folder, the recipe and work folder, the base, the
    variant trees and the built variants (base first)."""

    ctx: Context
    base: BaseInfo
    bundle: Bundle
    states: tuple[VariantState, ...]  # the variant trees (base first)
    variants: Variants
    backend: str  # cuda | cpu
    scope: Scope | None = None  # --changed: what this run measures (patchkit.run.scope)

    @property
    def bins(self) -> list[Bins]:
        return self.variants.all()

    @property
    def same_code(self) -> dict[str, str]:
        """variant -> why it compiles to base's code (it is not measured)."""
        return self.variants.same_code()

    @property
    def measured(self) -> list[Bins]:
        """The variants worth measuring: all but those that compile to base's code and, with --changed,
        those unchanged since their last build (base stays: the reference)."""
        same = self.same_code
        sc = self.scope
        return [b for b in self.bins if b.variant not in same and (sc is None or sc.measures(b.variant))]

    def nothing_to_compare(self, name: str) -> Step | None:
        """A `not run` step when every patched variant compiles to base's code or, with --changed, is
        unchanged (nothing to compare)."""
        if len(self.measured) >= 2:
            return None
        same = self.same_code
        why = set(same.values()) | {w for v, w in (self.scope.unchanged.items() if self.scope else ()) if v != "base"}
        if why:
            return Step(name=name, status=Status.NOT_RUN, reason=f"nothing to compare: {'; '.join(sorted(why))}")
        return None

    def params(self, params: str) -> str:
        """A cases regex narrowed, with --changed, to the cases the changes can affect."""
        return scope_both(params, self.scope.params) if self.scope else params

    @property
    def peak_bw_gbs(self) -> float | None:
        return (self.bundle.env.get("gpu") or {}).get("peak_bw_gbs")


# ggml's AMX matrix multiply crashes on a Q4_K model's weights (SIGSEGV in ggml_backend_amx_mul_mat; upstream
# ggml-org/llama.cpp#20824, closed as stale without a fix; seen here on an Intel Xeon with AMX-INT8 at the pinned
# base, Gemma 3 270M Q4_K_M: llama-completion, llama-perplexity and llama-bench all crash, and run with repacking
# off). The CPU backend repacks weights for AMX only where its build has AMX-INT8.
AMX_CRASH = "ggml-org/llama.cpp#20824"


def repack_off(backend: str, env: dict) -> str:
    """Why a real model's runs on the CPU backend keep its weights as the file has them (repacking off, for
    every variant alike), '' where they do not: a CPU build with AMX-INT8 (the run's env.json: cpu_isa)."""
    if backends.get(backend).needs_gpu:  # the weights are on the GPU
        return ""
    isa = env.get("cpu_isa") or {}
    if "AMX-INT8" not in (isa.get("extensions") or []):
        return ""
    return (
        "weight repacking off on the CPU backend (this CPU build has AMX-INT8, and ggml's AMX matrix multiply "
        f"crashes on Q4_K weights: {AMX_CRASH}): the AMX and repacked-weight kernels are not exercised"
    )


def repack_args(tool: str, usage: str, why: str) -> list[str]:
    """The option that turns weight repacking off for `tool` ('--no-repack'; llama-bench: '--repack 0'), given
    its usage text; [] where `why` is '' or the usage lists no such option (an older base: it runs as upstream's
    does, and a crash is its reason)."""
    if not why:
        return []
    option, args = ("--repack", ["--repack", "0"]) if tool == "llama-bench" else ("--no-repack", ["--no-repack"])
    return [] if options_not_listed(usage, [option]) else args


def no_repack(built: Built, tool: str) -> tuple[list[str], str]:
    """(the options that turn weight repacking off for `tool` in this run, why) -- ([], '') where the run needs
    none (repack_off) or the measured variants' tool lists no such option (repack_args)."""
    why = repack_off(built.backend, built.bundle.env)
    args = repack_args(tool, usage_text(built.measured[0].exe(tool)), why) if why else []
    return args, why if args else ""


@dataclass(frozen=True, kw_only=True)
class Bins:
    """A built variant: its name and the folder holding its binaries."""

    variant: str
    dir: Path
    key: str = ""  # its build key (patchkit.build.build_key): what a reused measurement is keyed by

    def exe(self, name: str) -> Path:
        return self.dir / name


def failure(done: proc.Completed, timeout: float | None) -> str:
    """Why a tool run counts as failed ('' when it did not)."""
    if done.returncode is None:
        return f"timed out after {timeout:.0f} s" if timeout else "timed out"
    if done.returncode < 0:
        return f"crashed (signal {-done.returncode})"
    return "" if done.returncode == 0 else f"exited with {done.returncode}"


_SAYS = re.compile(r"error|unknown|invalid|usage|failed|not found", re.I)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _plain_lines(text: str) -> list[str]:
    """The non-empty lines of a tool's output without its colour codes (test-backend-ops' ESC[1;31mFAIL)
    or other control characters: what a step's reason and the report may quote."""
    return [s for ln in parsers.strip_ansi(text).splitlines() if (s := _CONTROL.sub("", ln).strip())]


def output_tail(done: proc.Completed, lines: int = 3, width: int = 300) -> str:
    """The last non-empty lines of a tool's stderr (kept apart or not), else of its stdout, as one
    line: what a reason shows of a tool that exited non-zero (its error, or the usage it printed)."""
    err = proc.stderr_log(done.log) if done.log is not None else None
    text = err.read_text(encoding="utf-8", errors="replace") if err is not None and err.is_file() else ""
    picked = _plain_lines(text) or [ln for ln in _plain_lines(done.stdout) if not ln.startswith("# exit:")]
    first = next((ln for ln in picked[:-lines] if _SAYS.search(ln)), None)  # e.g. "unknown option: -j"
    tail = " | ".join([*([first, "..."] if first else []), *picked[-lines:]])
    return tail if len(tail) <= width else "..." + tail[-width:]


def failure_with_tail(done: proc.Completed, timeout: float | None) -> str:
    """failure(), with the tail of the tool's output where it exited non-zero."""
    why = failure(done, timeout)
    tail = output_tail(done) if why.startswith("exited with") else ""
    return f"{why}: {tail}" if tail else why


_USAGE: dict[tuple[str, float], str] = {}


def usage_text(exe: Path) -> str:
    """A tool's usage text: what `exe --help` prints (llama.cpp's tools print their usage for an
    option they do not know, too); '' when it cannot run. Kept per binary and mtime."""
    try:
        k = (str(exe), exe.stat().st_mtime)
    except OSError:
        return ""
    if k not in _USAGE:
        try:
            done = proc.run([exe, "--help"], check=False, echo=False, timeout=60)
        except ToolNotFound:
            return ""
        _USAGE[k] = done.stdout
    return _USAGE[k]


def lacks_options(exe: Path, options: list[str]) -> list[str]:
    """Which of `options` (e.g. ['-j']) the tool's usage text lists no line for: a tool at an older
    base may not have them. [] when the usage text cannot be read (the run then says what failed)."""
    return options_not_listed(usage_text(exe), options)


def options_not_listed(usage: str, options: list[str]) -> list[str]:
    """Which of `options` a usage text lists no line for ([] for an empty text: it cannot say)."""
    if not usage.strip():
        return []
    return [o for o in options if not re.search(rf"^\s*(?:\S+,\s*)*{re.escape(o)}(?=[\s,=<\[]|$)", usage, re.M)]


def missing_options(b: Bins, tool: str, options: dict[str, str]) -> str:
    """'' or one line naming each option (option -> what passes it) that the variant's tool lacks."""
    lack = lacks_options(b.exe(tool), list(options))
    return "; ".join(f"{tool} of {b.variant} has no option {o} (its usage text lists none): {options[o]}" for o in lack)


def run_logged(
    bundle: Bundle,
    name: str,
    argv: list,
    *,
    timeout: float | None,
    env: dict | None = None,
    separate_stderr: bool = False,
    on_line: Callable[[str], None] | None = None,
) -> tuple[proc.Completed | None, str, Path]:
    """Run a tool (or, when the bundle replays, read its recorded log); returns (completed or None,
    failure reason, log). A crash or timeout is a reason, not an exception."""
    log = bundle.raw_log(name)
    if bundle.replay:
        if not log.is_file():
            return None, f"no raw log {bundle.rel(log)} to replay", log
        done = completed_from_log(log)
        return done, failure_with_tail(done, None), log
    try:
        done = proc.run(
            argv, log=log, timeout=timeout, check=False, env=env, separate_stderr=separate_stderr, on_line=on_line
        )
    except ToolNotFound as e:
        log.write_text(f"$ {proc.quote([str(a) for a in argv])}\n# not run: {e}\n")
        return None, str(e), log
    return done, failure_with_tail(done, timeout), log


def completed_from_log(log: Path) -> proc.Completed:
    """A recorded tool run from its raw log: command line first, output, '# exit: N, S s' last."""
    r = parsers.read_raw_log(log)
    return proc.Completed(argv=[r.command], returncode=r.returncode, seconds=r.seconds, log=log, stdout=r.output)


def run_parsed(
    bundle: Bundle,
    name: str,
    argv: list,
    parser,
    errors: list[str],
    what: str,
    logs: list[str],
    *,
    timeout: float,
    separate_stderr: bool = False,
    on_line: Callable[[str], None] | None = None,
):
    """Run a tool and parse its output; a crash, timeout or unparsable output is added to `errors`
    (prefixed with `what`) and gives None, so the caller goes on with the next variant or round."""
    done, why, log = run_logged(bundle, name, argv, timeout=timeout, separate_stderr=separate_stderr, on_line=on_line)
    logs.append(bundle.rel(log))
    if why or done is None:
        errors.append(f"{what}: {why}")
        return None
    try:
        return parser(done.stdout, str(log))
    except ParseError as e:
        errors.append(f"{what}: {e}")
        return None
