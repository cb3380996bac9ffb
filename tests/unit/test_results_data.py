"""patchkit.results.data: typed step data, strict both ways, and docs/results-schema.md generated from it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from patchkit.errors import ResultsError
from patchkit.measure.test import TestData
from patchkit.results.data import ABSENT, schema
from patchkit.results.data.check import CheckData
from patchkit.results.data.kernel import KernelData
from patchkit.results.upgrade import upgrade

ROOT = Path(__file__).resolve().parents[2]
RUNS = sorted(p for d in ("examples", "tests/fixtures") for p in (ROOT / d).rglob("results.json"))


def _stored(kind: str) -> list[tuple[Path, dict]]:
    out = []
    for p in RUNS:
        steps = upgrade(json.loads(p.read_text()).get("steps") or {})
        out += [(p, s["data"]) for n, s in steps.items() if n == kind or (kind.endswith(":") and n.startswith(kind))]
    return out


@pytest.mark.parametrize("cls", schema.KINDS, ids=[k.KIND for k in schema.KINDS])
def test_every_committed_step_loads_and_dumps_back_unchanged(cls):
    stored = _stored(cls.KIND)
    assert stored, f"no committed run has a {cls.KIND} step"
    for p, d in stored:
        assert cls.from_dict(d, str(p)).to_dict() == d, p


def test_unknown_missing_and_wrong_keys_are_one_line_naming_the_step_and_key():
    p, d = next((p, d) for p, d in _stored("bench:kernel") if "cases" in d)
    where = f"{p}: step 'bench:kernel' data"
    bad = json.loads(json.dumps(d))
    bad["cases"][0]["variants"]["base"]["medain"] = 1.0
    with pytest.raises(ResultsError, match=r"data\.cases\[0\]\.variants\['base'\]: unknown key 'medain'"):
        KernelData.from_dict(bad, where)
    del bad["cases"][0]["variants"]["base"]["medain"], bad["cases"][0]["vs_base"]
    with pytest.raises(ResultsError, match=r"data\.cases\[0\]: missing key 'vs_base'$"):
        KernelData.from_dict(bad, where)
    for key, value, says in [
        ("noise_floor", "0.01", "expected a number, got str '0.01'"),
        ("rounds", 3.0, "expected an integer, got float 3.0"),
        ("rounds", True, "expected an integer, got bool True"),
        ("labels", "base", "expected a list, got str 'base'"),
        ("peak_bw_gbs", [1], "expected a number or null, got list"),
    ]:
        with pytest.raises(ResultsError, match=rf"data\.{key}: {says}") as e:
            KernelData.from_dict({**d, key: value}, where)
        assert "\n" not in str(e.value) and str(e.value).startswith(str(p))


def test_a_key_older_runs_did_not_write_stays_absent_a_stored_null_stays_null():
    old = KernelData.from_dict({"rounds": 3, "peak_bw_gbs": None}, "x")
    assert old.timing is ABSENT and old.peak_bw_gbs is None and not old.measured and old.case_params == []
    assert old.to_dict() == {"rounds": 3, "peak_bw_gbs": None}


def test_the_committed_schema_doc_is_generated_from_the_classes():
    doc = (ROOT / "docs" / "results-schema.md").read_text()
    assert schema.spliced(doc) == doc, "docs/results-schema.md differs: run python3 scripts/results_schema.py"
    for kind in schema.KINDS:
        for f, _ in kind.fields():
            assert f"| `{f.name}` |" in doc


@pytest.mark.parametrize("cls", schema.KINDS, ids=[k.KIND for k in schema.KINDS])
def test_a_steps_hooks_are_kept_as_each_hook_stored_them(cls):
    """The timing hooks' contract (issue 35 item 3): `hooks` -> {hook name: its own dict}, loaded and dumped back."""
    p, d = _stored(cls.KIND)[0]
    hooked = {**d, "hooks": {"clocks": {"samples": [{"before": {"sm": 1980}}], "note": ""}}}
    assert cls.from_dict(hooked, str(p)).to_dict() == hooked
    with pytest.raises(ResultsError, match=r"data\.hooks\['clocks'\]: expected an object, got list"):
        cls.from_dict({**d, "hooks": {"clocks": []}}, "data")


def test_the_check_and_test_steps_are_typed_to_their_leaves():
    """A mistyped leaf of a check item, a ptxas row or a test backend is one line naming it."""
    _, d = next((p, d) for p, d in _stored("check:") if d.get("kernels"))
    bad = json.loads(json.dumps(d))
    bad["kernels"][0]["registers"] = "96"
    with pytest.raises(ResultsError, match=r"data\.kernels\[0\]\.registers: expected an integer, got str"):
        CheckData.from_dict(bad, "data")
    _, t = _stored("test:")[0]
    bad = json.loads(json.dumps(t))
    v = next(iter(bad["variants"]))
    bad["variants"][v]["backends"][0]["failing"] = "x"
    with pytest.raises(
        ResultsError, match=rf"data\.variants\['{re.escape(v)}'\]\.backends\[0\]\.failing: expected a list"
    ):
        TestData.from_dict(bad, "data")
    assert TestData.from_dict(t, "data").variants[v].n_ok == t["variants"][v]["n_ok"]
