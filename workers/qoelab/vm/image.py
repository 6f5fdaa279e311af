"""The guest image built by ``vm-images/build.sh``: where it is, its manifest, whether it is current."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qoelab.errors import QoelabError

REPO_ROOT = Path(__file__).resolve().parents[3]
BUILD_DIR = REPO_ROOT / "vm-images"
ENV_IMAGE_DIR = "QOELAB_VM_IMAGE_DIR"
IMAGE_FILES = ("disk.qcow2", "vmlinuz", "initrd.img")


class MissingImageError(QoelabError):
    """No (complete) guest image where the worker looks for it."""


def image_dir() -> Path:
    return Path(os.environ.get(ENV_IMAGE_DIR) or BUILD_DIR / "out")


def input_hash(build_dir: Path = BUILD_DIR) -> str:
    """The hash build.sh records: sha256 of build.sh followed by packages.txt (its cache key)."""
    h = hashlib.sha256()
    for name in ("build.sh", "packages.txt"):
        h.update((build_dir / name).read_bytes())
    return h.hexdigest()


@dataclass(frozen=True)
class GuestImage:
    directory: Path
    manifest: dict[str, Any]

    @property
    def disk(self) -> Path:
        return self.directory / "disk.qcow2"

    @property
    def kernel(self) -> Path:
        return self.directory / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.directory / "initrd.img"

    @property
    def password_file(self) -> Path:
        return self.directory / "rd-password"

    def is_current(self, build_dir: Path = BUILD_DIR) -> bool:
        """True when the image was built from the build script and package list now in the tree."""
        return self.manifest.get("input_hash") == input_hash(build_dir)

    def provenance(self) -> dict[str, Any]:
        files = self.manifest.get("files", {})
        return {
            "image_dir": str(self.directory),
            "disk_sha256": files.get("disk.qcow2", {}).get("sha256"),
            "input_hash": self.manifest.get("input_hash"),
            "built_at": self.manifest.get("built_at"),
            "kernel_package": self.manifest.get("packages", {}).get("linux-image-amd64"),
            "browser": f"chromium {self.manifest.get('packages', {}).get('chromium', '?')}",
        }


def load_image(directory: Path | None = None) -> GuestImage:
    """The guest image, or MissingImageError saying how to build it."""
    d = directory or image_dir()
    missing = [n for n in (*IMAGE_FILES, "manifest.json") if not (d / n).is_file()]
    if missing:
        raise MissingImageError(f"no guest image in {d} (missing {', '.join(missing)}): run make vm-image")
    try:
        manifest = json.loads((d / "manifest.json").read_text())
    except (OSError, ValueError) as err:
        raise MissingImageError(
            f"guest image manifest {d / 'manifest.json'} unreadable ({err}): run make vm-image"
        ) from None
    if not isinstance(manifest, dict) or "input_hash" not in manifest:
        raise MissingImageError(
            f"guest image manifest {d / 'manifest.json'} has no input_hash: run make vm-image"
        )
    return GuestImage(d, manifest)
