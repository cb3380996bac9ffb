"""Step `numerics`: greedy generations compared with base (first differing character and token), KL divergence.

It runs on the real model when one is named ([model] package / path, patchkit.measure.model_package), else on
the synthetic one ([numerics] model). The text is real English available offline: the documentation topics the
Python standard library ships (`pydoc_data.topics`), the prefix of the long-depth generations and the text of
`llama-perplexity --kl-divergence`. The first differing token is where base's llama-tokenize splits the two
texts differently (the generated texts retokenized). What it stores is NumericsData (below).
"""

from __future__ import annotations

import hashlib
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from patchkit import backends, parsers, proc
from patchkit.errors import ParseError, PatchkitError
from patchkit.measure import config_trace, tool
from patchkit.measure import model as model_mod
from patchkit.measure.decode import decode_model, real_model
from patchkit.measure.kind import Resource, StepKind, one
from patchkit.measure.tool import Bins, Built, run_logged
from patchkit.options import RunOptions
from patchkit.progress import Progress
from patchkit.results import Bundle, Status, Step
from patchkit.results.data.numerics import Generation, Kld, NumericsData, PairResult
from patchkit.run import rowscope

# ---------------------------------------------------------------------------------------------
# Numerics: greedy generations compared, and KL divergence of logits against base


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
    env: dict[str, str] | None = None,
) -> tuple[proc.Completed | None, str, Path]:
    """_run_logged until `finished(log text)` (the tool's closing lines are in the log); `env`: more variables."""
    for attempt in range(1, ATTEMPTS + 1):
        done, why, log = run_logged(
            bundle,
            name + (f"-try{attempt}" if attempt > 1 else ""),
            argv,
            timeout=timeout,
            env=env,
            separate_stderr=separate_stderr,
        )
        logs.append(bundle.rel(log))
        if why or done is None or finished(proc.read_both(log)):
            return done, why, log
    return (
        None,
        f"{Path(str(argv[0])).name}'s output was cut short in {ATTEMPTS} runs "
        f"(no {what}; llama.cpp's logger is not flushed at exit)",
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
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> tuple[str | None, str, str, int | None]:
    """One greedy generation; complete when its log holds the closing `common_perf_print:` lines; `extra`:
    more options (tool.repack_args)."""
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
        str(backends.ALL_LAYERS),
        *extra,
    ]
    done, why, log = _run_whole(
        bundle,
        f"gen-{tag}-{b.variant}",
        argv,
        parsers.completion_finished,
        "closing common_perf_print lines",
        timeout=timeout,
        logs=logs,
        separate_stderr=True,
        env=env,
    )
    if why or done is None:
        return None, why, bundle.rel(log), None
    ntok = parsers.prompt_tokens(proc.read_both(log))
    text = done.stdout.rstrip("\n")
    if not text.strip():
        return None, "llama-completion generated no text", bundle.rel(log), None
    return text, "", bundle.rel(log), ntok


# ---------------------------------------------------------------------------------------------
# The real text, the prompts at depth, the tokens


def real_text() -> tuple[str, str]:
    """The documentation topics the standard library ships, in key order, and what they are."""
    try:
        from pydoc_data.topics import topics
    except ImportError as e:  # some distributions split it off the standard library
        raise PatchkitError(f"numerics: the standard library's pydoc_data (its real text) is missing: {e}") from None

    text = "\n\n".join(topics[k].strip() for k in sorted(topics))
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return text, f"pydoc_data.topics of Python {sys.version.split()[0]} ({len(text)} characters, sha256 {digest})"


def _tokens(bundle: Bundle, b: Bins, model: Path, file: Path, tag: str, logs: list[str]) -> list[int] | None:
    """base's llama-tokenize of a file (ids, no BOS), None if the tool is not built or failed."""
    if not (b.dir / "llama-tokenize").exists() and not bundle.replay:
        return None
    argv = [b.exe("llama-tokenize"), "-m", model, "-f", file, "--ids", "--no-bos", "--log-disable"]
    done, why, log = run_logged(bundle, f"tokenize-{tag}", argv, timeout=300, separate_stderr=True)
    logs.append(bundle.rel(log))
    if why or done is None:
        return None
    line = next((x for x in done.stdout.splitlines() if x.startswith("[")), "")
    try:
        return [int(x) for x in line.strip("[] \n").split(",") if x.strip()]
    except ValueError:
        return None


def _chars_per_token(bundle: Bundle, b: Bins, model: Path, text: str, work: Path, logs: list[str]) -> float:
    """How many characters of the text make a token for this model's tokenizer (1.0 if not measurable)."""
    sample = text[:20000]
    f = work / "sample.txt"
    f.write_text(sample)
    ids = _tokens(bundle, b, model, f, "sample", logs)
    return len(sample) / len(ids) if ids else 1.0


