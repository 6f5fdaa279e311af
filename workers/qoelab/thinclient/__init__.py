"""Thin-client TCP (paper 002): two-state screen traffic over a shared bottleneck.

``model``: the paper's two-state traffic model as a seeded generator; ``trace``: payload timelines
from captures, split into flows and fitted back to the model's parameters. The job type that
replays them through the emulated bottleneck is issue 16's next part (docs/thinclient-tcp.md).
"""
