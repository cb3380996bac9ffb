"""`--test-procs`: the split of the cases over processes (patchkit.measure.shards) and the merge of their
results, on real test-backend-ops output recorded on the H200 (tests/fixtures/test-procs)."""

from __future__ import annotations

import dataclasses
import gzip
import re
from pathlib import Path

from patchkit import proc
from patchkit.measure import shards
from patchkit.measure import test as t

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "test-procs"
CASE = re.compile(r"^\s+FLASH_ATTN_EXT\((.*)\): ", re.M)


class _Bundle:
    def rel(self, p: Path) -> str:
        return p.name


def _run(name: str) -> t._Process:
    text = gzip.decompress((FIX / f"{name}.log.gz").read_bytes()).decode()
    done = proc.Completed(argv=["test-backend-ops"], returncode=0, seconds=1.0, log=FIX / name, stdout=text)
    return t._Process(done, "", FIX / f"{name}.log")


def test_two_processes_give_the_results_of_one():
    one, one_cases = t._entry(_run("a"), _Bundle(), "CUDA0")
    parts = [t._entry(_run(n), _Bundle(), "CUDA0") for n in ("b1", "b2")]
    merged = t._merge([e for e, _ in parts])
    two_cases = {k: v for _, c in parts for k, v in c.items()}
    assert one.status == merged.status == "ok"
    assert one.n_ok == merged.n_ok == 3982 and merged.n_fail == 0
    assert two_cases == one_cases and len(one_cases) == 3981  # one name is listed twice by the suite
    [cuda] = [b for b in merged.backends if b.name == "CUDA0"]
    assert (cuda.tests_passed, cuda.tests_total, cuda.status) == (3982, 3982, "ok")


def test_a_failing_process_makes_the_variant_fail():
    ok, _ = t._entry(_run("b1"), _Bundle(), "CUDA0")
    bad = dataclasses.replace(ok, status="fail", reason="1 failing cases", n_ok=ok.n_ok - 1, n_fail=1)
    assert t._merge([ok, bad]).status == "fail" and t._merge([bad, ok]).reason == "1 failing cases"
    gone = dataclasses.replace(ok, status="error", reason="crashed (signal 11)")
    assert t._merge([ok, gone]).status == "error"


def test_split_selects_every_case_exactly_once():
    text = gzip.decompress((FIX / "a.log.gz").read_bytes()).decode()
    cases = CASE.findall(text)
    assert len(cases) > 5000  # supported or not, every case the suite lists
    for procs in (2, 3, 4):
        regexes = shards.split(cases, procs)
        assert len(regexes) == procs and all("hsk=" in r for r in regexes)
        hits = [sum(1 for r in regexes if re.search(r, c)) for c in cases]
        assert set(hits) == {1}
        sizes = [sum(1 for c in cases if re.search(r, c)) for r in regexes]
        assert max(sizes) < len(cases)  # a real split
    assert shards.split(cases, 1) == [] and shards.split(cases[:1], 2) == []
    assert shards.split(["a=1,b=[1,2]", "a=1,b=[2,3]"], 2) == []  # no plain parameter with 2 values


def test_a_process_keeps_the_suites_filter():
    args = t._shard_args(("-o", "FLASH_ATTN_EXT", "-p", "type_K=q4_0"), "(?:^|,)hsk=(?:64)(?:,|$)")
    assert args[:2] == ("-o", "FLASH_ATTN_EXT") and args.count("-p") == 1
    where = args[-1]
    assert re.search(where, "hsk=64,hsv=64,type_K=q4_0") and not re.search(where, "hsk=64,hsv=64,type_K=f16")
    assert not re.search(where, "hsk=640,hsv=64,type_K=q4_0")


def test_a_freed_slot_starts_the_next_variants_share(monkeypatch):
    """Two slots, two variants each split in two, the first share of each slow: the next variant's first
    share starts when a slot frees (the faster share ends), not when the whole variant has ended."""
    import threading
    import time

    events: list[tuple[str, str, float]] = []
    lock = threading.Lock()

    def one(bundle, b, name, args, backend, jobs, timeout, cache, bar):
        with lock:
            events.append(("start", name, time.monotonic()))
        time.sleep(0.6 if name.endswith("1of2") else 0.1)
        with lock:
            events.append(("end", name, time.monotonic()))
        return _run("b1" if name.endswith("1of2") else "b2")

    class Replay(_Bundle):
        replay = True

    class Bar:
        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def note(self, _):
            pass

        def said(self, _):
            pass

    monkeypatch.setattr(t, "_one_process", one)
    monkeypatch.setattr(t, "Progress", Bar)
    bins = [t.Bins(variant="base", dir=Path("/nonexistent/base")), t.Bins(variant="+0001", dir=Path("/nonexistent/p1"))]
    step = t.run_tests(
        Replay(), bins, suite="fa", args=("-o", "FLASH_ATTN_EXT"), backend="CUDA0", shards=["hsk=64", "hsk=128"]
    )
    at = {(kind, name): when for kind, name, when in events}
    assert at[("start", "test-fa-+0001-1of2")] < at[("end", "test-fa-base-1of2")]
    running = max(
        sum(1 for k, _, w in events if k == "start" and w <= x) - sum(1 for k, _, w in events if k == "end" and w <= x)
        for _, _, x in events
    )
    assert running == 2  # never more processes than slots
    assert step.status == "ok" and set(step.data["variants"]) == {"base", "+0001"}
