"""`qoelab rd bench` offers a flag for every rd_qoe parameter of its own (the link: a common subset)."""

from qoelab.emulation.linkparams import LinkParams
from qoelab.jobs.rd_qoe import RdQoeParams
from qoelab.rd.bench_cli import INT_PARAMS, PARAM_FLAGS, print_table

# protocol is its own required flag; record needs the ratings app; verify: a local run keeps the
# default (in full once per condition and host, then a short check leaning on it).
NOT_FLAGS = {"protocol", "record", "verify"}


def test_every_trial_parameter_has_a_bench_flag_and_no_flag_is_stale():
    own = set(RdQoeParams.model_fields) - set(LinkParams.model_fields) - NOT_FLAGS
    assert own <= set(PARAM_FLAGS), own - set(PARAM_FLAGS)
    assert set(PARAM_FLAGS) <= set(RdQoeParams.model_fields), set(PARAM_FLAGS) - set(RdQoeParams.model_fields)


def test_integer_flags_are_integer_fields():
    for name in INT_PARAMS:
        assert RdQoeParams.model_fields[name].annotation is int, name


def test_table_line_after_a_short_link_check_shows_the_full_runs_throughput(capsys):
    # The short check measures RTT only; its TCP figure is the full run's, and the line says so.
    link = {
        "ok": True, "mode": "short", "measured": {"rtt_ms": 20.2},
        "reused": {"age_s": 171.4, "measured": {"tcp_down_bps": 9.6e6, "rtt_ms": 20.1}},
        "link": {"tcp": {"cc": "cubic"}},
    }  # fmt: skip
    doc = {"protocol": "vnc", "link_profile": "10mbit, delay 10ms", "link": link, "updates": [],
           "summary": {"n": 0}}  # fmt: skip
    print_table(doc)
    line = capsys.readouterr().out.splitlines()[0]
    assert "TCP down 9.60 Mbit/s (full check 171 s ago), RTT 20.2 ms" in line, line
    link.pop("reused")
    print_table(doc)
    assert "TCP down — Mbit/s," in capsys.readouterr().out
