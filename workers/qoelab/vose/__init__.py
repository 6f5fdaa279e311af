"""VOSE: offload emulation between a pinned sender and receiver in two namespaces."""
