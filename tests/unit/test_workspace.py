import json

import pytest

from patchkit.errors import LockError
from patchkit.workspace import Workspace, read_json, write_json


def test_a_second_writer_of_the_same_folder_is_refused(tmp_path):
    ws = Workspace.at(tmp_path / "w")
    target = ws.builds("r", "cpu")
    with ws.lock(target):
        with pytest.raises(LockError, match="in use by patchkit pid"), ws.lock(target):
            pass
        with ws.lock(ws.builds("r", "cuda-90")):  # another folder is free
            pass
    with ws.lock(target):  # released
        pass


def test_write_json_is_atomic_and_leaves_no_temp_files(tmp_path):
    p = tmp_path / "a" / "results.json"
    write_json(p, {"x": 1})
    write_json(p, {"x": 2})
    assert read_json(p) == {"x": 2}
    assert [f.name for f in p.parent.iterdir()] == ["results.json"]
    assert json.loads(p.read_text()) == {"x": 2}
