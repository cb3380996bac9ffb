"""patchkit.build.pool: the variants' builds at once, started by base midway (seeded first, in base's thread)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from patchkit.build import pool
from patchkit.errors import BuildError


@dataclass(frozen=True)
class _St:
    name: str


def test_a_failed_seed_fails_its_variant_not_the_caller_and_the_others_build():
    seeded, built = [], []
    lock = threading.Lock()

    def seed(st):
        if st.name == "+0001":
            raise BuildError("+0001: seed failed (copy)")
        seeded.append(st.name)

    def build(st, t0):
        with lock:
            built.append(st.name)
        return st.name

    p = pool.Pool(states=[_St("+0001"), _St("+0001+0002")], size=2, seed=seed, build=build)
    p.start(seeded=True)  # base's thread goes on: the failure is the variant's
    assert seeded == ["+0001+0002"]
    with pytest.raises(BuildError, match="seed failed"):
        p.finish()
    assert built == ["+0001+0002"]  # the other variant built all the same


def test_finish_waits_for_every_build_and_an_unstarted_pool_has_none():
    gate = threading.Event()
    p = pool.Pool(
        states=[_St("a"), _St("b")], size=1, seed=lambda st: None, build=lambda st, t0: gate.wait(5) and st.name
    )
    assert p.finish() == {}  # never started: nothing to wait for
    p.start()
    gate.set()
    assert p.finish() == {"a": "a", "b": "b"}
