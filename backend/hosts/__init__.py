"""Worker registry: lab hosts, their per-host tokens, capabilities and heartbeats."""