def kl_text_chars(kl_ctx: int, kl_chunks: int, cpt: float) -> int:
    """How much of the real text the KL divergence reads: enough for kl_chunks chunks of kl_ctx tokens at cpt
    characters a token (half as much again, for the tokenizer's spread), and for two chunks at least:
    llama-perplexity refuses a text of fewer than 2 * ctx tokens ("you need at least 1024 tokens to evaluate
    perplexity with a context of 512"), so `kl-chunks = 1` failed."""
    return int(kl_ctx * max(kl_chunks, 2) * cpt * 1.5) + 1000


def _first_diff(a: str | list, b: str | list) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _generate_all(
    bundle: Bundle,
    bins: list[Bins],
    work: Path,
    bar: Progress,
    logs: list[str],
    *,
    model: Path,
    prompts: tuple[str, ...],
    depths: tuple[int, ...],
    n_predict: int,
    type_k: str,
    type_v: str,
    timeout: float,
    prefix: str,
    cpt: float,
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    procs: int = 1,
) -> dict[str, dict[tuple[int, int], tuple[str | None, str, str, int | None]]]:
    """Every (depth, prompt) greedy generation of every variant, keyed by variant then (depth, prompt); at a
    depth the prompt follows about that many tokens of the real text; `procs` processes at once."""
    jobs = []
    for d in depths:
        for pi, prompt in enumerate(prompts):
            text = prompt if d == 0 else prefix[: int(d * cpt)] + "\n\n" + prompt
            pf = work / f"prompt-d{d}-p{pi}.txt"
            pf.write_text(text)
            ctx = d + max(256, len(prompt)) + n_predict + 256
            jobs += [(d, pi, b, pf, ctx) for b in bins]

    def one(job, mine: list[str]):
        d, pi, b, pf, ctx = job
        bar.update(1, f"generation d{d} p{pi} {b.variant}")
        return _generate(bundle, b, model, pf, n_predict, ctx, type_k, type_v, f"d{d}-p{pi}", timeout, mine, extra, env)

    gens: dict[str, dict[tuple[int, int], tuple[str | None, str, str, int | None]]] = {}
    for (d, pi, b, _pf, _ctx), got in zip(jobs, at_once(jobs, procs, one, logs), strict=True):
        gens.setdefault(b.variant, {})[(d, pi)] = got
    return gens


def at_once(jobs: list, procs: int, run, logs: list[str]) -> list:
    """`run(job, its_logs)` of every job, `procs` at once (threads, each waiting on its process); the results
    and the logs in the jobs' order, whichever finished first, so that a run's record does not depend on it."""

    def one(job):
        mine: list[str] = []
        return run(job, mine), mine

    if procs <= 1 or len(jobs) <= 1:
        done = [one(j) for j in jobs]
    else:
        with ThreadPoolExecutor(max_workers=procs) as pool:
            done = list(pool.map(one, jobs))
    for _, mine in done:
        logs.extend(mine)
    return [r for r, _ in done]


def _kld_args(kl_text: Path, kl_ctx: int, kl_chunks: int, type_k: str, type_v: str) -> list:
    """llama-perplexity's arguments shared by the base run and each variant's KL divergence run."""
    return [
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
        str(backends.ALL_LAYERS),
    ]


def _kld_variant(
    bundle: Bundle, b: Bins, model: Path, common: list, base_logits: Path, timeout: float, logs: list[str], env=None
) -> dict:
    """One variant's KL divergence against the base logits: its parsed figures, or an error, with its log."""
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
        separate_stderr=True,
        env=env,
    )
    try:
        return (
            {**parsers.parse_kld(proc.read_both(log) if done else "", str(log)), "log": bundle.rel(log)}
            if not why2
            else {"error": why2, "log": bundle.rel(log)}
        )
    except ParseError as e:
        return {"error": str(e), "log": bundle.rel(log)}


def _kl_divergences(
    bundle: Bundle,
    bins: list[Bins],
    base: Bins,
    work: Path,
    bar: Progress,
    logs: list[str],
    *,
    model: Path,
    common: list,
    timeout: float,
    env: dict[str, str] | None = None,
    procs: int = 1,
) -> dict[str, dict | None]:
    """Base logits over the fixed text, then each other variant's KL divergence against them (`procs` at once)."""
    base_logits = work / "base-logits.bin"
    kld: dict[str, dict | None] = {}
    bar.update(1, "KL divergence base")
    _done, why, log = _run_whole(
        bundle,
        "kld-base",
        [base.exe("llama-perplexity"), "-m", model, *common, "--kl-divergence-base", base_logits],
        lambda s: "Final estimate: PPL" in s,
        "'Final estimate' line",
        timeout=timeout,
        logs=logs,
        separate_stderr=True,
        env=env,
    )
    if why:  # no base logits: no variant's KL divergence, and why
        kld = {b.variant: {"error": f"base: {why}", "log": bundle.rel(log)} for b in bins if b is not base}
    else:

        def one(b: Bins, mine: list[str]) -> dict:
            bar.update(1, f"KL divergence {b.variant}")
            return _kld_variant(bundle, b, model, common, base_logits, timeout, mine, env)

        others = [b for b in bins if b is not base]
        kld = dict(zip((b.variant for b in others), at_once(others, procs, one, logs), strict=True))
    base_logits.unlink(missing_ok=True)  # large, and derivable
    return kld


