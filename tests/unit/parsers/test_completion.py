"""patchkit.parsers.completion on real llama-completion / llama-perplexity logs."""

from __future__ import annotations

import pytest

from patchkit.errors import ParseError
from patchkit.parsers import completion_finished, parse_kld, prompt_tokens

from .conftest import FIX, RAW, h200


def test_completion_finished_on_a_run_cut_short_at_exit():
    """Real CPU logs: llama.cpp's async logger lost the tail of one run (exit 0), not of the other."""
    cut = (FIX / "gen_cut_short.log").read_text()
    done = (FIX / "gen_finished.log").read_text()
    assert cut.rstrip().splitlines()[-1].endswith("# exit: 0, 0.5 s")  # exit 0, glued to the cut text
    assert completion_finished(cut) is False
    assert completion_finished(done) is True
    assert completion_finished("common_perf_print:        load time =      22.61 ms\n") is True
    assert completion_finished("the text mentions common_perf_print: inside a line\n") is False


@pytest.mark.parametrize(("depth", "prompt", "tokens"), [(0, 0, 36), (0, 1, 15), (16384, 0, 13039), (16384, 1, 13704)])
def test_prompt_tokens_and_finished_h200_generations(depth, prompt, tokens):
    # the numbers the H200 run stored in results.json (numerics, prompt_tokens)
    for variant in ("base", "+0001", "+0001+0002"):
        text = h200(f"gen-d{depth}-p{prompt}-{variant}.log")
        assert prompt_tokens(text) == tokens
        assert completion_finished(text)


def test_prompt_tokens_absent():
    assert prompt_tokens((FIX / "gen_cut_short.log").read_text()) is None
    assert prompt_tokens(h200("kld-base.log")) is None


@pytest.mark.parametrize("variant", ["+0001", "+0001+0002"])
def test_parse_kld_h200(variant):
    kld = parse_kld(h200(f"kld-{variant}.log"), "kld.log")
    assert kld == {"mean": -0.0, "max": 4e-06, "p99": 2e-06, "same_top_p": 100.0}


def test_parse_kld_without_kl_divergence_output():
    # the base run only saves the logits: no statistics
    with pytest.raises(ParseError, match=r"^raw/kld-base\.log: no 'Mean KLD:' line"):
        parse_kld(h200("kld-base.log"), "raw/kld-base.log")
    assert not (RAW / "kld-base.log").read_text().count("KLD")
