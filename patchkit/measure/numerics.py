"""Step `numerics`: greedy generations compared with base (first differing character), KL divergence."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from patchkit import backends, parsers, proc
from patchkit.errors import ParseError
from patchkit.measure.decode import decode_model
from patchkit.measure.tool import Bins, Built, run_logged
from patchkit.options import RunOptions
from patchkit.progress import Progress
from patchkit.results import Bundle, Status, Step

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
        done, why, log = run_logged(
            bundle,
            name + (f"-try{attempt}" if attempt > 1 else ""),
            argv,
            timeout=timeout,
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
        str(backends.ALL_LAYERS),
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
    )
    if why or done is None:
        return None, why, bundle.rel(log), None
    ntok = parsers.prompt_tokens(proc.read_both(log))
    text = done.stdout.rstrip("\n")
    if not text.strip():
        return None, "llama-completion generated no text", bundle.rel(log), None
    return text, "", bundle.rel(log), ntok


def _first_diff(a: str, b: str) -> int | None:
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
) -> dict[str, dict[tuple[int, int], tuple[str | None, str, str, int | None]]]:
    """Every (depth, prompt) greedy generation of every variant, keyed by variant then (depth, prompt)."""
    gens: dict[str, dict[tuple[int, int], tuple[str | None, str, str, int | None]]] = {}
    for d in depths:
        for pi, prompt in enumerate(prompts):
            text = prompt if d == 0 else long_prompt(d, prompt) + "\n" + prompt
            pf = work / f"prompt-d{d}-p{pi}.txt"
            pf.write_text(text)
            ctx = len(text) + n_predict + 512
            for b in bins:
                bar.update(1, f"generation d{d} p{pi} {b.variant}")
                gens.setdefault(b.variant, {})[(d, pi)] = _generate(
                    bundle, b, model, pf, n_predict, ctx, type_k, type_v, f"d{d}-p{pi}", timeout, logs
                )
    return gens


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
    bundle: Bundle, b: Bins, model: Path, common: list, base_logits: Path, timeout: float, logs: list[str]
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
) -> dict[str, dict | None]:
    """Base logits over the fixed text, then each other variant's KL divergence against them."""
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
    )
    if why:  # no base logits: no variant's KL divergence, and why
        kld = {b.variant: {"error": f"base: {why}", "log": bundle.rel(log)} for b in bins if b is not base}
    else:
        for b in bins:
            if b is base:
                continue
            bar.update(1, f"KL divergence {b.variant}")
            kld[b.variant] = _kld_variant(bundle, b, model, common, base_logits, timeout, logs)
    base_logits.unlink(missing_ok=True)  # large, and derivable
    return kld


def _compare_pair(
    base: Bins,
    b: Bins,
    gens: dict[str, dict[tuple[int, int], tuple[str | None, str, str, int | None]]],
    kld: dict[str, dict | None],
) -> dict:
    """Variant b's generations compared with base's (first differing character), with its KL divergence."""
    gl = []
    for (d, pi), (ta, why_a, la, ntok) in sorted(gens["base"].items()):
        tb, why_b, lb, _ = gens[b.variant][(d, pi)]
        if ta is None or tb is None:
            gl.append({"depth": d, "prompt": pi, "identical": None, "error": why_a or why_b, "log_a": la, "log_b": lb})
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
    return {
        "a": base.variant,
        "b": b.variant,
        "identical": bool(ok) and all(ok),
        "generations": gl,
        "kld": kld.get(b.variant),
    }


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
    logs: list[str] = []
    n_gen = len(depths) * len(prompts) * len(bins)
    bar = Progress("numerics", total=n_gen + len(bins), unit="run", what=f"{n_gen} generations, {len(bins)} KL runs")
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
    )
    # KL divergence against base over a fixed text
    kl_text = work / "kl.txt"
    kl_text.write_text(long_prompt(kl_ctx * kl_chunks * 6, " ".join(prompts)))
    kld: dict[str, dict | None] = {}
    base = next((b for b in bins if b.variant == "base"), None)
    if base is not None:
        common = _kld_args(kl_text, kl_ctx, kl_chunks, type_k, type_v)
        kld = _kl_divergences(bundle, bins, base, work, bar, logs, model=model, common=common, timeout=timeout)
    bar.close()
    pairs = [_compare_pair(base, b, gens, kld) for b in bins if b is not base] if base is not None else []
    errors = [g.get("error") for p in pairs for g in p["generations"] if g.get("error")]
    return Step(
        name="numerics",
        status=Status.ERROR if errors else Status.OK,
        reason="; ".join(sorted(set(errors))),
        seconds=round(time.monotonic() - t0, 1),
        logs=logs,
        data={"pairs": pairs, "depths": list(depths), "prompts": list(prompts), "n_predict": n_predict},
    )


def step(built: Built, opts: RunOptions, name: str) -> Step:
    n = opts.numerics
    if (skip := built.nothing_to_compare(name)) is not None:
        return skip
    extra = built.ctx.recipe.numerics.model
    path, info = decode_model(built.ctx, opts.decode.model, backend=built.backend, extra=extra)
    step = run_numerics(
        built.bundle,
        built.measured,
        model=path,
        prompts=n.prompts,
        depths=n.depths,
        n_predict=n.n_predict,
        type_k=opts.decode.type_k,
        type_v=opts.decode.type_v,
        kl_ctx=n.kl_ctx,
        kl_chunks=n.kl_chunks,
    )
    step.data["model"] = info  # which model the comparisons ran on (its own with [numerics] model)
    return step


def inputs(built: Built, opts: RunOptions, name: str) -> dict:
    n = opts.numerics
    out = {"depths": n.depths, "prompts": n.prompts, "n_predict": n.n_predict, "model": opts.decode.model}
    if built.ctx.recipe.numerics.model and not opts.decode.model:  # its own synthetic model: other results
        out["model_overrides"] = dict(built.ctx.recipe.numerics.model)
    return out