def _token_diff(bundle: Bundle, base: Bins, model: Path, work: Path, tag: str, ta: str, tb: str, logs: list[str]):
    """The first differing token of two texts, each split by base's llama-tokenize (None if not measurable)."""
    ids = []
    for side, text in (("a", ta), ("b", tb)):
        f = work / f"out-{tag}-{side}.txt"
        f.write_text(text)
        ids.append(_tokens(bundle, base, model, f, f"{tag}-{side}", logs))
    return _first_diff(ids[0], ids[1]) if ids[0] is not None and ids[1] is not None else None


def _compare_pair(
    base: Bins,
    b: Bins,
    gens: dict[str, dict[tuple[int, int], tuple[str | None, str, str, int | None]]],
    kld: dict[str, dict | None],
    token_diff,
) -> PairResult:
    """Variant b's generations compared with base's (first differing character and token), with its KL divergence."""
    gl = []
    for (d, pi), (ta, why_a, la, ntok) in sorted(gens["base"].items()):
        tb, why_b, lb, _ = gens[b.variant][(d, pi)]
        if ta is None or tb is None:
            none = {"prompt_tokens": None, "identical": None, "first_diff_char": None, "first_diff_token": None}
            gl.append(
                Generation(
                    depth=d, prompt=pi, **none, sha256_a="", sha256_b="", log_a=la, log_b=lb, error=why_a or why_b
                )
            )
            continue
        fd = _first_diff(ta, tb)
        gl.append(
            Generation(
                depth=d,
                prompt=pi,
                prompt_tokens=ntok,
                identical=fd is None,
                first_diff_char=fd,
                first_diff_token=None if fd is None else token_diff(f"d{d}-p{pi}-{b.variant}", ta, tb),
                sha256_a=hashlib.sha256(ta.encode()).hexdigest(),
                sha256_b=hashlib.sha256(tb.encode()).hexdigest(),
                log_a=la,
                log_b=lb,
                error="",
            )
        )
    ok = [g.identical for g in gl if g.identical is not None]
    k = kld.get(b.variant)
    return PairResult(
        a=base.variant, b=b.variant, identical=bool(ok) and all(ok), generations=gl, kld=_kld(k) if k else None
    )


def _kld(k: dict) -> Kld:
    """A variant's KL divergence as stored: its figures (None where not measured), its log, the error."""
    figures = {f: k.get(f) for f in ("mean", "p99", "max", "same_top_p")}
    return Kld(**figures, log=k["log"], error=k.get("error", ""))


