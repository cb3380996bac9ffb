import itertools
import math

import numpy as np
import pytest
from scipy import stats as st

from patchkit.measure import stats

FA = (
    "hsk=256,hsv=256,nh=4,nr23=[6,1],kv=32768,nb=1,mask=1,sinks=0,max_bias=0.000000,logit_softcap=0.000000,"
    "prec=f32,type_K=q4_0,type_V=q4_0,permute=[0,1,2,3],kv_view=1,v_is_view_of_k=0,n_kv_max=0"
)


def test_flash_attn_bytes_counts_k_v_at_cache_type_q_mask_and_output():
    k = v = 256 * 32768 * 4 * 18 / 32  # q4_0: 18 bytes per 32 values
    q = 4 * 256 * 1 * 4 * 6
    mask = 2 * 32768 * 1
    out = 4 * 256 * 1 * 4 * 6
    assert stats.flash_attn_bytes(FA) == pytest.approx(k + v + q + mask + out)
    f16 = stats.flash_attn_bytes(FA.replace("q4_0", "f16"))
    assert f16 > 3.5 * (k + v)  # f16 is 2 bytes a value, q4_0 0.5625


def test_flash_attn_bytes_unknown_type_is_none():
    assert stats.flash_attn_bytes(FA.replace("type_K=q4_0", "type_K=iq9_x")) is None
    assert stats.op_bytes("MUL_MAT", "m=1") is None


# ---------------------------------------------------------------------------------------------
# The median's order-statistic interval


def test_median_interval_of_three_is_min_max_at_75_percent():
    s = stats.summarize([10.0, 12.0, 11.0])
    assert (s.n, s.median, s.ci_low, s.ci_high) == (3, 11.0, 10.0, 12.0)
    assert s.ci_level == pytest.approx(0.75)  # 1 - 2 * 0.5**3


def test_median_interval_takes_the_inner_order_statistics_when_they_still_cover():
    xs = [float(x) for x in (9, 1, 8, 2, 7, 3, 6, 4, 5)]
    lo, hi, cover = stats.median_interval(xs)
    assert (lo, hi) == (2.0, 8.0)  # x_(2), x_(8)
    assert cover == pytest.approx(1 - 2 * (1 + 9) / 512)  # 96.1 %
    assert stats.median_interval([5.0, 1.0, 3.0, 2.0, 4.0]) == (1.0, 5.0, pytest.approx(1 - 2 / 32))
    assert stats.median_interval([1.0]) == (1.0, 1.0, 0.0)


def test_summary_is_deterministic_and_not_widened():
    s1 = stats.summarize([10.0, 12.0, 11.0, 10.5, 30.0])
    assert s1 == stats.summarize([10.0, 12.0, 11.0, 10.5, 30.0])
    assert s1.median == 11.0 and s1.min == 10.0 and s1.max == 30.0
    assert (s1.ci_low, s1.ci_high, s1.ci_level) == (10.0, 30.0, pytest.approx(0.9375))
    assert set(s1.to_dict()) == {"n", "median", "min", "max", "ci_low", "ci_high", "ci_level"}
    with pytest.raises(ValueError):
        stats.summarize([])


# ---------------------------------------------------------------------------------------------
# The Hodges-Lehmann ratio and its exact Mann-Whitney interval


def test_ratio_three_against_three_is_the_pairwise_range_at_90_percent():
    ref, new = [100.0, 102.0, 101.0], [90.0, 93.0, 91.0]
    r = stats.ratio(ref, new)
    pairwise = sorted(b / a for a in ref for b in new)
    assert r.ratio == pytest.approx(pairwise[4])  # the median of the 9 pairwise ratios
    assert (r.ci_low, r.ci_high) == (pytest.approx(pairwise[0]), pytest.approx(pairwise[-1]))
    assert r.ci_level == pytest.approx(0.9)  # 1 - 2/20: 20 orderings of 3 and 3
    assert (r.n_ref, r.n_new) == (3, 3)


