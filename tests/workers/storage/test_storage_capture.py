"""The capture's decoding: a request's operation from tshark's Info column, and each metadata
kind's requests counted within its window (the real capture: test_storage_cli.py)."""

from __future__ import annotations

from qoelab.storage.capture import per_kind, request_name


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
