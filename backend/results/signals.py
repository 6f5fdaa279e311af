"""Signals through which the apps above results take part in its decisions (qoelab_web.layers)."""

from django.dispatch import Signal

# Sent before artifacts are pruned (retention or ``manage.py prune_artifacts``); each receiver answers
# a set of artifact ids that must stay. ratings keeps the recordings its campaigns' conditions show.
artifacts_in_use = Signal()
