"""patchkit.build.table on the real header (tests/fixtures/sweep/fattn-mma-f16.cuh, llama.cpp 0c1e57098)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.build import table as tbl

HEADER = Path(__file__).resolve().parents[1] / "fixtures" / "sweep" / "fattn-mma-f16.cuh"
TEXT = HEADER.read_bytes().decode("utf-8", "surrogateescape")
AMPERE = "ggml_cuda_fattn_mma_get_config_ampere"
COLUMNS = (
    "DKQ",
    "DV",
    "ncols",
    "nthreads",
    "occupancy",
    "nbatch_fa",
    "nbatch_K2",
    "nbatch_V2",
    "nbatch_combine",
    "nstages_target",
    "Q_in_reg",
)


def test_columns_come_from_the_macro_parameters():
    m = tbl.macros(TEXT)["GGML_CUDA_FATTN_MMA_CONFIG_CASE"]
    assert m.columns == COLUMNS
    assert m.line == 26
    assert tbl.macros(TEXT)["DECL_FATTN_MMA_F16_CASE"].columns == ("DKQ", "DV", "ncols1", "ncols2")


@pytest.mark.parametrize(
    ("function", "rows", "line"),
    [
        (AMPERE, 38, 38),
        ("ggml_cuda_fattn_mma_get_config_turing", 14, 90),
        ("ggml_cuda_fattn_mma_get_config_volta", 8, 112),
        ("ggml_cuda_fattn_mma_get_config_rdna", 38, 127),
        ("ggml_cuda_fattn_mma_get_config_cdna", 38, 179),
    ],
)
def test_rows_of_each_config_function(function, rows, line):
    t = tbl.parse_table(TEXT, function)
    assert t.macro.name == "GGML_CUDA_FATTN_MMA_CONFIG_CASE"
    assert (len(t.rows), t.line) == (rows, line)
    assert all(len(r.values) == len(COLUMNS) for r in t.rows)


def test_the_seed_row():
    t = tbl.parse_table(TEXT, AMPERE)
    [row] = t.find({"DKQ": 256, "DV": 256, "ncols": 8})
    assert row.line == 69
    assert row.values == (256, 256, 8, 128, 2, 64, 128, 128, 128, 2, True)
    assert TEXT.splitlines()[68][row.start - TEXT.rfind("\n", 0, row.start) - 1 :].startswith("256, 256,  8")
    assert t.find({"DKQ": 256, "DV": 256, "ncols": 9}) == []
    assert len(t.find({"DKQ": 256, "DV": 256})) == 4
    assert t.find({"Q_in_reg": 1}) == []  # a bool cell never equals a number


def test_rewrite_keeps_every_other_byte_and_the_column_widths():
    t = tbl.parse_table(TEXT, AMPERE)
    [row] = t.find({"DKQ": 256, "DV": 256, "ncols": 8})
    new = tbl.rewrite_row(TEXT, t, row, {"nthreads": 64, "occupancy": 4, "nbatch_fa": 32})
    old_lines, new_lines = TEXT.splitlines(keepends=True), new.splitlines(keepends=True)
    assert len(old_lines) == len(new_lines)
    changed = [i for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b]
    assert changed == [68]
    # the line patch 0002 has (git diff of the seed port), byte for byte
    assert new_lines[68] == "    GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256,  8,  64, 4,  32, 128, 128, 128, 2, true);\n"
    assert tbl.rewrite_row(TEXT, t, row, {"nthreads": 128}) == TEXT  # the same values: the same bytes


def test_rewrite_wider_values_and_bools():
    t = tbl.parse_table(TEXT, AMPERE)
    [row] = t.find({"DKQ": 256, "DV": 256, "ncols": 8})
    new = tbl.rewrite_row(TEXT, t, row, {"occupancy": 16, "nthreads": 1024, "Q_in_reg": False})
    line = new.splitlines()[68]
    assert line == "    GGML_CUDA_FATTN_MMA_CONFIG_CASE(256, 256,  8, 1024, 16,  64, 128, 128, 128, 2, false);"
    t2 = tbl.parse_table(new, AMPERE)
    assert t2.find({"DKQ": 256, "DV": 256, "ncols": 8})[0].values[3:5] == (1024, 16)
    assert new[: row.start] == TEXT[: row.start] and new.endswith(TEXT[row.end :])


def test_lookup_errors_say_why():
    with pytest.raises(LookupError, match="no definition of function 'no_such_fn'"):
        tbl.parse_table(TEXT, "no_such_fn")
    with pytest.raises(LookupError, match="calls no #defined macro"):
        tbl.parse_table(TEXT, "ggml_cuda_fattn_mma_get_config")
    with pytest.raises(LookupError, match="no #define of macro 'NOPE'"):
        tbl.parse_table(TEXT, AMPERE, "NOPE")
    with pytest.raises(LookupError, match="has no rows calling DECL_FATTN_MMA_F16_CASE"):
        tbl.parse_table(TEXT, AMPERE, "DECL_FATTN_MMA_F16_CASE")


def test_a_small_table_with_comments_and_expressions():
    src = (
        "#define ROW(a_, b_, c_) if (a == a_) return b_ + c_;\n"
        "static int f(int a) /* { not a body */ {\n"
        "    // ROW(9, 9, 9);  a comment is not a row\n"
        "    ROW( 1, 20, 300);\n"
        "    ROW( 2, (1 << 4), 3);\n"
        '    const char * s = "}";\n'
        "    return 0;\n"
        "}\n"
    )
    t = tbl.parse_table(src, "f")
    assert t.columns == ("a", "b", "c")
    assert [r.values for r in t.rows] == [(1, 20, 300), (2, "(1 << 4)", 3)]
    assert tbl.rewrite_row(src, t, t.rows[0], {"c": 7}).splitlines()[3] == "    ROW( 1, 20,   7);"
