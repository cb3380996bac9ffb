"""examples/cpu-fa-gemm-revert (PROVENANCE.md there): a real CPU change whose numbers move, run end to end on the
CPU (issue 36). What its committed run shows, read from its results.json, raw logs and report."""

from __future__ import annotations

import json
from pathlib import Path

from patchkit.measure.numerics import NumericsData
from patchkit.results.data.decode import DecodeData

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cpu-fa-gemm-revert"
RUN = EXAMPLE / "run"
VARIANT = "+revert-19422"
FLOOR_MAX = 5e-05  # the largest KLD a same-code pair has shown (llama-perplexity's 16-bit storage of base's values)


def _steps() -> dict:
    return json.loads((RUN / "results.json").read_text())["steps"]


def test_its_numerics_move_after_a_real_text_prefix_and_not_on_a_short_prompt_alone():
    n = NumericsData.from_dict(_steps()["numerics"]["data"], "numerics")
    [pair] = n.pairs
    assert (pair.a, pair.b, pair.identical) == ("base", VARIANT, False)
    at = {d: [g for g in pair.generations if g.depth == d] for d in (0, 256)}
    # a prompt alone is under the tiled path's 32 query rows on both: that path is not taken, the text is the same
    assert len(at[0]) == 3 and all(g.identical for g in at[0]) and all(g.prompt_tokens < 32 for g in at[0])
    moved = [g for g in at[256] if g.identical is False]
    assert moved and all(g.first_diff_char is not None and g.first_diff_token is not None for g in moved)
    assert all((RUN / g.log_a).is_file() and (RUN / g.log_b).is_file() for g in pair.generations)
    assert pair.kld.max > FLOOR_MAX and pair.kld.mean > 0 and (RUN / pair.kld.log).is_file()
    assert n.model["label"] == "Gemma 3 270m Q4_K_M" and n.model["synthetic"] is False


def test_its_matrix_has_three_micro_batches_at_two_depths_and_upstreams_script_shows_them():
    d = DecodeData.from_dict(_steps()["bench:decode"]["data"], "bench:decode")
    pp = {(r.variant, r.n_ubatch, r.depth) for r in d.rows if r.test.startswith("pp64")}
    assert pp == {(v, ub, dep) for v in ("base", VARIANT) for ub in (16, 32, 64) for dep in (0, 512)}
    assert all((RUN / log).is_file() for r in d.rows for log in r.logs)
    assert all("gemma" not in r.model_type for r in d.rows) and d.real.model["label"] == "Gemma 3 270m Q4_K_M"
    table = (EXAMPLE / "compare-llama-bench.txt").read_text()
    assert "Microbatch size" in table and "gemma3 270M Q4_K_M" in table


def test_its_report_says_which_model_each_table_used_and_that_the_text_moved():
    md = (RUN / "report.md").read_text()
    assert f"`base` vs `{VARIANT}`: not bit-identical" in md
    assert "Model: Gemma 3 270m Q4_K_M" in md and "**Decode on Gemma 3 270m Q4_K_M**" in md
    assert "Model: synthetic llama, 2 layers" in md
