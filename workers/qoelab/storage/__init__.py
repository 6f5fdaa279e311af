"""Storage benchmark (thesis 001): NFS, iSCSI and Swift behind the emulated WAN.

``targets`` starts the server side of one trial in the server namespace: nfs-ganesha exporting a
directory on a file-backed ext4 (``nfs``), tgt with a file-backed LUN (the APT job's target, extended;
``targets.iscsi_target``) and a single-node Swift all-in-one (``swift``). Each is a context manager
with ``endpoint``, ``config`` (the provenance snapshot), ``log_tail()`` and ``stop()``.
"""
