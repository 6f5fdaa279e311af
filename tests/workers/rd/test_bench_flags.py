"""`qoelab rd bench` offers a flag for every rd_qoe parameter of its own (the link: a common subset)."""

from qoelab.emulation.profile import LinkParams
from qoelab.jobs.rd_qoe import RdQoeParams
from qoelab.rd.bench_cli import INT_PARAMS, PARAM_FLAGS

# protocol is its own required flag; record needs the ratings app; verify: a local run verifies in full.
NOT_FLAGS = {"protocol", "record", "verify"}


def test_every_trial_parameter_has_a_bench_flag_and_no_flag_is_stale():
    own = set(RdQoeParams.model_fields) - set(LinkParams.model_fields) - NOT_FLAGS
    assert own <= set(PARAM_FLAGS), own - set(PARAM_FLAGS)
    assert set(PARAM_FLAGS) <= set(RdQoeParams.model_fields), set(PARAM_FLAGS) - set(RdQoeParams.model_fields)


def test_integer_flags_are_integer_fields():
    for name in INT_PARAMS:
        assert RdQoeParams.model_fields[name].annotation is int, name
