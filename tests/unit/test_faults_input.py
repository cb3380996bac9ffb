"""Issue 29 (bad input, 29c): each bad input is one line `patchkit: error: ...`, exit 2, nothing written.

Real git (a toy sdist base, as in test_faults_workdir.py), real recorded tool output, real files.
"""

from __future__ import annotations

import pytest

from patchkit.errors import ApplyError
from tests.unit.test_faults_workdir import Toy

GIT_FRAGMENTS = ("hint:", "git am", "To restore", "When you have resolved", "stderr:", "There")


def _broken(toy: Toy, how: str) -> str:
    good = (toy.proj / "patches" / "0002-b.patch").read_text()
    if how == "corrupt-hunk":  # its @@ counts promise more lines than it has
        return good.replace("@@ -1 +1 @@", "@@ -1,3 +1 @@")
    if how == "no-diff":  # the mail without its diff
        return good.split("diff --git")[0]
    if how == "not-a-patch":
        return "hello\n"
    if how == "conflict":  # its old line is not the base's, 3-way fails on a real merge conflict
        return good.replace("-int b = 2;", "-int b = 3;")
    raise AssertionError(how)


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("corrupt-hunk", ": file ggml/src/b.c, hunk #1 (@@ -1,3 +1 @@) (its line counts"),
        ("no-diff", "no diff in it"),
        ("not-a-patch", "no diff in it"),
        ("conflict", "file ggml/src/b.c, hunk #1 (@@ -1 +1 @@)"),
    ],
)
def test_a_patch_that_does_not_apply_is_one_line_naming_patch_and_hunk(tmp_path, how, says):
    toy = Toy(tmp_path)
    toy.write_patches()
    (toy.proj / "patches" / "0002-b.patch").write_text(_broken(toy, how))
    _states, errors = toy.apply()
    [e] = errors
    msg = str(e)
    assert isinstance(e, ApplyError) and "\n" not in msg, msg
    assert msg.startswith("variant +0001+0002: patch patches/0002-b.patch does not apply: "), msg
    assert says in msg, msg
    assert not any(f in msg for f in GIT_FRAGMENTS), msg
