"""Chapter 3's experiments (thesis 000, ``vose``): VOSE against real acceleration, checksum and IPsec
offload devices against the speedup, and checksum offload against a CPU quota."""

from __future__ import annotations

from qoelab.preset import SIZES, Chapter, Preset

CH3_SPEEDUPS = {"quick": [1, 2, 3, 10, "inf"], "full": [1, 1.5, 2, 3, 5, 10, 30, "inf"]}
CH3: tuple[Preset, ...] = (
    Preset(
        key="ch3-validate",
        report="ch3",
        figure="§3.5.3",
        title="VOSE against real acceleration",
        description="AES-128-CBC and HMAC-SHA1-96 per 1,448-byte record: software, the CPU's AES-NI / "
        "SHA-NI, and VOSE busy-waiting this host's measured T_software / T_hardware",
        kind="sweep",
        grids={
            "quick": {"device": ["aes_cbc", "sha1_only"], "mode": ["software", "hardware", "vose"]},
            "full": {"device": ["aes_cbc", "sha1_only"], "mode": ["software", "hardware", "vose"]},
        },
        fixed={"path": "app", "speedup": "measured", "duration": "10s"},
        repetitions={"quick": 3, "full": 10},
        job_type="vose",
    ),  # fmt: skip
    Preset(
        key="ch3-fig311",
        report="ch3",
        figure="Fig. 3.11",
        title="checksum offload vs speedup",
        description="The kernel's TCP checksum over veth: offload off (software), on (hardware, T = 0) and "
        "VOSE busy-waiting T_checksum / speedup per record",
        kind="sweep",
        grids={q: {"mode": ["software", "hardware", "vose"], "speedup": CH3_SPEEDUPS[q]} for q in SIZES},
        fixed={"path": "kernel_csum", "duration": "10s"},
        repetitions={"quick": 2, "full": 10},
        job_type="vose",
    ),
    Preset(
        key="ch3-fig312",
        report="ch3",
        figure="Fig. 3.12",
        title="IPsec offload devices vs speedup",
        description="AES-only, AES-CBC, SHA1-only, SHA1-AES and SHA1-AES-CBC devices at speedups 1 to inf, "
        "application records over veth",
        kind="sweep",
        grids={
            q: {
                "device": ["aes_only", "aes_cbc", "sha1_only", "sha1_aes", "sha1_aes_cbc"],
                "speedup": CH3_SPEEDUPS[q],
            }
            for q in SIZES
        },
        fixed={"path": "app", "mode": "vose", "duration": "10s"},
        repetitions={"quick": 1, "full": 10},
        job_type="vose",
    ),  # fmt: skip
    Preset(
        key="ch3-quota",
        report="ch3",
        figure="Figs. 3.5-3.10",
        title="checksum offload vs CPU quota",
        description="Software, hardware and VOSE (T = 0) on the kernel's TCP checksum with each end held "
        "to a CPU bandwidth quota (the stand-in for a lower clock frequency, which a lab host cannot set)",
        kind="sweep",
        grids={
            "quick": {"mode": ["software", "hardware", "vose"], "cpu_quota": [0.25, 0.5, 1.0]},
            "full": {"mode": ["software", "hardware", "vose"], "cpu_quota": [0.2, 0.4, 0.6, 0.8, 1.0]},
        },
        fixed={"path": "kernel_csum", "speedup": "inf", "duration": "10s"},
        repetitions={"quick": 2, "full": 10},
        job_type="vose",
    ),  # fmt: skip
)

CHAPTER = Chapter("ch3", "Chapter 3: offload emulation (VOSE: checksum and IPsec devices)", CH3)
