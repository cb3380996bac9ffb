"""Runners: test-backend-ops test/perf, ncu kernel names, llama-bench decode, numerics.

Each runner takes the built variants (name -> bin dir), runs the real tools through `proc.run`
(logs under the run's raw/), parses the output with `patchkit.parse`, and returns a `Step`.
A variant that crashes or times out is recorded as such and the others still run.
"""

from __future__ import annotations

import hashlib
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from patchkit import parse, proc, stats
from patchkit.errors import ParseError, ToolNotFound
from patchkit.results import Bundle, Status, Step


@dataclass(frozen=True, kw_only=True)
class Bins:
    """A built variant: its name and the folder holding its binaries."""

    variant: str
    dir: Path

    def exe(self, name: str) -> Path:
        return self.dir / name


def _failure(done: proc.Completed, timeout: float | None) -> str:
    """Why a tool run counts as failed ('' when it did not)."""
    if done.returncode is None:
        return f"timed out after {timeout:.0f} s" if timeout else "timed out"
    if done.returncode < 0:
        return f"crashed (signal {-done.returncode})"
    return "" if done.returncode == 0 else f"exited with {done.returncode}"


def _run_logged(
    bundle: Bundle,
    name: str,
    argv: list,
    *,
    timeout: float | None,
    env: dict | None = None,
    separate_stderr: bool = False,
) -> tuple[proc.Completed | None, str, Path]:
    """Run a tool (or, when the bundle replays, read its recorded log); returns (completed or None,
    failure reason, log). A crash or timeout is a reason, not an exception."""
    log = bundle.raw_log(name)
    if bundle.replay:
        if not log.is_file():
            return None, f"no raw log {bundle.rel(log)} to replay", log
        done = completed_from_log(log)
        return done, _failure(done, None), log
    try:
        done = proc.run(argv, log=log, timeout=timeout, check=False, env=env, separate_stderr=separate_stderr)
    except ToolNotFound as e:
        log.write_text(f"$ {proc.quote([str(a) for a in argv])}\n# not run: {e}\n")
        return None, str(e), log
    return done, _failure(done, timeout), log


# the exit line; logs written before proc.run started it on a new line have it glued to output that
# did not end with a newline
_EXIT = re.compile(r"# exit: (\S+), ([\d.]+) s$")


def completed_from_log(log: Path) -> proc.Completed:
    """A recorded tool run from its raw log: command line first, output, '# exit: N, S s' last."""
    lines = log.read_text(encoding="utf-8", errors="replace").split("\n")
    if not lines or not lines[0].startswith("$ "):
        raise ParseError(f"{log}:1: not a patchkit raw log (expected '$ <command line>')")
    body = lines[1:]
    if body and body[0].startswith("# cwd: "):
        body = body[1:]
    while body and body[-1] == "":
        body.pop()
    m = _EXIT.search(body[-1]) if body else None
    if m is None:
        raise ParseError(f"{log}: truncated raw log: no '# exit:' line (the run was interrupted)")
    rc = None if m.group(1) == "timeout" else int(m.group(1))
    out = "\n".join(body[:-1]) + "\n" + body[-1][: m.start()]  # what was glued before the exit line, if anything
    return proc.Completed(argv=[lines[0][2:]], returncode=rc, seconds=float(m.group(2)), log=log, stdout=out)


def _run_parsed(
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
):
    """Run a tool and parse its output; a crash, timeout or unparsable output is added to `errors`
    (prefixed with `what`) and gives None, so the caller goes on with the next variant or round."""
    done, why, log = _run_logged(bundle, name, argv, timeout=timeout, separate_stderr=separate_stderr)
    logs.append(bundle.rel(log))
    if why or done is None:
        errors.append(f"{what}: {why}")
        return None
    try:
        return parser(done.stdout, str(log))
    except ParseError as e:
        errors.append(f"{what}: {e}")
        return None


# ---------------------------------------------------------------------------------------------
# test-backend-ops test


