"""The config-read trace of patches/local/0011 (issue 37): the environment and arguments of bench:decode's and
numerics' processes with and without the patch in the recipe, and the reads attributed to llama-bench's tests.

The stderr the tests parse is llama-bench's REAL recorded `--progress` stderr (tests/fixtures/bases/0.3.36/
lb-matrix-pp.stderr.txt) with trace lines inserted (tests/unit/trace_probe.py): the trace lines' format is the
patch's own (its fprintf), not recorded from a GPU run yet (no GPU here)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from patchkit.measure import config_trace, decode, decode_args, numerics
from patchkit.recipe import load_recipe
from patchkit.results import Bundle
from tests.unit import trace_probe as probe

ROOT = Path(__file__).resolve().parents[2]
BASES = ROOT / "tests" / "fixtures" / "bases"
USAGE = (BASES / "0.3.36" / "lb-help.txt").read_text()
ONE_ROUND = decode.DecodeTiming(min_rounds=1, max_rounds=1, max_noise=0.0, max_seconds=0.0)
K8 = {"DKQ": 256, "DV": 256, "ncols": 8, "table": "ampere"}
K16 = {**K8, "ncols": 16}


def _series(with_patch: bool = True):
    """The default recipe's series with 0011 listed as local (as a recipe lists it), or without it. The default
    recipe does not list it yet: with it, an integration test's compile check changed (docs/decode-matrix.md)."""
    series = [
        p for p in load_recipe(str(ROOT / "recipes" / "default.toml")).series if Path(p.file).name != config_trace.PATCH
    ]
    if not with_patch:
        return series
    local = next(p for p in series if p.local)
    return [*series, dataclasses.replace(local, file=f"patches/local/{config_trace.PATCH}", id="fattn-config-trace")]


def test_0011_is_a_local_patch_that_prints_the_parsed_line():
    (p,) = [p for p in _series() if Path(p.file).name == config_trace.PATCH]
    text = (ROOT / p.file).read_text()
    assert p.local and config_trace.ENV in text
    # the patch's own fprintf format, filled in, is what the parser reads
    fmt = '"ggml_cuda: fattn mma config read: DKQ=%d DV=%d ncols=%d table=%s\\n"'
    assert fmt in text
    assert config_trace.parse_key(probe.trace_line((256, 256, 8))) == K8


def test_the_variable_and_progress_only_where_the_recipe_lists_0011_and_the_build_is_cuda():
    on = config_trace.tracing(_series(), "cuda", [USAGE])
    assert on.on and on.progress and on.env() == {config_trace.ENV: "1"} and on.bench_args() == ("--progress",)
    off = config_trace.tracing(_series(False), "cuda", [USAGE])
    assert not off.on and off.env() == {config_trace.ENV: ""} and off.bench_args() == ()
    assert "does not list patches/local/0011" in off.why
    cpu = config_trace.tracing(_series(), "cpu")
    assert not cpu.on and cpu.env() == {config_trace.ENV: ""} and "on the cpu backend" in cpu.why
    # every base's llama-bench lists --progress; a tool without it: traced, a read counts for each cell
    assert all(
        config_trace.tracing(_series(), "cuda", [(b / "lb-help.txt").read_text()]).progress for b in BASES.iterdir()
    )
    bare = "\n".join(x for x in USAGE.splitlines() if "--progress" not in x)
    t = config_trace.tracing(_series(), "cuda", [USAGE, bare])
    assert t.on and not t.progress and t.bench_args() == () and "no --progress" in t.why


def test_reads_fall_in_the_test_whose_starting_line_precedes_them():
    recs = list(range(6))
    per = config_trace.reads_by_test(probe.stderr_for(recs, trace=True), 6)
    # the recorded tests' micro-batches are 16, 16, 4, 4, 1, 1 (depths 0 and 256 each)
    assert per == [[K16], [K16], [K8], [K8], [K16], [K16]]
    # no trace (a binary without 0011, the variable unset): nothing is known of any test's reads, not "no row"
    assert config_trace.reads_by_test(probe.stderr_for(recs, trace=False), 6) == [None] * 6
    # without --progress (or before the first test's line) a line cannot be placed: it counts for every test
    assert config_trace.reads_by_test(probe.stderr_for(recs, trace=True, progress=False), 6) == [[K16, K8]] * 6


def test_a_test_without_the_trace_on_line_is_untraced_even_with_reads_around_it():
    recs = list(range(6))
    lines = probe.stderr_for(recs, trace=True).splitlines()
    # the second test's `trace: on` line lost (its stderr cut, say): its reads are unknown, the others' stand
    second = [i for i, x in enumerate(lines) if x.startswith("ggml_cuda: fattn mma config trace: on")][1]
    per = config_trace.reads_by_test("\n".join(lines[:second] + lines[second + 1 :]), 6)
    assert per == [[K16], None, [K8], [K8], [K16], [K16]]
    # the patch's own format for that line, as printed (its fprintf), is the one parsed
    text = (ROOT / "patches" / "local" / config_trace.PATCH).read_text()
    assert '"ggml_cuda: fattn mma config trace: on (backend instance %u)\\n"' in text
    assert config_trace.traced(probe.ON.format(n=7)) and not config_trace.traced(probe.trace_line((256, 256, 8)))
    assert config_trace.reads_by_test(probe.stderr_for(recs, trace=True, on=False), 6) == [None] * 6


