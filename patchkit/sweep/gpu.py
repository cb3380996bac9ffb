"""The GPU part of a sweep: build each point, run the correctness subset, time it interleaved against
the starting row with an A/A copy, and confirm the winner with a full build.

Paying less per point, and why it never measures stale code:

* The points differ from the start variant only in one row of one header. The compile check of the
  measured arch (patchkit.sweep.check, in the sweep's own lanes) compiles exactly the translation
  units that use the row, with the measured build's own options; those objects are kept.
* Before the first link the compile command of every such unit in the lane's build folder is
  compared with the one in the start variant's build folder (the shared build of patchkit.build,
  its tree at the start variant's commit): they must be equal but for the tree and build paths.
* A point's binary is linked in that shared build folder: its objects are copied over the start's
  (a marker file says so until they are put back), Ninja links, and Ninja's output must show no
  compile at all (else the point fails: the shared build was not up to date). The start's objects
  are put back at once (also after a crash: the marker is honoured before the next use).
* The winner is confirmed without the shortcut: the shared tree checked out at the point's commit,
  a normal Ninja build (every includer of the header recompiled), the full test suite of the op,
  and a fresh interleaved timing of the starting row, the full build, the sweep's binary and the
  A/A copy. The sweep's binary and the full build must come out the same.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from patchkit import backends, build, proc
from patchkit.errors import BuildError
from patchkit.measure import env as env_mod
from patchkit.measure import kernel, stats
from patchkit.measure import test as tests
from patchkit.measure.kernel import perf_argv
from patchkit.measure.tool import Bins
from patchkit.options import Context
from patchkit.results import Bundle
from patchkit.source import sha256_file
from patchkit.sweep import check
from patchkit.sweep.points import Point
from patchkit.sweep.search import AA, Timing, compare, per_round
from patchkit.sweep.spec import SweepError, SweepSpec
from patchkit.sweep.store import Store
from patchkit.workspace import read_json, write_json

EXE = "test-backend-ops"
_COMPILE = re.compile(r"^\[\d+/\d+\] Building ", re.M)


@dataclass(frozen=True, kw_only=True)
class GpuOptions:
    opts: build.BuildOptions  # the measured build (its arch is the device's)
    device: str = backends.CUDA.device  # test-backend-ops -b
    op: str = "FLASH_ATTN_EXT"
    test_jobs: int = 0  # test-backend-ops -j of the correctness and confirmation suites
    min_us: int = 1_000_000  # GGML_TEST_PERF_MIN_US
    timeout: float = 900.0
    confirm_rounds: int = 5  # 0: no confirmation

    @property
    def arch(self) -> str:
        return self.opts.archs[0]


@dataclass
class Gpu:
    """The measure callable of patchkit.sweep.search, bound to one sweep."""

    ctx: Context
    spec: SweepSpec
    store: Store
    start_head: str
    start_key: str
    base: object  # source.BaseInfo
    g: GpuOptions
    tc: build.Toolchain = field(init=False)
    root: Path = field(init=False)
    bundle: Bundle | None = None
    checked_commands: bool = False
    seconds: dict[str, float] = field(default_factory=dict)
    memory_kb: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tc = build.toolchain(self.g.opts)
        self.root = build.build_root(self.ctx.ws, self.ctx.recipe, self.g.opts)

    @property
    def bdir(self) -> Path:
        return self.root / "build"

    @property
    def marker(self) -> Path:
        return self.root / "sweep-objects.json"

    def _add(self, what: str, t0: float) -> None:
        self.seconds[what] = round(self.seconds.get(what, 0.0) + time.monotonic() - t0, 1)

    def run_folder(self) -> Bundle:
        if self.bundle is None:
            path = self.store.root / "gpu"
            if (path / "results.json").is_file():
                self.bundle = Bundle.open(path, write=True)
            else:
                meta = {"sweep": self.spec.name, "start": self.start_key}
                self.bundle = Bundle.create(self.store.root, recipe=self.ctx.recipe.name, run_id="gpu", meta=meta)
                fp = env_mod.fingerprint(
                    cmake_flags=list(self.tc.cmake_args) + list(self.g.opts.cmake_options),
                    base=self.base.commit,  # type: ignore[attr-defined]
                    patches={},
                )
                write_json(path / "env.json", fp)
        return self.bundle

    # --- the shared build folder at the start variant

    def _restore(self) -> None:
        """Put the start's objects back where a point's were copied over them (the marker file says
        which), with their own mtimes, and delete what was linked from the point's objects (the
        archives holding them, the binary): Ninja links those again from the start's objects."""
        if not self.marker.is_file():
            return
        m = read_json(self.marker)
        for obj in m.get("objects", []):
            shutil.copy2(Path(m["saved"]) / obj, self.bdir / obj)  # bytes and mtime of the start's
        for out in m.get("linked", []):
            (self.bdir / out).unlink(missing_ok=True)
        self.marker.unlink()

    def _consumers(self, objs: list[str]) -> list[str]:
        """What Ninja makes from these objects (the static archives holding them)."""
        out = []
        for obj in objs:
            text = proc.run(["ninja", "-C", str(self.bdir), "-t", "query", obj], echo=False, env=self.tc.env).stdout
            block = text.split("\n  outputs:\n", 1)
            out += [ln.strip() for ln in block[1].splitlines() if ln.startswith("    ")] if len(block) == 2 else []
        return sorted(set(out))

    def start_build(self) -> Path:
        """The shared build at the start variant, up to date (Ninja decides); the start's binary dir."""
        t0 = time.monotonic()
        self._restore()
        tree = build.move_tree(self.ctx.ws, self.ctx.recipe, self.root, self.base, self.start_head)  # type: ignore[arg-type]
        build.configure(tree, self.bdir, self.g.opts, self.tc, self.store.logs / "configure-start.log")
        build.run_ninja(self.bdir, [EXE], self.g.opts, self.tc, self.store.logs / "build-start.log", "build start")
        out = self.store.bin_dir("_start")
        _copy_exe(self.bdir / "bin" / EXE, out)
        self._add("build start", t0)
        return out

    def _same_commands(self, rec: dict) -> None:
        """The lane compiled the point's units with the shared build's own commands (paths aside)."""
        if self.checked_commands:
            return
        lane = Path(rec["objects"]["bdir"])
        lane_tree = Path(read_json(lane / "patchkit-configure.json")[2])
        for obj in rec["objects"]["files"]:
            mine = _command(self.bdir, obj, self.tc).replace(str(self.root / "tree"), "<tree>")
            theirs = _command(lane, obj, self.tc).replace(str(lane_tree), "<tree>")
            if mine.replace(str(self.bdir), "<build>") != theirs.replace(str(lane), "<build>"):
                raise SweepError(
                    f"sweep: {obj} is compiled with other options in the sweep's build folder {lane} than in "
                    f"{self.bdir}; its objects cannot be linked into the start's build"
                )
        self.checked_commands = True

    def link(self, point: Point, rec: dict) -> Path:
        """The point's test-backend-ops: its kept objects linked in the shared build (module docstring)."""
        out = self.store.bin_dir(point.name)
        files = rec["objects"]["files"]
        want = {"point": point.key, "start": self.start_key, "objects": files}
        if (out / EXE).is_file() and (out / "manifest.json").is_file() and read_json(out / "manifest.json") == want:
            return out
        self._same_commands(rec)
        t0 = time.monotonic()
        saved = self.store.objects("_start")
        for obj in files:  # the start's objects, as the shared build (up to date) has them now
            (saved / obj).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.bdir / obj, saved / obj)
        linked = [*self._consumers(sorted(files)), f"bin/{EXE}"]
        write_json(self.marker, {"saved": str(saved), "objects": sorted(files), "linked": linked, "point": point.name})
        try:
            # The point's objects take the start's mtimes: Ninja's deps log holds each object's mtime and
            # a newer object counts as not built. What was linked from them is deleted, so Ninja links again.
            for obj in files:
                st = (saved / obj).stat()
                shutil.copy2(self.store.objects(point.name) / obj, self.bdir / obj)
                os.utime(self.bdir / obj, ns=(st.st_atime_ns, st.st_mtime_ns))
            for x in linked:
                (self.bdir / x).unlink(missing_ok=True)
            log = self.store.logs / f"link-{point.name}.log"
            done = build.run_ninja(self.bdir, [EXE], self.g.opts, self.tc, log, f"link {point.name}")
            compiled = _COMPILE.findall(done.stdout)
            if compiled:
                raise BuildError(
                    f"sweep point {point.name}: linking recompiled {len(compiled)} objects (log: {log}): "
                    "the start variant's build folder was not up to date"
                )
            _copy_exe(self.bdir / "bin" / EXE, out)
        finally:
            self._restore()
        write_json(out / "manifest.json", want)
        self._add("link", t0)
        return out

    # --- correctness and timing

    def correct(self, name: str, exe_dir: Path, rec: dict | None, args: tuple[str, ...], what: str) -> dict:
        """The test suite `args` on one binary: {status, reason, n_ok, n_fail, log, ...}, stored in
        `rec` under `what` and found there again by the binary's sha256."""
        sha = sha256_file(exe_dir / EXE)
        old = (rec or {}).get(what) or {}
        if old.get("binary") == sha and old.get("args") == list(args):
            return old
        t0 = time.monotonic()
        step = tests.run_tests(
            self.run_folder(),
            [Bins(variant=name, dir=exe_dir)],
            suite=what,
            args=args,
            backend=self.g.device,
            jobs=self.g.test_jobs,
            timeout=self.g.timeout,
        )
        v = step.data["variants"][name]
        entry = {"binary": sha, "args": list(args), "status": v["status"], "reason": v["reason"], "log": v["log"]}
        entry.update(n_ok=v.get("n_ok", 0), n_fail=v.get("n_fail", 0), seconds=step.seconds)
        if rec is not None:
            rec[what] = entry
            self.store.save(rec)
        self._add(what, t0)
        print(f"{name}: {what} {v['status']} ({entry['n_ok']} ok, {entry['n_fail']} failing, {step.seconds:.0f} s)")
        return entry

    def time(self, labeled: list[tuple[str, Path]], rounds: int, tag: str) -> dict[str, Timing]:
        """`rounds` rounds of test-backend-ops perf over the spec's cases, through bench:kernel's rounds
        (patchkit.measure.kernel: the same alternation, the same hooks around each process: GPU clocks,
        power); label -> Timing. A binary that fails a process is invalid (its first failure named)."""
        t0 = time.monotonic()
        state = kernel.time_rounds(
            self.run_folder(),
            [(label, Bins(variant=label, dir=exe_dir)) for label, exe_dir in labeled],
            lambda b, p: perf_argv(b, self.g.device, self.g.op, p, ""),
            kernel.Timing(min_rounds=rounds, max_rounds=rounds, max_seconds=0.0, min_us=self.g.min_us),
            self.spec.cases,
            timeout=self.g.timeout,
            prefix=f"perf-{tag}-",
        )
        for _, recs in state.runs:
            for x in recs:
                if x.supported is not False and x.memory_kb:
                    self.memory_kb.setdefault(x.op_params, int(x.memory_kb))
        self._add("timing", t0)
        out = {}
        for label, _ in labeled:
            logs = tuple(state.logs_of.get(label, ()))
            failed = [e for e in state.errors if e.startswith(f"{label} round ")]
            samples = {c.params: list(c.samples[label]) for c in state.cases.values() if label in c.samples}
            if failed:
                out[label] = Timing(ok=False, error=failed[0], logs=logs)
            elif not samples:
                out[label] = Timing(ok=False, error=f"no supported case matched -p {self.spec.cases!r}")
            else:
                out[label] = Timing(samples=samples, logs=logs)
        return out

    def point_binary(self, p: Point, rec: dict) -> tuple[Path | None, str]:
        """A point's linked binary (patchkit.sweep.gpu.Gpu.link), or None and why there is none."""
        if not check.objects_kept(self.store, rec, self.g.arch, check.toolchain_id(self.tc)):
            return None, f"no compiled objects kept for sm_{self.g.arch}"
        try:
            return self.link(p, rec), ""
        except BuildError as e:
            return None, str(e)

    @property
    def correct_args(self) -> tuple[str, ...]:
        return ("-o", self.g.op, *(("-p", self.spec.correctness) if self.spec.correctness else ()))

    # --- the measure callable

    def __call__(self, members: list[Point], rounds: int) -> dict[str, Timing]:
        ref = members[0]
        out: dict[str, Timing] = {}
        with self.ctx.ws.lock(self.root):
            start_dir = self.start_build()
            dirs: dict[str, Path] = {ref.name: start_dir}
            for p in members[1:]:
                d, why = self.point_binary(p, self.store.record(p))
                if d is None:
                    out[p.name] = Timing(ok=False, error=why)
                else:
                    dirs[p.name] = d
        for p in members:
            if p.name in dirs:
                c = self.correct(p.name, dirs[p.name], self.store.record(p), self.correct_args, "correctness")
                if c["status"] != "ok":
                    out[p.name] = Timing(ok=False, error=f"correctness subset: {c['status']}: {c['reason']}")
                    del dirs[p.name]
        if ref.name not in dirs:
            raise SweepError(f"sweep: the starting row fails its correctness subset: {out[ref.name].error}")
        labeled = [(p.name, dirs[p.name]) for p in members if p.name in dirs] + [(ref.name + AA, start_dir)]
        out.update(self.time(labeled, rounds, f"r{rounds}"))
        return out

    # --- the winner, confirmed without the shortcut

    def confirm(self, ref: Point, best: Point, rec: dict) -> dict:
        """Full build of the winner, the op's full suite on it, and a fresh interleaved timing."""
        t0 = time.monotonic()
        with self.ctx.ws.lock(self.root):
            start_dir = self.start_build()
            tree = build.move_tree(self.ctx.ws, self.ctx.recipe, self.root, self.base, rec["commit"])  # type: ignore[arg-type]
            build.configure(tree, self.bdir, self.g.opts, self.tc, self.store.logs / "configure-confirm.log")
            log = self.store.logs / f"build-full-{best.name}.log"
            done = build.run_ninja(self.bdir, [EXE], self.g.opts, self.tc, log, f"full build {best.name}")
            full = self.store.bin_dir(best.name + ".full")
            _copy_exe(self.bdir / "bin" / EXE, full)
        build_s = round(time.monotonic() - t0, 1)
        compiled = len(_COMPILE.findall(done.stdout))
        suite = self.correct(best.name + ".full", full, None, ("-o", self.g.op), "full-suite")
        ok = suite["status"] == "ok"
        shortcut = self.store.bin_dir(best.name)
        labeled = [(ref.name, start_dir), (best.name + ".full", full), (best.name, shortcut)]
        labeled.append((ref.name + AA, start_dir))
        t = self.time(labeled, self.g.confirm_rounds, "confirm")
        objective = self.spec.objective
        ref_t, aa_t, full_t, cut_t = (t[ref.name], t[ref.name + AA], t[best.name + ".full"], t[best.name])
        c_full = compare(ref_t, aa_t, full_t, objective) if ok and full_t.ok and ref_t.ok else None
        c_cut = compare(ref_t, aa_t, cut_t, objective) if cut_t.ok and ref_t.ok else None
        same = None
        if c_full is not None and c_cut is not None:
            cases = sorted(set(full_t.samples) & set(cut_t.samples))
            r = stats.ratio(per_round(full_t.samples, cases, objective), per_round(cut_t.samples, cases, objective))
            same = {"ratio": r.to_dict(), "floor": c_full.floor, "verdict": stats.verdict(r, c_full.floor)}
        return {
            "point": best.name,
            "commit": rec["commit"],
            "build": {"seconds": build_s, "compiled": compiled, "log": self.store.rel(log)},
            "full_suite": {"ok": ok, **suite},
            "rounds": self.g.confirm_rounds,
            "timing": {k: v.to_dict() for k, v in t.items()},
            "full_vs_start": _compared(c_full),
            "sweep_binary_vs_start": _compared(c_cut),
            "sweep_binary_vs_full": same,
            "seconds": round(time.monotonic() - t0, 1),
        }

    def write_cases(self) -> None:
        """The device's peak bandwidth and the op (the outputs' distance to the bandwidth floor), and
        test-backend-ops' memory_kb per case as it printed it (kept, not used: it counts whole
        tensors, the parents of views included, not the bytes the op moves)."""
        peak = (self.run_folder().env.get("gpu") or {}).get("peak_bw_gbs")
        data = {"peak_bw_gbs": peak, "op": self.g.op, "memory_kb": self.memory_kb}
        write_json(self.store.root / "cases.json", data)


