"""Older results.json files are read as today's in one place (patchkit.results.upgrade): steps of committed
examples in their older formats upgrade, and the report renders them as it renders today's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from patchkit import report
from patchkit.results import Bundle, Status, Step, read_results
from patchkit.results.upgrade import FORMAT, UPDATES, upgrade

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("*.png", "report*"))
    return dest


def _render(run: Path, fmt: str = "md") -> str:
    return report.render([Bundle.open(run)], fmt, None)


def test_every_format_has_its_update_and_new_steps_are_written_in_the_newest():
    assert sorted(UPDATES) == list(range(2, FORMAT + 1))
    assert Step(name="x", status=Status.OK).serialize()["format"] == FORMAT
    assert Step.load({"name": "x", "status": "ok", "format": 1}).format == 1


def test_a_step_of_the_oldest_example_stored_under_its_old_name_upgrades_and_renders(tmp_path):
    """examples/h200 (the oldest run): its bench:path as a run before the rename stored it (`kernel-path`,
    no format) reads as bench:path in today's format, and the report is the example's, byte for byte."""
    run = _copy(EXAMPLES / "h200", tmp_path / "h200")
    want_md, want_json = _render(run), _render(run, "json")
    data = json.loads((run / "results.json").read_text())
    old = {k: v for k, v in data["steps"]["bench:path"].items() if k != "format"}
    data["steps"] = {("kernel-path" if n == "bench:path" else n): s for n, s in data["steps"].items()}
    data["steps"]["kernel-path"] = {**old, "name": "kernel-path"}
    (run / "results.json").write_text(json.dumps(data))
    steps = read_results(run / "results.json")["steps"]
    assert "kernel-path" not in steps and steps["bench:path"]["name"] == "bench:path"
    assert steps["bench:path"]["format"] == FORMAT and steps["bench:path"]["data"] == old["data"]
    assert _render(run) == want_md and _render(run, "json") == want_json


def test_decode_rows_without_their_test_get_it_and_render(tmp_path):
    """examples/h200-recheck: a bench:decode written before rows carried `test` (format 1)."""
    run = _copy(EXAMPLES / "h200-recheck", tmp_path / "recheck")
    stored = json.loads((run / "results.json").read_text())["steps"]["bench:decode"]
    assert "format" not in stored and not any("test" in x for x in stored["data"]["rows"])
    rows = Bundle.open(run).step("bench:decode").data["rows"]
    want = [("tg" + str(x["n_gen"]) + (f" @ d{x['depth']}" if x["depth"] else "")) for x in stored["data"]["rows"]]
    assert [x["test"] for x in rows] == want
    md = _render(run)
    assert all(t in md for t in want)


def test_a_ratio_of_an_old_decode_step_takes_the_test_of_its_row():
    rows = [
        {"variant": "+0001", "depth": 0, "n_gen": 32, "type_k": "q4_0", "type_v": "q4_0"},
        {"variant": "+0001", "depth": 0, "n_gen": 32, "type_k": "f16", "type_v": "f16", "n_prompt": 512},
    ]
    vs = [{"variant": "+0001", "depth": 0, "type_k": "f16"}, {"variant": "+0001", "depth": 4096, "n_gen": 64}]
    steps = upgrade({"bench:decode": {"name": "bench:decode", "data": {"rows": rows, "vs_base": vs}}})
    d = steps["bench:decode"]["data"]
    assert [x["test"] for x in d["rows"]] == ["tg32", "pp512+tg32"]
    assert [v["test"] for v in d["vs_base"]] == ["pp512+tg32", "tg64 @ d4096"]
    # a step already in today's format, and one newer than this patchkit, are left as they are
    now = {"bench:decode": {"name": "bench:decode", "format": FORMAT, "data": {"rows": [{"variant": "b"}]}}}
    assert upgrade(now) == now
    newer = {"kernel-path": {"name": "kernel-path", "format": FORMAT + 1}}
    assert upgrade(newer) == newer


def test_a_step_under_both_names_keeps_each():
    both = {"kernel-path": {"name": "kernel-path", "data": {"a": 1}}, "bench:path": {"name": "bench:path", "data": {}}}
    got = upgrade(both)
    assert got["kernel-path"] == both["kernel-path"] and got["bench:path"]["data"] == {}


def test_a_decode_step_before_the_matrix_keeps_its_one_process_and_renders(tmp_path):
    """format 2 -> 3: `args` becomes `argvs` (one process), the markdown report is the example's byte for byte."""
    run = _copy(EXAMPLES / "h200-readme" / "cold", tmp_path / "cold")
    stored = json.loads((run / "results.json").read_text())["steps"]["bench:decode"]
    assert stored["format"] == 2 and "argvs" not in stored["data"]
    data = Bundle.open(run).step("bench:decode").data
    assert data["argvs"] == [stored["data"]["args"]] and "args" not in data
    (tmp_path / "o").mkdir()
    md = report.render([Bundle.open(run)], "md", tmp_path / "o")
    assert (EXAMPLES / "h200-readme" / "cold" / "report.md").read_text() == md
    assert "per-cell" not in md and "llama-bench arguments: `" in md