def run_tests(
    bundle: Bundle,
    bins: list[Bins],
    *,
    suite: str,
    args: tuple[str, ...],
    backend: str,
    jobs: int = 0,
    timeout: float = 3600,
) -> Step:
    t0 = time.monotonic()
    per: dict[str, dict] = {}
    logs: list[str] = []
    cases: dict[str, dict[str, str]] = {}
    for b in bins:
        argv = [b.exe("test-backend-ops"), "test", "-b", backend, *args]
        if jobs:
            argv += ["-j", str(jobs)]
        done, why, log = _run_logged(bundle, f"test-{suite}-{b.variant}", argv, timeout=timeout)
        logs.append(bundle.rel(log))
        entry: dict = {"log": bundle.rel(log), "seconds": round(done.seconds, 1) if done else 0.0}
        try:
            tr = parse.parse_test_console(done.stdout if done else "", str(log), partial=bool(why))
        except ParseError as e:
            entry.update(
                status=Status.ERROR.value, reason=why or str(e), backends=[], n_ok=0, n_fail=0, n_not_supported=0
            )
            per[b.variant] = entry
            continue
        backends = []
        for br in tr.backends:
            backends.append(
                {
                    "name": br.name,
                    "status": br.status,
                    "tests_passed": br.tests_passed,
                    "tests_total": br.tests_total,
                    "failing": sorted({c.name for c in br.cases if c.status == "fail"} | set(br.failing_tests or [])),
                }
            )
        run_cases = [c for c in tr.cases if c.status in ("ok", "fail")]
        cases[b.variant] = {c.name: c.status for c in run_cases}
        if why:
            status, reason = Status.ERROR, why
        elif tr.status == "not_run":
            status, reason = Status.NOT_RUN, f"no test case ran on {backend} (skipped, unsupported or none matched)"
        elif tr.status == "ok" and done is not None and done.returncode == 0:
            status, reason = Status.OK, ""
        else:
            status, reason = Status.FAIL, f"{sum(1 for c in run_cases if c.status == 'fail')} failing cases"
        entry.update(
            status=status.value,
            reason=reason,
            backends=backends,
            n_ok=sum(1 for c in tr.cases if c.status == "ok"),
            n_fail=sum(1 for c in tr.cases if c.status == "fail"),
            n_not_supported=sum(1 for c in tr.cases if c.status == "not_supported"),
        )
        per[b.variant] = entry
    diff = {}
    ref = cases.get("base")
    if ref is not None:
        for v, cs in cases.items():
            if v == "base":
                continue
            diff[v] = {
                "new_failures": sorted(n for n, s in cs.items() if s == "fail" and ref.get(n) != "fail"),
                "fixed": sorted(n for n, s in cs.items() if s == "ok" and ref.get(n) == "fail"),
                "disappeared": sorted(set(ref) - set(cs)),
                "appeared": sorted(set(cs) - set(ref)),
            }
    statuses = [Status(e["status"]) for e in per.values()]
    if any(s == Status.ERROR for s in statuses) or any(s == Status.FAIL for s in statuses):
        overall = Status.FAIL
    elif statuses and all(s == Status.NOT_RUN for s in statuses):
        overall = Status.NOT_RUN
    elif any(s == Status.NOT_RUN for s in statuses):
        overall = Status.FAIL
    else:
        overall = Status.OK
    reason = "; ".join(f"{v}: {e['reason']}" for v, e in per.items() if e["reason"])
    return Step(
        name=f"test:{suite}",
        status=overall,
        reason=reason,
        seconds=round(time.monotonic() - t0, 1),
        logs=logs,
        data={"suite": suite, "args": list(args), "backend": backend, "variants": per, "diff": diff},
    )


# ---------------------------------------------------------------------------------------------
# test-backend-ops perf, interleaved rounds with an A/A copy of base


def _perf_argv(b: Bins, backend: str, op: str, params: str, test_file: str) -> list:
    argv: list = [b.exe("test-backend-ops"), "perf", "-b", backend, "--output", "sql"]
    if test_file:
        argv += ["--test-file", test_file]
    else:
        argv += ["-o", op]
        if params:
            argv += ["-p", params]
    return argv


