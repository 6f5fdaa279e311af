"""Signals through which the apps above experiments take part in its decisions without experiments
importing them (qoelab_web.layers): experiments sends, the upper app's AppConfig.ready connects."""

from django.dispatch import Signal

# Sent while a sweep is validated, once per trial that a parameter names as a capture input
# (``trial:N``, JobType.capture_params) with ``trial=``; a receiver answers why that trial cannot serve
# as one (a sentence) or None. results answers whether the trial has a packet capture.
capture_input_named = Signal()

# Sent while a deletion is planned (``lifecycle.plan_sweep_delete``/``plan_experiment_delete``) with
# ``plan=`` (a DeletePlan whose sweeps, trials and own refusals are filled in) and ``user=``: a
# receiver fills in what of its own would go with the sweeps and appends its refusals (results: the
# artifacts and their bytes; ratings: the rating campaigns that use the sweeps).
deletion_planned = Signal()

# Sent inside the deleting transaction, under the row locks, just before the rows go, with ``plan=``
# (planned again under the locks) and ``reason=``: a receiver removes what of its own goes (ratings:
# the campaigns; results: the artifact files, once the transaction commits).
deleting = Signal()