def test_ratio_interval_uses_the_kth_pairwise_ratio_at_six_against_six():
    rng = np.random.default_rng(1)
    ref, new = list(rng.lognormal(0, 0.01, 6) * 100), list(rng.lognormal(0, 0.01, 6) * 95)
    r = stats.ratio(ref, new)
    pairwise = sorted(b / a for a in ref for b in new)
    # two-sided 5 % critical value of U for 6 and 6 is 5: P(U <= 5) = 19/924, so k = 6
    assert r.ci_level == pytest.approx(1 - 2 * 19 / 924)
    assert (r.ci_low, r.ci_high) == (pytest.approx(pairwise[5]), pytest.approx(pairwise[-6]))
    assert r.ci_low <= r.ratio <= r.ci_high


@pytest.mark.parametrize(("n", "m"), [(3, 3), (2, 5), (4, 4), (5, 6), (6, 6)])
def test_u_distribution_matches_scipy_exact_mann_whitney(n, m):
    seen = set()
    for xs_at in itertools.combinations(range(n + m), n):  # every ordering of n x's among n + m values
        x = [float(i) for i in xs_at]
        y = [float(i) for i in range(n + m) if i not in xs_at]
        u = sum(a > b for a in x for b in y)
        if u in seen:
            continue
        seen.add(u)
        p = st.mannwhitneyu(x, y, alternative="less", method="exact").pvalue  # P(U <= u)
        assert stats.u_cdf(u, n, m) == pytest.approx(p, rel=1e-12), (n, m, u)
    assert seen == set(range(n * m + 1))