def run_kernel_bench(
    bundle: Bundle,
    bins: list[Bins],
    *,
    backend: str,
    op: str,
    params: str,
    test_file: str = "",
    rounds: int = 3,
    peak_bw_gbs: float | None = None,
    timeout: float = 1800,
) -> Step:
    t0 = time.monotonic()
    if not bins:
        return Step(name="bench:kernel", status=Status.NOT_RUN, reason="no built variants")
    base = next((b for b in bins if b.variant == "base"), bins[0])
    labeled = [(base.variant, base), *[(b.variant, b) for b in bins if b is not base], (f"{base.variant}#2", base)]
    samples: dict[str, dict[str, list[float]]] = {}  # params -> label -> [time_us]
    logs: list[str] = []
    errors: list[str] = []
    for r in range(1, max(rounds, 1) + 1):
        order = labeled if r % 2 else [labeled[0], *reversed(labeled[1:])]
        for label, b in order:
            recs = _run_parsed(
                bundle,
                f"perf-r{r}-{label.replace('#', '_aa')}",
                _perf_argv(b, backend, op, params, test_file),
                parse.parse_perf_sql,
                errors,
                f"{label} round {r}",
                logs,
                timeout=timeout,
                separate_stderr=True,
            )
            for rec in recs or ():
                if rec.supported is False:
                    continue
                samples.setdefault(rec.op_params, {}).setdefault(label, []).append(rec.time_us)
    if not samples:
        return Step(
            name="bench:kernel",
            status=Status.ERROR if errors else Status.NOT_RUN,
            reason="; ".join(errors) or f"no {op} case matched {params or test_file!r} on {backend}",
            logs=logs,
            seconds=round(time.monotonic() - t0, 1),
            data={
                "op": op,
                "params": params,
                "test_file": test_file,
                "rounds": rounds,
                "backend": backend,
                "peak_bw_gbs": peak_bw_gbs,
            },
        )
    cases = []
    aa = []
    base_label, aa_label = labeled[0][0], labeled[-1][0]
    for p, by_label in samples.items():
        nbytes = stats.op_bytes(op, p)
        variants = {}
        for label, xs in by_label.items():
            s = stats.summarize(xs)
            gbs = nbytes / (s.median * 1e-6) / 1e9 if nbytes else None
            variants[label] = {
                "samples_us": xs,
                **s.to_dict(),
                "gbs": gbs,
                "pct_peak": (100 * gbs / peak_bw_gbs) if (gbs and peak_bw_gbs) else None,
            }
        aa_ratio = None
        if base_label in by_label and aa_label in by_label:
            aa_ratio = stats.ratio(by_label[base_label], by_label[aa_label]).ratio
            aa.append(aa_ratio)
        cases.append({"params": p, "bytes": nbytes, "variants": variants, "aa_ratio": aa_ratio})
    floor = stats.noise_floor(aa)
    for c in cases:
        ref = samples[c["params"]].get(base_label)
        c["vs_base"] = {}
        for label, xs in samples[c["params"]].items():
            if label == base_label or ref is None:
                continue
            rr = stats.ratio(ref, xs)
            c["vs_base"][label] = {**rr.to_dict(), "verdict": stats.verdict(rr, floor)}
    return Step(
        name="bench:kernel",
        status=Status.ERROR if errors else Status.OK,
        reason="; ".join(errors),
        seconds=round(time.monotonic() - t0, 1),
        logs=logs,
        data={
            "op": op,
            "params": params,
            "test_file": test_file,
            "rounds": rounds,
            "backend": backend,
            "peak_bw_gbs": peak_bw_gbs,
            "labels": [lab for lab, _ in labeled],
            "cases": cases,
            "noise_floor": floor,
        },
    )


# ---------------------------------------------------------------------------------------------
# Kernel path: which kernels each variant launches for each case (Nsight Compute)


def exact_params_regex(params: str) -> str:
    return "^" + re.escape(params) + "$"


def run_kernel_path(
    bundle: Bundle,
    bins: list[Bins],
    *,
    backend: str,
    op: str,
    cases: list[str],
    launch_count: int = 40,
    timeout: float = 600,
) -> Step:
    t0 = time.monotonic()
    try:
        if not bundle.replay:
            proc.which("ncu")
    except ToolNotFound as e:
        return Step(name="kernel-path", status=Status.NOT_RUN, reason=f"ncu (Nsight Compute) not available: {e}")
    out_cases = []
    logs, errors = [], []
    for i, p in enumerate(cases):
        per: dict[str, list[dict]] = {}
        for b in bins:
            argv = [
                "ncu",
                "--clock-control",
                "none",
                "--csv",
                "--print-units",
                "base",
                "--metrics",
                "gpu__time_duration.sum",
                "--launch-count",
                str(launch_count),
                b.exe("test-backend-ops"),
                "perf",
                "-b",
                backend,
                "-o",
                op,
                "-p",
                exact_params_regex(p),
            ]
            launches = _run_parsed(
                bundle,
                f"ncu-case{i}-{b.variant}",
                argv,
                parse.parse_ncu_csv,
                errors,
                f"{b.variant} case {i}",
                logs,
                timeout=timeout,
            )
            if launches is None:
                continue
            per[b.variant] = [
                {"name": k.name, "count": k.count, "total_ns": k.total_ns, "share": k.share}
                for k in parse.summarize_kernels(launches)
            ]
        out_cases.append({"params": p, "variants": per})
    status = (
        Status.ERROR if errors and not any(c["variants"] for c in out_cases) else (Status.FAIL if errors else Status.OK)
    )
    return Step(
        name="kernel-path",
        status=status,
        reason="; ".join(errors),
        seconds=round(time.monotonic() - t0, 1),
        logs=logs,
        data={"cases": out_cases, "launch_count": launch_count},
    )