class Ahead:
    """Links and correctness runs of the points as the compile lanes find them valid: one thread beside
    the compiles, so that the GPU and the linker work while nvcc does. The measure call finds them
    done (by manifest and binary sha256); an error here is raised by close()."""

    def __init__(self, gpu: Gpu) -> None:
        self.gpu = gpu
        self.q: queue.SimpleQueue[Point | None] = queue.SimpleQueue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._work, name="sweep-ahead", daemon=True)
        self.thread.start()

    def put(self, point: Point, rec: dict) -> None:
        """Called by a compile lane; raises the thread's error, so that the lanes stop at once."""
        if self.error is not None:
            raise SweepError(f"sweep: linking and testing the points failed: {self.error}")
        self.q.put(point)

    def close(self) -> None:
        self.q.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error

    def _work(self) -> None:
        g = self.gpu
        try:
            with g.ctx.ws.lock(g.root):
                start_dir = g.start_build()
                while (p := self.q.get()) is not None:
                    d, why = (start_dir, "") if p.reference else g.point_binary(p, g.store.record(p))
                    if d is None:
                        print(f"{p.name}: {why}")  # the measure call records it for the point
                        continue
                    g.correct(p.name, d, g.store.record(p), g.correct_args, "correctness")
        except BaseException as e:  # raised again in the caller's thread by close()
            self.error = e


def _compared(c) -> dict | None:
    if c is None:
        return None
    return {"ratio": c.ratio.to_dict(), "floor": c.floor, "verdict": c.verdict, "cases": c.cases}


def _command(bdir: Path, obj: str, tc: build.Toolchain) -> str:
    out = proc.run(["ninja", "-C", str(bdir), "-t", "commands", "-s", obj], echo=False, env=tc.env).stdout
    lines = [ln for ln in out.splitlines() if ln.strip()]
    if not lines:
        raise SweepError(f"sweep: Ninja in {bdir} has no command for {obj}")
    return lines[-1]


def _copy_exe(exe: Path, out: Path) -> None:
    if not exe.is_file():
        raise BuildError(f"{exe}: not built")
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shutil.copy2(exe, tmp / EXE)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
