"""Paper 002's Enhancement 1 as a BPF sock_ops program (``rto_ewma.bpf.c``) and its loader.

docs/thinclient-bpf.md: what the program does, its formula, and what the kernel refuses.
"""
