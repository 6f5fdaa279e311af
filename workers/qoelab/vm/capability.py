"""VM server mode's capability: QEMU, a built guest image, and KVM or TCG allowed.

Cheap (no guest boots); ``rd_qoe`` (``server: vm``) and the storage benchmark (its client guest)
list :func:`probe` among their probes.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from qoelab.errors import QoelabError
from qoelab.jobtype import HostProbe
from qoelab.vm.image import load_image
from qoelab.vm.qemu import tcg_allowed


def vm_capability() -> dict[str, Any]:
    """What this host can do in VM mode, for worker capabilities (cheap: no probe boot)."""
    qemu = shutil.which("qemu-system-x86_64")
    try:
        img = load_image()
        image_ok, image_note = True, str(img.directory)
    except QoelabError as err:
        image_ok, image_note = False, str(err)
    return {
        "qemu": qemu is not None,
        "kvm_device": os.path.exists("/dev/kvm"),
        "tcg_allowed": tcg_allowed(),
        "image": image_ok,
        "image_note": image_note,
        "available": qemu is not None and image_ok and (tcg_allowed() or os.path.exists("/dev/kvm")),
    }


def probe(found: HostProbe) -> None:
    vm = vm_capability()
    why = vm["image_note"] if not vm["image"] else "QEMU missing or neither KVM nor TCG allowed"
    found.set("vm", bool(vm["available"]), why)
