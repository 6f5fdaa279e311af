"""The lab's native helpers, built into ``workers/build`` by ``make deps``: where each one is, the
variable that points a host at another build, and the one sentence a trial fails with when it is
missing. Engines ask here (``helpers.LINKEMU.require(...)``) instead of each looking for its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from qoelab.errors import QoelabError

BUILD_DIR = Path(__file__).resolve().parents[1] / "build"


@dataclass(frozen=True)
class Helper:
    file: str  # its name in workers/build
    env: str  # a variable that names another file instead
    not_built: str  # what a trial that needs it says when it is missing
    executable: bool = True  # False: a file a program loads (the BPF object)

    def path(self) -> Path:
        override = os.environ.get(self.env)
        return Path(override) if override else BUILD_DIR / self.file

    def available(self) -> bool:
        path = self.path()
        return os.access(path, os.X_OK) if self.executable else path.is_file()

    def require(self, error: type[Exception] = QoelabError) -> Path:
        """Its path, or ``error(not_built)`` when it is not there."""
        if not self.available():
            raise error(self.not_built)
        return self.path()


LINKEMU = Helper(
    "linkemu", "QOELAB_LINKEMU", "the userspace link emulator is not built; run `make` (needs gcc)"
)
APT_BDL = Helper(
    "apt-bdl",
    "QOELAB_APT_BDL",
    "the block-device layer helper apt-bdl is not built; run `make deps` (needs libnbd-dev and libiscsi-dev)",
)
VOSE_PAIR = Helper("vose-pair", "QOELAB_VOSE_PAIR", "vose-pair is not built (run make deps)")
TC_REPLAY = Helper("tc-replay", "QOELAB_TC_REPLAY", "tc-replay is not built (run make deps)")
STORAGE_IOBENCH = Helper(
    "storage-iobench", "QOELAB_STORAGE_IOBENCH", "storage-iobench is not built (run make deps)"
)
RTO_EWMA_OBJ = Helper(
    "rto_ewma.bpf.o",
    "QOELAB_RTO_EWMA_OBJ",
    "the RTO BPF program is not built (run make deps)",
    executable=False,
)
ALL = (LINKEMU, APT_BDL, VOSE_PAIR, TC_REPLAY, STORAGE_IOBENCH, RTO_EWMA_OBJ)
