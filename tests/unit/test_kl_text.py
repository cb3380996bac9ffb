"""How much real text numerics' KL divergence gives llama-perplexity: at least 2 * ctx tokens, which the tool
needs ("you need at least 1024 tokens to evaluate perplexity with a context of 512"), whatever kl-chunks is.
Seen for real on 2026-12-05 (pinned base's CPU llama-perplexity, Gemma 3 270M Q4_K_M, -c 512 --chunks 1): the
text written for one chunk (about 950 tokens) was refused; the text written now for one chunk gave PPL 26.2."""

from __future__ import annotations

import pytest

from patchkit.measure.numerics import kl_text_chars, real_text

GEMMA_CPT = 4.285  # characters a token of pydoc_data.topics for Gemma 3 270M's tokenizer (llama-tokenize, that day)


@pytest.mark.parametrize("chunks", [1, 2, 4])
def test_the_kl_text_holds_twice_the_context_and_every_chunk(chunks):
    chars = kl_text_chars(512, chunks, GEMMA_CPT)
    tokens = chars / GEMMA_CPT  # the estimate the step itself makes
    assert tokens >= 2 * 512 * 1.2 and tokens >= chunks * 512 * 1.2  # with a margin for the tokenizer's spread
    text, _ = real_text()
    assert len(text) >= chars  # the real text has that much
