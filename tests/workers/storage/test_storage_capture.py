"""The capture's decoding: a request's operation from tshark's Info column, and each metadata
kind's requests counted within its window (a committed capture of a real run here; a live one:
test_storage_cli_guest.py)."""

from __future__ import annotations

from pathlib import Path

from qoelab.storage.capture import per_kind, request_name, requests


def test_request_names_from_the_info_column() -> None:
    assert request_name("nfs", "V4 Call LOOKUP DH: 0x3db7c8f4/meta-5") == "LOOKUP"
    assert (
        request_name("nfs", "V4 Call (Reply In 12) ACCESS FH: 0xd940da90, [Check: RD LU MD XT DL]")
        == "ACCESS"
    )
    assert request_name("nfs", "V4 Call PUTROOTFH | GETATTR") == "PUTROOTFH+GETATTR"
    assert request_name("nfs", "V4 NULL Call") == "NULL"
    assert request_name("nfs", "V4 Call[Packet size limited during capture]") == "(cut short)"
    assert request_name("iscsi", "SCSI: Write(10) LUN: 0x00 (LBA: 0x00001000, Len: 8)") == "Write(10)"
    assert request_name("swift", "DELETE /v1/AUTH_test/qoelab/m/f1 HTTP/1.1 ") == "DELETE"


def test_each_kind_counts_the_requests_inside_its_window() -> None:
    rows = [{"op": "mkdir", "t_start": 10.0, "t_end": 11.0}, {"op": "touch", "t_start": 12.0, "t_end": 13.0},
            {"op": "ls", "t_start": None, "t_end": None}]  # fmt: skip
    seen = [
        (9.9, "ACCESS"),
        (10.1, "CREATE"),
        (10.5, "CREATE"),
        (10.6, "GETATTR"),
        (12.5, "OPEN"),
        (14.0, "X"),
    ]
    per_kind(rows, seen)
    assert rows[0]["requests"] == 3 and rows[0]["request_ops"] == "CREATE x2; GETATTR x1"
    assert rows[1]["requests"] == 1 and rows[1]["request_ops"] == "OPEN x1"
    assert "requests" not in rows[2]  # no window: nothing claimed


CAPTURES = Path(__file__).resolve().parents[2] / "data" / "captures"


def test_nfs_requests_are_found_whatever_port_the_client_took() -> None:
    """A real run's capture whose NFS client took port 853 (DNS over TLS to tshark by itself): every
    kind still gets its requests, inside the windows the run recorded."""
    seen = requests(CAPTURES / "nfs-client-port-853.pcap", "nfs")
    rows = [
        {"op": "mkdir", "t_start": 1796499698.663581, "t_end": 1796499698.9344819},
        {"op": "touch", "t_start": 1796499698.9731312, "t_end": 1796499699.4609315},
        {"op": "ls", "t_start": 1796499699.4784622, "t_end": 1796499699.6919782},
        {"op": "unlink", "t_start": 1796499699.7034297, "t_end": 1796499700.0897985},
        {"op": "rmdir", "t_start": 1796499700.0977278, "t_end": 1796499700.5020413},
    ]
    per_kind(rows, seen)
    ops = {r["op"]: r["request_ops"] for r in rows}
    assert "CREATE x2" in ops["mkdir"] and "OPEN x2" in ops["touch"] and "READDIR x1" in ops["ls"], ops
    assert "REMOVE x2" in ops["unlink"] and "REMOVE x2" in ops["rmdir"], ops
