"""Protocol settings: thesis defaults, overrides, and clear errors for bad input or missing tools."""

from __future__ import annotations

import pytest

from qoelab import procs
from qoelab.errors import MissingToolError, ParameterError
from qoelab.rd.clients import resolve_settings
from qoelab.rd.desktop import spice_xorg_conf


def test_the_defaults_are_the_thesis_settings():
    assert resolve_settings("vnc", None)["compresslevel"] == 9
    assert resolve_settings("vnc", None)["quality"] == 5
    assert resolve_settings("spice", None)["image_compression"] == "auto_glz"
    x2go = resolve_settings("x2go", None)
    assert (x2go["link"], x2go["pack"], x2go["geometry"]) == ("adsl", "16m-jpeg-9", "800x600")


def test_it_overrides_a_setting():
    assert resolve_settings("vnc", {"quality": 9})["quality"] == 9
    assert 'SpiceImageCompression" "quic"' in spice_xorg_conf(
        resolve_settings("spice", {"image_compression": "quic"}), "198.18.0.2"
    )


def test_it_rejects_an_unknown_setting_naming_it():
    with pytest.raises(ParameterError, match=r"settings\.jpeg"):
        resolve_settings("vnc", {"jpeg": 3})


def test_it_rejects_a_quality_over_9():
    with pytest.raises(ParameterError, match=r"settings\.quality.*0-9"):
        resolve_settings("vnc", {"quality": 10})


def test_it_rejects_an_unknown_spice_compression():
    with pytest.raises(ParameterError, match=r"settings\.image_compression"):
        spice_xorg_conf(resolve_settings("spice", {"image_compression": "png"}), "198.18.0.2")


def test_it_rejects_an_unknown_protocol():
    with pytest.raises(ParameterError, match="protocol"):
        resolve_settings("rdp", None)


def test_a_missing_program_names_its_debian_package(monkeypatch):
    monkeypatch.setattr(procs.shutil, "which", lambda name: None)
    with pytest.raises(MissingToolError, match="install the Debian package 'xtightvncviewer'"):
        procs.require_tool("no-such-viewer-qoelab", "xtightvncviewer")


def test_the_vnc_server_is_x11vnc_by_default_and_an_unknown_one_is_rejected():
    assert resolve_settings("vnc", None)["server"] == "x11vnc"
    assert resolve_settings("vnc", {"server": "tigervnc"})["server"] == "tigervnc"
    with pytest.raises(ParameterError, match=r"settings\.server.*x11vnc, tigervnc"):
        resolve_settings("vnc", {"server": "realvnc"})


def test_a_missing_x11vnc_names_its_debian_package(monkeypatch):
    from qoelab.rd.desktop import start_x11vnc

    monkeypatch.setattr(procs.shutil, "which", lambda name: None)
    monkeypatch.setattr(procs.Path, "exists", lambda self: False)
    with pytest.raises(MissingToolError, match="install the Debian package 'x11vnc'"):
        start_x11vnc(procs.ProcSet("rdtx", procs.Path("/nonexistent")), "ns", "198.18.0.2", 5900)