# ---------------------------------------------------------------------------------------------
# Decode: llama-bench, variants interleaved round by round


def run_decode(
    bundle: Bundle,
    bins: list[Bins],
    *,
    model: Path,
    model_info: dict,
    depths: tuple[int, ...],
    type_k: str,
    type_v: str,
    n_gen: int,
    repetitions: int,
    rounds: int = 1,
    threads: int = 0,
    ngl: int = 99,
    extra: tuple[str, ...] = (),
    timeout: float = 1800,
) -> Step:
    t0 = time.monotonic()
    args = [
        "-m",
        str(model),
        "-fa",
        "1",
        "-ctk",
        type_k,
        "-ctv",
        type_v,
        "-p",
        "0",
        "-n",
        str(n_gen),
        "-d",
        ",".join(str(d) for d in depths),
        "-r",
        str(repetitions),
        "-ngl",
        str(ngl),
        "-o",
        "json",
        *extra,
    ]
    if threads:
        args += ["-t", str(threads)]
    rows: dict[tuple[str, int], dict] = {}
    logs, errors = [], []
    for r in range(1, max(rounds, 1) + 1):
        order = bins if r % 2 else list(reversed(bins))
        for b in order:
            recs = _run_parsed(
                bundle,
                f"decode-r{r}-{b.variant}",
                [b.exe("llama-bench"), *args],
                parse.parse_llama_bench_json,
                errors,
                f"{b.variant} round {r}",
                logs,
                timeout=timeout,
                separate_stderr=True,
            )
            for rec in recs or ():
                row = rows.setdefault(
                    (b.variant, rec.n_depth),
                    {
                        "variant": b.variant,
                        "depth": rec.n_depth,
                        "type_k": rec.type_k,
                        "type_v": rec.type_v,
                        "n_gen": rec.n_gen,
                        "samples_ts": [],
                        "logs": [],
                    },
                )
                row["samples_ts"].extend(rec.samples_ts)
                row["logs"].append(logs[-1])
    if not rows:
        return Step(
            name="bench:decode",
            status=Status.ERROR if errors else Status.NOT_RUN,
            reason="; ".join(errors) or "llama-bench produced no records",
            logs=logs,
            seconds=round(time.monotonic() - t0, 1),
        )
    out_rows = []
    for (v, d), row in sorted(rows.items(), key=lambda kv: (kv[0][1], [b.variant for b in bins].index(kv[0][0]))):
        s = stats.summarize(row["samples_ts"])
        out_rows.append(
            {
                **{k: row[k] for k in ("variant", "depth", "type_k", "type_v", "n_gen", "samples_ts")},
                "avg_ts": statistics.fmean(row["samples_ts"]),
                "stddev_ts": statistics.stdev(row["samples_ts"]) if len(row["samples_ts"]) > 1 else 0.0,
                "median": s.median,
                "ci_low": s.ci_low,
                "ci_high": s.ci_high,
                "log": row["logs"][0],
                "logs": row["logs"],
            }
        )
    vs = []
    for (v, d), row in rows.items():
        ref = rows.get(("base", d))
        if v == "base" or ref is None:
            continue
        rr = stats.ratio(ref["samples_ts"], row["samples_ts"])
        vs.append({"variant": v, "depth": d, **rr.to_dict(), "verdict": stats.verdict(rr, 0.0, higher_is_better=True)})
    return Step(
        name="bench:decode",
        status=Status.ERROR if errors else Status.OK,
        reason="; ".join(errors),
        seconds=round(time.monotonic() - t0, 1),
        logs=logs,
        data={
            "model": model_info,
            "model_path": str(model),
            "args": [str(a) for a in args],
            "rounds": rounds,
            "rows": out_rows,
            "vs_base": sorted(vs, key=lambda x: (x["depth"], x["variant"])),
        },
    )


