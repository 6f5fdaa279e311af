"""VM server mode: a Debian guest under QEMU (KVM when it runs guests, TCG otherwise).

``image`` finds the guest built by ``make vm-image``; ``qemu`` decides the accelerator and builds the
command line; ``guest`` runs one guest per trial on a copy-on-write overlay and always cleans up.
"""
