"""VM server mode's capability: QEMU, a built guest image, and KVM or TCG allowed.

Cheap (no guest boots); ``rd_qoe`` (``server: vm``) and the storage benchmark (its client guest)
list :func:`probe` among their probes.
"""

from __future__ import annotations

from qoelab.jobtype import HostProbe
from qoelab.vm.guest import vm_capability


def probe(found: HostProbe) -> None:
    vm = vm_capability()
    why = vm["image_note"] if not vm["image"] else "QEMU missing or neither KVM nor TCG allowed"
    found.set("vm", bool(vm["available"]), why)