# ---------------------------------------------------------------------------------------------
# Numerics: greedy generations compared, and KL divergence of logits against base


def long_prompt(n_chars: int, seed_text: str) -> str:
    """A deterministic prompt of n_chars characters (at most n_chars tokens with any vocabulary)."""
    words = seed_text.split() or ["token"]
    out, i, size = [], 0, 0
    while size < n_chars:
        w = f"{words[i % len(words)]}{i // len(words)}" if i % 7 == 0 else words[i % len(words)]
        out.append(w)
        size += len(w) + 1
        i += 1
    return " ".join(out)[:n_chars]


_PROMPT_TOKENS = re.compile(r"prompt eval time =\s+[\d.]+ ms /\s+(\d+) tokens")


# llama.cpp's common tools (llama-completion, llama-perplexity) write through an asynchronous logger
# that at this base is never flushed at exit (common/log.cpp, upstream issue 22142): a run can end
# with exit 0 and the tail of its output missing. Such a run is run again (every log kept), up to
# ATTEMPTS times, rather than read, so a lost tail is never reported as a difference.
ATTEMPTS = 3


def _run_whole(
    bundle: Bundle,
    name: str,
    argv: list,
    finished,
    what: str,
    *,
    timeout: float,
    logs: list[str],
    separate_stderr: bool = False,
) -> tuple[proc.Completed | None, str, Path]:
    """_run_logged until `finished(log text)` (the tool's closing lines are in the log)."""
    for attempt in range(1, ATTEMPTS + 1):
        done, why, log = _run_logged(
            bundle,
            name + (f"-try{attempt}" if attempt > 1 else ""),
            argv,
            timeout=timeout,
            separate_stderr=separate_stderr,
        )
        logs.append(bundle.rel(log))
        if why or done is None or finished(log.read_text(errors="replace")):
            return done, why, log
    return (
        None,
        f"{Path(str(argv[0])).name}'s output was cut short in {ATTEMPTS} runs (no {what}; llama.cpp's logger is not flushed at exit)",
        log,
    )


def _generate(
    bundle: Bundle,
    b: Bins,
    model: Path,
    prompt_file: Path,
    n_predict: int,
    ctx: int,
    type_k: str,
    type_v: str,
    tag: str,
    timeout: float,
    logs: list[str],
) -> tuple[str | None, str, str, int | None]:
    """One greedy generation; complete when its log holds the closing `common_perf_print:` lines."""
    argv = [
        b.exe("llama-completion"),
        "-m",
        model,
        "-f",
        prompt_file,
        "-n",
        str(n_predict),
        "--temp",
        "0",
        "-s",
        "0",
        "-c",
        str(ctx),
        "-fa",
        "on",
        "-ctk",
        type_k,
        "-ctv",
        type_v,
        "-no-cnv",
        "--no-display-prompt",
        "--ignore-eos",
        "-ngl",
        "99",
    ]
    done, why, log = _run_whole(
        bundle,
        f"gen-{tag}-{b.variant}",
        argv,
        parse.completion_finished,
        "closing common_perf_print lines",
        timeout=timeout,
        logs=logs,
        separate_stderr=True,
    )
    if why or done is None:
        return None, why, bundle.rel(log), None
    m = _PROMPT_TOKENS.search(log.read_text(errors="replace"))
    text = done.stdout.rstrip("\n")
    if not text.strip():
        return None, "llama-completion generated no text", bundle.rel(log), None
    return text, "", bundle.rel(log), int(m.group(1)) if m else None


def _first_diff(a: str, b: str) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


_KLD = {
    "mean": re.compile(r"Mean\s+KLD:\s+([-\d.eE+]+)"),
    "max": re.compile(r"Maximum KLD:\s+([-\d.eE+]+)"),
    "p99": re.compile(r"99\.0%\s+KLD:\s+([-\d.eE+]+)"),
    "same_top_p": re.compile(r"Same top p:\s+([-\d.eE+]+)"),
}


def parse_kld(text: str, source: str) -> dict[str, float]:
    out = {}
    for k, rx in _KLD.items():
        m = rx.search(text)
        if m:
            out[k] = float(m.group(1))
    if "mean" not in out:
        raise ParseError(f"{source}: no 'Mean KLD:' line in llama-perplexity --kl-divergence output")
    return out


