"""qoelab.helpers: the native helpers `make deps` builds, found in one place."""

from __future__ import annotations

from pathlib import Path

import pytest

from qoelab import helpers
from qoelab.errors import QoelabError


@pytest.mark.parametrize("helper", helpers.ALL, ids=lambda h: h.file)
def test_every_helper_is_built_where_the_lab_looks(helper: helpers.Helper) -> None:
    assert helper.path() == helpers.BUILD_DIR / helper.file
    assert helper.available(), f"{helper.path()}: {helper.not_built}"
    assert helper.require() == helper.path()


def test_a_variable_points_at_another_build_and_a_missing_one_is_one_sentence(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("QOELAB_VOSE_PAIR", str(tmp_path / "absent"))
    assert helpers.VOSE_PAIR.path() == tmp_path / "absent" and not helpers.VOSE_PAIR.available()
    with pytest.raises(QoelabError, match=r"^vose-pair is not built \(run make deps\)$"):
        helpers.VOSE_PAIR.require()
    (tmp_path / "absent").write_text("not executable")
    assert not helpers.VOSE_PAIR.available()  # there, but not a program
    monkeypatch.setenv("QOELAB_RTO_EWMA_OBJ", str(tmp_path / "absent"))
    assert helpers.RTO_EWMA_OBJ.available()  # a file a program loads: being there is enough


def test_the_engines_ask_the_one_module() -> None:
    from qoelab.apt import bdl
    from qoelab.emulation import userspace
    from qoelab.storage import iobench
    from qoelab.thinclient import replay
    from qoelab.thinclient.bpf import loader
    from qoelab.vose import pair

    found = [bdl.binary_path(), userspace.binary_path(), iobench.binary(), replay.binary(),
             loader.object_path(), pair.binary_path()]  # fmt: skip
    named = (helpers.APT_BDL, helpers.LINKEMU, helpers.STORAGE_IOBENCH, helpers.TC_REPLAY,
             helpers.RTO_EWMA_OBJ, helpers.VOSE_PAIR)  # fmt: skip
    assert found == [h.path() for h in named]
