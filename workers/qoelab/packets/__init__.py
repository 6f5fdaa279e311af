"""Packets on a lab host: capturing at a namespace's interface (``capture``: dumpcap, a live payload
watch) and reading a capture file (``pcapfile``: pcap and pcapng through dpkt). Used by the
remote-desktop benchmark, the storage benchmark's link capture and thin-client trace replay."""
