"""Remote-desktop QoE (thesis ch. 4): slow-motion benchmarking of VNC, SPICE and X2Go."""