def _pairs(bundle: Bundle, bins: list[Bins], base: Bins, model: Path, work: Path, gens, kld, logs: list[str]) -> list:
    """Each variant against base: its generations (first differing character and token) and KL divergence."""

    def token_diff(tag: str, ta: str, tb: str) -> int | None:
        return _token_diff(bundle, base, model, work, tag, ta, tb, logs)

    return [_compare_pair(base, b, gens, kld, token_diff) for b in bins if b is not base]


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
    extra: tuple[str, ...] = (),
    tracing: config_trace.Tracing | None = None,
    procs: int = 1,
) -> Step:
    """Every variant's greedy generations and KL divergence against base; `extra`: more options for
    llama-completion and llama-perplexity (tool.repack_args); `tracing`: the config rows each process reads
    (patches/local/0011), stored per process; `procs`: processes at once (--numerics-procs; the record is the
    same whatever it is: patchkit.measure.numerics.at_once)."""
    tr = tracing or config_trace.Tracing()
    env = tr.env()
    t0 = time.monotonic()
    work = bundle.path / "numerics"
    work.mkdir(exist_ok=True)
    logs: list[str] = []
    n_gen = len(depths) * len(prompts) * len(bins)
    bar = Progress("numerics", total=n_gen + len(bins), unit="run", what=f"{n_gen} generations, {len(bins)} KL runs")
    base = next((b for b in bins if b.variant == "base"), None)
    text, text_source = real_text()
    cpt = _chars_per_token(bundle, base or bins[0], model, text, work, logs)
    gens = _generate_all(
        bundle,
        bins,
        work,
        bar,
        logs,
        model=model,
        prompts=prompts,
        depths=depths,
        n_predict=n_predict,
        type_k=type_k,
        type_v=type_v,
        timeout=timeout,
        prefix=text,
        cpt=cpt,
        extra=extra,
        env=env,
        procs=procs,
    )
    # KL divergence against base over the real text
    kl_text = work / "kl.txt"
    kl_text.write_text(text[: kl_text_chars(kl_ctx, kl_chunks, cpt)])
    kld: dict[str, dict | None] = {}
    if base is not None:
        common = [*_kld_args(kl_text, kl_ctx, kl_chunks, type_k, type_v), *extra]
        kld = _kl_divergences(
            bundle, bins, base, work, bar, logs, model=model, common=common, timeout=timeout, env=env, procs=procs
        )
    bar.close()
    pairs = _pairs(bundle, bins, base, model, work, gens, kld, logs) if base is not None else []
    errors = [g.error for p in pairs for g in p.generations if g.error]
    result = NumericsData(
        pairs=pairs, depths=list(depths), prompts=list(prompts), n_predict=n_predict, model={}, text=text_source
    )
    if tr.on:
        result.config_reads = config_trace.process_reads(bundle.path, logs, [b.variant for b in bins])
    return Step(
        name="numerics",
        status=Status.ERROR if errors else Status.OK,
        reason="; ".join(sorted(set(errors))),
        seconds=round(time.monotonic() - t0, 1),
        logs=logs,
        data=result.to_dict(),
    )


def numerics_model(built: Built, opts: RunOptions) -> tuple[Path, dict]:
    """The model numerics runs on and its description (with its label): the real one when one is named
    (--model-path, else --model-package: installed into the cache at first use), else --model, else the
    synthetic one with [numerics] model's keys."""
    if opts.model.path or opts.model.package:
        return real_model(built.ctx, opts)
    extra = built.ctx.recipe.numerics.model
    path, info = decode_model(built.ctx, opts.decode.model, backend=built.backend, extra=extra)
    if not info.get("synthetic"):
        info = model_mod.real_info(path)
    info["label"] = model_mod.label(info)
    return path, info


def step(built: Built, opts: RunOptions, name: str) -> Step:
    n = opts.numerics
    if (skip := built.nothing_to_compare(name)) is not None:
        return skip  # before the model: a run with nothing to compare installs nothing
    tracing = config_trace.of_step(built)
    plan = rowscope.numerics_of_step(built, tracing, name)
    bins = [b for b in built.measured if b.variant not in plan.left]
    if len(bins) < 2:
        return Step(name=name, status=Status.NOT_RUN, reason=plan.why, data=plan.data())
    path, info = numerics_model(built, opts)
    off, repack = tool.no_repack(built, "llama-perplexity")  # llama-completion takes the same common option
    extra = tuple(off)
    if repack:
        print(f"[{name}] {repack}")
        info["repack_off"] = repack  # said in the report with the model
    step = run_numerics(
        built.bundle,
        bins,
        model=path,
        prompts=n.prompts,
        depths=n.depths,
        n_predict=n.n_predict,
        type_k=opts.decode.type_k,
        type_v=opts.decode.type_v,
        kl_ctx=n.kl_ctx,
        kl_chunks=n.kl_chunks,
        extra=extra,
        tracing=tracing,
        procs=n.procs,
    )
    step.data["model"] = info  # which model the comparisons ran on
    if plan.why:
        step.data["rows_scope"] = plan.why
    if plan.carried:  # the variants left out: their earlier reads, for the next edit's run
        step.data["config_reads"] = [*(step.data.get("config_reads") or []), *plan.carried]
    return step


def inputs(built: Built, opts: RunOptions, name: str) -> dict:
    n = opts.numerics
    out = {"depths": n.depths, "prompts": n.prompts, "n_predict": n.n_predict, "model": opts.decode.model}
    if opts.model.path or opts.model.package:  # the real model: named, not read (inputs install nothing)
        out["real_model"] = opts.model.path or opts.model.package
    elif built.ctx.recipe.numerics.model and not opts.decode.model:  # its own synthetic model: other results
        out["model_overrides"] = dict(built.ctx.recipe.numerics.model)
    return out


# the kind, as the registry (patchkit.registry) lists it
STEP = StepKind(
    name="numerics",
    help="greedy generations and KL divergence against base",
    resource=Resource.GPU,
    names=one("numerics"),
    tools=("llama-completion", "llama-perplexity"),
    tables=("numerics",),
    model=True,
    run=step,
    inputs=inputs,
    data=NumericsData,
)
