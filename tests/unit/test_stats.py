import pytest

from patchkit import stats

FA = "hsk=256,hsv=256,nh=4,nr23=[6,1],kv=32768,nb=1,mask=1,sinks=0,max_bias=0.000000,logit_softcap=0.000000,prec=f32,type_K=q4_0,type_V=q4_0,permute=[0,1,2,3],kv_view=1,v_is_view_of_k=0,n_kv_max=0"


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


def test_summary_and_deterministic_interval():
    s1 = stats.summarize([10.0, 12.0, 11.0, 10.5, 30.0])
    s2 = stats.summarize([10.0, 12.0, 11.0, 10.5, 30.0])
    assert s1 == s2
    assert s1.median == 11.0 and s1.min == 10.0 and s1.max == 30.0
    assert s1.ci_low <= s1.median <= s1.ci_high


def test_ratio_and_verdicts():
    base = [100.0, 101.0, 99.0, 100.5]
    faster = stats.ratio(base, [70.0, 71.0, 69.5, 70.2])
    assert faster.ratio == pytest.approx(70.1 / 100.25, rel=1e-3)
    assert stats.verdict(faster, floor=0.02) == "faster"
    same = stats.ratio(base, [100.2, 99.8, 100.9, 100.1])
    assert stats.verdict(same, floor=0.02) == "no measurable change"
    slower = stats.ratio(base, [130.0, 131.0, 129.0])
    assert stats.verdict(slower, floor=0.02) == "slower"
    # a change smaller than the A/A floor is no measurable change even with a tight interval
    small = stats.ratio(base, [97.0, 97.1, 96.9, 97.05])
    assert stats.verdict(small, floor=0.05) == "no measurable change"
    assert stats.verdict(small, floor=0.001) == "faster"


def test_noise_floor_is_the_largest_aa_difference():
    assert stats.noise_floor([1.01, 0.97, 1.002]) == pytest.approx(0.03)
    assert stats.noise_floor([]) == 0.0


def test_verdict_for_rates_where_higher_is_better():
    base = [100.0, 101.0, 99.0, 100.5]
    more = stats.ratio(base, [110.0, 111.0, 109.0, 110.5])
    assert stats.verdict(more, 0.0, higher_is_better=True) == "faster"
    assert stats.verdict(more, 0.0) == "slower"  # the same ratio of times would be a slowdown
    same = stats.ratio(base, [100.2, 99.8, 100.9, 100.1])
    assert stats.verdict(same, 0.0, higher_is_better=True) == "no measurable change"
