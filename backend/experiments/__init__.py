"""Experiments, sweeps (parameter grids) and trials, with the scheduler that dispatches them."""