def test_u_distribution_normal_approximation_past_40_a_side():
    assert stats.u_cdf(41 * 41 // 2, 41, 41) == pytest.approx(0.5, abs=0.01)


def test_coverage_by_simulation_matches_the_reported_level():
    """Skewed timings (lognormal) with a known median and a known ratio: the intervals cover the truth
    as often as their reported level says."""
    rng = np.random.default_rng(20261201)
    trials = 4000
    for n, want in ((3, 0.75), (9, 1 - 2 * 10 / 512)):
        hit = 0
        for _ in range(trials):
            lo, hi, cover = stats.median_interval(list(rng.lognormal(0, 0.5, n)))  # median 1
            hit += lo <= 1.0 <= hi
        assert cover == pytest.approx(want)
        assert hit / trials == pytest.approx(want, abs=0.025), n
    for n, want in ((3, 0.9), (6, 1 - 2 * 19 / 924)):
        hit = 0
        for _ in range(trials):
            ref, new = rng.lognormal(0, 0.3, n) * 100, rng.lognormal(0, 0.3, n) * 80  # true ratio 0.8
            r = stats.ratio(list(ref), list(new))
            hit += r.ci_low <= 0.8 <= r.ci_high
        assert r.ci_level == pytest.approx(want)
        assert hit / trials == pytest.approx(want, abs=0.02), n


# ---------------------------------------------------------------------------------------------
# Verdicts against the A/A floor band


def _r(lo: float, hi: float) -> stats.Ratio:
    return stats.Ratio(ratio=(lo + hi) / 2, ci_low=lo, ci_high=hi, ci_level=0.9)


def test_verdict_labels_against_the_floor_band():
    floor = 0.01  # band [0.99, 1.01]
    assert stats.verdict(_r(0.995, 1.005), floor) == "same"
    assert stats.verdict(_r(0.95, 0.98), floor) == "faster"  # times: below 1 is faster
    assert stats.verdict(_r(1.02, 1.05), floor) == "slower"
    assert stats.verdict(_r(0.98, 0.995), floor) == "ambiguous"  # straddles the band's lower edge
    assert stats.verdict(_r(0.98, 1.02), floor) == "ambiguous"  # wider than the band
    assert stats.verdict(_r(1.005, 1.02), floor) == "ambiguous"
    # without an A/A floor nothing is "same" unless the interval is exactly 1
    assert stats.verdict(_r(0.999, 1.001), 0.0) == "ambiguous"
    assert stats.verdict(_r(1.0, 1.0), 0.0) == "same"


def test_verdict_from_samples_and_a_floor():
    base = [100.0, 101.0, 99.0, 100.5]
    assert stats.verdict(stats.ratio(base, [70.0, 71.0, 69.5, 70.2]), floor=0.02) == "faster"
    assert stats.verdict(stats.ratio(base, [100.2, 99.8, 100.9, 100.1]), floor=0.02) == "same"
    assert stats.verdict(stats.ratio(base, [130.0, 131.0, 129.0]), floor=0.02) == "slower"
    small = stats.ratio(base, [97.0, 97.1, 96.9, 97.05])  # 3 % faster
    assert stats.verdict(small, floor=0.05) == "same"
    assert stats.verdict(small, floor=0.001) == "faster"
    assert stats.verdict(small, floor=0.025) == "ambiguous"  # the interval reaches into the band


def test_verdict_for_rates_where_higher_is_better():
    base = [100.0, 101.0, 99.0, 100.5]
    more = stats.ratio(base, [110.0, 111.0, 109.0, 110.5])
    assert stats.verdict(more, 0.0, higher_is_better=True) == "faster"
    assert stats.verdict(more, 0.0) == "slower"  # the same ratio of times would be a slowdown
    same = stats.ratio(base, [100.2, 99.8, 100.9, 100.1])
    assert stats.verdict(same, 0.0, higher_is_better=True) == "ambiguous"
    assert stats.verdict(same, 0.02, higher_is_better=True) == "same"


def test_old_verdicts_map_to_the_new_labels():
    assert stats.normalize_verdict("no measurable change") == "same"
    assert [stats.normalize_verdict(v) for v in stats.VERDICTS] == list(stats.VERDICTS)
    assert stats.normalize_verdict("faster") == "faster" and stats.normalize_verdict("slower") == "slower"


def test_noise_floor_is_the_largest_aa_difference():
    assert stats.noise_floor([1.01, 0.97, 1.002]) == pytest.approx(0.03)
    assert stats.noise_floor([]) == 0.0


def test_relative_noise_is_nvbench_stdev_over_mean():
    assert stats.rel_noise([10.0, 10.0, 10.0]) == 0.0
    assert stats.rel_noise([9.0, 10.0, 11.0]) == pytest.approx(0.1)  # stdev 1 (n-1), mean 10
    assert math.isinf(stats.rel_noise([10.0]))


# ---------------------------------------------------------------------------------------------
# Per-cell verdicts (issue 36): each cell's own A/A floor, a minimum of samples for the stated coverage


def test_the_fewest_samples_for_95_percent_are_4_a_side_and_3_give_90():
    assert stats.min_samples() == 4 and stats.min_samples(0.9) == 3
    assert stats.ratio([1, 2, 3, 4], [1, 2, 3, 4]).ci_level >= 0.95 > stats.ratio([1, 2, 3], [1, 2, 3]).ci_level


def test_two_samples_a_side_are_too_few_whatever_the_ratio():
    """issue 34: 'faster' from 2 samples a side at 66.7 % coverage."""
    r = stats.ratio([100.0, 101.0], [150.0, 151.0])
    assert r.ci_level == pytest.approx(2 / 3)
    assert stats.verdict(r, 0.01, higher_is_better=True) == stats.FASTER  # the old rule
    assert stats.cell_verdict(r, 0.01, max_floor=0.03, higher_is_better=True) == stats.TOO_FEW


def test_a_cell_is_noisy_above_the_largest_floor_or_when_it_straddles_its_band():
    """issue 34: 'same' against an A/A floor of 90 %: above max-floor a cell is noisy, never same."""
    ref = [100.0, 100.5, 99.5, 100.2]
    same = stats.ratio(ref, [100.1, 100.3, 99.8, 100.0])
    assert stats.cell_verdict(same, 0.9, max_floor=0.03) == stats.NOISY
    assert stats.cell_verdict(same, 0.02, max_floor=0.03) == stats.SAME
    assert stats.cell_verdict(same, 0.9, max_floor=0.0) == stats.SAME  # no limit set
    edge = stats.ratio(ref, [101.0, 101.5, 100.5, 102.0])  # interval straddles 1 + 0.01
    assert stats.verdict(edge, 0.01) == stats.AMBIGUOUS
    assert stats.cell_verdict(edge, 0.01, max_floor=0.03) == stats.NOISY
    fast = stats.ratio(ref, [120.0, 121.0, 119.0, 120.5])
    assert stats.cell_verdict(fast, 0.02, max_floor=0.03, higher_is_better=True) == stats.FASTER


def test_a_cells_floor_is_its_aa_intervals_farthest_edge():
    aa = stats.Ratio(ratio=1.01, ci_low=0.97, ci_high=1.02, ci_level=0.97)
    assert stats.cell_floor(aa) == pytest.approx(0.03)
