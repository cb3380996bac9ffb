"""llama.cpp's common tools (llama-completion, llama-perplexity): whether a log holds the closing lines,
the prompt size, and the KL-divergence statistics of `llama-perplexity --kl-divergence`."""

from __future__ import annotations

import re

from patchkit.parsers.common import err

_PERF_PRINT = re.compile(r"^[\d.]* ?[A-Z]? ?common_perf_print:", re.MULTILINE)
_PROMPT_TOKENS = re.compile(r"prompt eval time =\s+[\d.]+ ms /\s+(\d+) tokens")
_KLD = {
    "mean": re.compile(r"Mean\s+KLD:\s+([-\d.eE+]+)"),
    "max": re.compile(r"Maximum KLD:\s+([-\d.eE+]+)"),
    "p99": re.compile(r"99\.0%\s+KLD:\s+([-\d.eE+]+)"),
    "same_top_p": re.compile(r"Same top p:\s+([-\d.eE+]+)"),
}


def completion_finished(log_text: str) -> bool:
    """Whether a llama-completion log holds its closing `common_perf_print:` lines: written after the
    generated text through the same (first in, first out) logger, so their presence means none of
    the text was lost at exit."""
    return _PERF_PRINT.search(log_text) is not None


def prompt_tokens(log_text: str) -> int | None:
    """The prompt size in tokens from the first `prompt eval time = T ms / N tokens` line, if any."""
    m = _PROMPT_TOKENS.search(log_text)
    return int(m.group(1)) if m else None


def parse_kld(text: str, source: str) -> dict[str, float]:
    """mean, max, p99 and same_top_p (those printed) of `llama-perplexity --kl-divergence` output;
    ParseError when there is no 'Mean KLD:' line."""
    out = {}
    for k, rx in _KLD.items():
        m = rx.search(text)
        if m:
            out[k] = float(m.group(1))
    if "mean" not in out:
        raise err(source, None, "no 'Mean KLD:' line in llama-perplexity --kl-divergence output")
    return out
