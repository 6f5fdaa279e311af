"""qoelab worker library: runs trials without Django and reports results to the backend."""

__version__ = "0.1.0"