def run_numerics(
    bundle: Bundle,
    bins: list[Bins],
    *,
    model: Path,
    prompts: tuple[str, ...],
    depths: tuple[int, ...],
    n_predict: int,
    type_k: str,
    type_v: str,
    kl_ctx: int = 512,
    kl_chunks: int = 4,
    timeout: float = 900,
) -> Step:
    t0 = time.monotonic()
    work = bundle.path / "numerics"
    work.mkdir(exist_ok=True)
    gens: dict[str, dict[tuple[int, int], tuple[str | None, str, str]]] = {}
    logs: list[str] = []
    for d in depths:
        for pi, prompt in enumerate(prompts):
            text = prompt if d == 0 else long_prompt(d, prompt) + "\n" + prompt
            pf = work / f"prompt-d{d}-p{pi}.txt"
            pf.write_text(text)
            ctx = len(text) + n_predict + 512
            for b in bins:
                gens.setdefault(b.variant, {})[(d, pi)] = _generate(
                    bundle, b, model, pf, n_predict, ctx, type_k, type_v, f"d{d}-p{pi}", timeout, logs
                )
    # KL divergence against base over a fixed text
    kl_text = work / "kl.txt"
    kl_text.write_text(long_prompt(kl_ctx * kl_chunks * 6, " ".join(prompts)))
    base_logits = work / "base-logits.bin"
    kld: dict[str, dict | None] = {}
    base = next((b for b in bins if b.variant == "base"), None)
    if base is not None:
        common = [
            "-f",
            kl_text,
            "-c",
            str(kl_ctx),
            "--chunks",
            str(kl_chunks),
            "-fa",
            "on",
            "-ctk",
            type_k,
            "-ctv",
            type_v,
            "-ngl",
            "99",
        ]
        done, why, log = _run_whole(
            bundle,
            "kld-base",
            [base.exe("llama-perplexity"), "-m", model, *common, "--kl-divergence-base", base_logits],
            lambda s: "Final estimate: PPL" in s,
            "'Final estimate' line",
            timeout=timeout,
            logs=logs,
        )
        if not why:
            for b in bins:
                if b is base:
                    continue
                done, why2, log = _run_whole(
                    bundle,
                    f"kld-{b.variant}",
                    [
                        b.exe("llama-perplexity"),
                        "-m",
                        model,
                        *common,
                        "--kl-divergence-base",
                        base_logits,
                        "--kl-divergence",
                    ],
                    lambda s: "Same top p:" in s,
                    "'Same top p' line",
                    timeout=timeout,
                    logs=logs,
                )
                try:
                    kld[b.variant] = (
                        {**parse_kld(done.stdout if done else "", str(log)), "log": bundle.rel(log)}
                        if not why2
                        else {"error": why2, "log": bundle.rel(log)}
                    )
                except ParseError as e:
                    kld[b.variant] = {"error": str(e), "log": bundle.rel(log)}
        base_logits.unlink(missing_ok=True)  # large, and derivable
    pairs = []
    if base is not None:
        for b in bins:
            if b is base:
                continue
            gl = []
            for (d, pi), (ta, why_a, la, ntok) in sorted(gens["base"].items()):
                tb, why_b, lb, _ = gens[b.variant][(d, pi)]
                if ta is None or tb is None:
                    gl.append(
                        {"depth": d, "prompt": pi, "identical": None, "error": why_a or why_b, "log_a": la, "log_b": lb}
                    )
                    continue
                fd = _first_diff(ta, tb)
                gl.append(
                    {
                        "depth": d,
                        "prompt_tokens": ntok,
                        "prompt": pi,
                        "identical": fd is None,
                        "first_diff_char": fd,
                        "sha256_a": hashlib.sha256(ta.encode()).hexdigest(),
                        "sha256_b": hashlib.sha256(tb.encode()).hexdigest(),
                        "log_a": la,
                        "log_b": lb,
                    }
                )
            ok = [g["identical"] for g in gl if g["identical"] is not None]
            pairs.append(
                {
                    "a": base.variant,
                    "b": b.variant,
                    "identical": bool(ok) and all(ok),
                    "generations": gl,
                    "kld": kld.get(b.variant),
                }
            )
    errors = [g.get("error") for p in pairs for g in p["generations"] if g.get("error")]
    return Step(
        name="numerics",
        status=Status.ERROR if errors else Status.OK,
        reason="; ".join(sorted(set(errors))),
        seconds=round(time.monotonic() - t0, 1),
        logs=logs,
        data={"pairs": pairs, "depths": list(depths), "prompts": list(prompts), "n_predict": n_predict},
    )
