"""The recorded outputs the parser tests read are what they claim to be."""

from __future__ import annotations

from .conftest import FIX


def test_every_fixture_has_provenance_and_is_small():
    data = [p for p in FIX.iterdir() if not p.name.endswith(".provenance.txt")]
    assert len(data) >= 9
    for p in data:
        prov = (FIX / (p.name + ".provenance.txt")).read_text()
        assert "0c1e57098bba43ac29e6e3b677cdceebdd22334f" in prov
        assert "variant: " in prov and "command:" in prov and "date" in prov
        assert p.stat().st_size < 200_000
