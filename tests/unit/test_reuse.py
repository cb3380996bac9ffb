"""A finished deterministic tool run found by its key (patchkit.measure.reuse.Finished): one way for every step."""

from __future__ import annotations

from patchkit.measure import reuse
from patchkit.parsers.rawlog import REUSED
from patchkit.results import Bundle


def test_a_kept_log_is_taken_by_a_later_run_with_the_same_key_only(tmp_path):
    cache = tmp_path / "cache"
    first = Bundle.create(tmp_path / "runs", recipe="r", run_id="one", meta={})
    log = first.raw_log("test-base")
    log.write_text("$ test-backend-ops test\nOK\n")
    f = reuse.finished(cache, "buildkey", "test-backend-ops test", ("-b", "CPU"))
    assert f.take(first, "test-base") is None  # nothing kept yet: run the tool
    f.keep(first, log)
    later = Bundle.create(tmp_path / "runs", recipe="r", run_id="two", meta={})
    got = reuse.finished(cache, "buildkey", "test-backend-ops test", ("-b", "CPU")).take(later, "test-base")
    assert got is not None
    copied, origin = got
    assert origin == "one/raw/test-base.log" and copied.parent == later.raw
    assert copied.read_text() == f"$ test-backend-ops test\n{REUSED}one/raw/test-base.log\nOK\n"
    # another build, other arguments, no cache or no build key: never the same run
    assert reuse.finished(cache, "other", "test-backend-ops test", ("-b", "CPU")).take(later, "x") is None
    assert reuse.finished(cache, "buildkey", "test-backend-ops test", ("-b", "CUDA0")).take(later, "x") is None
    assert reuse.finished(None, "buildkey", "test-backend-ops test", ("-b", "CPU")).take(later, "x") is None
    assert reuse.finished(cache, "", "test-backend-ops test", ("-b", "CPU")).key == ""


def test_a_replayed_step_keeps_nothing(tmp_path):
    cache = tmp_path / "cache"
    b = Bundle.create(tmp_path / "runs", recipe="r", run_id="one", meta={})
    log = b.raw_log("x")
    log.write_text("$ ncu\n")
    b.replay = True
    reuse.finished(cache, "k", "ncu", ()).keep(b, log)
    assert not cache.exists()