def test_a_key_reads_a_row_when_its_shared_columns_are_equal():
    rows = [{"file": "f", "macro": "M", "DKQ": 256, "DV": 256, "ncols": 8, "nthreads": 128, "nbatch_fa": 64}]
    assert config_trace.hits([K8, K16], rows) == [K8]  # the table is no column: turing falls back to ampere's rows
    assert config_trace.hits([K16], rows) == []


def _decode(
    tmp_path: Path, tracing: config_trace.Tracing, name: str = "r1", plan=None, head: str = "h1"
) -> tuple[Bundle, dict, dict]:
    """bench:decode through its runner on the stand-in (base and +0001, +0001 at `head`), recorded as run `name`."""
    bins = [decode.Bins(variant=v, dir=probe.install(tmp_path / "bin" / v), key=v) for v in ("base", "+0001")]
    meta = {"variants": [{"name": "base", "head": "h0"}, {"name": "+0001", "head": head}]}
    b = Bundle.create(tmp_path / "runs", recipe="seed-fattn", run_id=name, meta=meta)
    kw = {"type_k": "q4_0", "type_v": "q4_0", "repetitions": 2, "threads": 0, "ngl": 0}
    argv = decode_args.decode_args(
        tmp_path / "m.gguf", depths=(0, 256), n_prompt=(16,), n_gen=(0,), ubatch=(16, 4, 1), **kw,
        extra=tracing.bench_args(),
    )  # fmt: skip
    step = decode.run_decode(
        b, bins, model=tmp_path / "m.gguf", model_info={}, argvs=[argv], timing=ONE_ROUND, tracing=tracing, plan=plan
    )
    b.record(step)
    b.save()
    return b, step.data or {}, {v: probe.calls(tmp_path / "bin" / v) for v in ("base", "+0001")}


def test_decode_with_0011_sets_the_variable_passes_progress_and_stores_each_cells_reads(tmp_path):
    t = config_trace.tracing(_series(), "cuda", [USAGE])
    _, d, calls = _decode(tmp_path, t)
    every = calls["base"] + calls["+0001"]
    assert len(every) == 3 and all(c["trace"] == "1" and "--progress" in c["argv"] for c in every)  # base#2 too
    reads = {(r["variant"], r["ident"][3], r["ident"][5]): r["keys"] for r in d["config_reads"]}
    assert len(reads) == 18  # 3 arms x 6 cells
    for arm in ("base", "base#2", "+0001"):
        for depth in (0, 256):
            assert reads[(arm, depth, 4)] == [K8] and reads[(arm, depth, 16)] == reads[(arm, depth, 1)] == [K16]
    assert "rows_scope" not in d  # not a --changed run


def test_decode_without_0011_sets_the_variable_empty_and_stores_no_reads(tmp_path):
    t = config_trace.tracing(_series(False), "cuda", [USAGE])
    _, d, calls = _decode(tmp_path, t)
    every = calls["base"] + calls["+0001"]
    assert len(every) == 3 and all(c["trace"] == "" and "--progress" not in c["argv"] for c in every)
    assert "config_reads" not in d and len(d["rows"]) == 12


def _numerics(tmp_path: Path, tracing: config_trace.Tracing) -> tuple[dict, list[dict]]:
    bins = [decode.Bins(variant=v, dir=probe.install(tmp_path / "bin" / v), key=v) for v in ("base", "+0001")]
    b = Bundle.create(tmp_path / "runs", recipe="seed-fattn", run_id="n1", meta={})
    step = numerics.run_numerics(
        b, bins, model=tmp_path / "m.gguf", prompts=("p",), depths=(0,), n_predict=4, type_k="q4_0", type_v="q4_0",
        tracing=tracing,
    )  # fmt: skip
    return step.data or {}, probe.calls(tmp_path / "bin" / "base") + probe.calls(tmp_path / "bin" / "+0001")


def test_numerics_with_0011_sets_the_variable_for_its_processes_and_stores_each_process_reads(tmp_path):
    d, calls = _numerics(tmp_path, config_trace.tracing(_series(), "cuda", [USAGE]))
    assert {c["tool"] for c in calls} == {"llama-completion", "llama-perplexity"} and len(calls) == 4
    assert all(c["trace"] == "1" for c in calls)
    assert all(r["traced"] for r in d["config_reads"])  # each process said the trace was on
    got = {(r["variant"], Path(r["log"]).name): r["keys"] for r in d["config_reads"]}
    assert got == {
        ("base", "gen-d0-p0-base.log"): [K8],
        ("+0001", "gen-d0-p0-+0001.log"): [K8],
        ("base", "kld-base.log"): [K16],
        ("+0001", "kld-+0001.log"): [K16],
    }


def test_numerics_without_0011_sets_the_variable_empty(tmp_path):
    d, calls = _numerics(tmp_path, config_trace.tracing(_series(False), "cuda", [USAGE]))
    assert len(calls) == 4 and all(c["trace"] == "" for c in calls) and "config_reads" not in d
