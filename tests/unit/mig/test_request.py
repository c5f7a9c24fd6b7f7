"""What a MIG apply is asked to do: option checks, the target of each GPU and the layout
file the mig role writes (``plugins/module_utils/mig/request.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import gpu_state as mgs
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import request as mrq

pytestmark = pytest.mark.unit


def gpu(index: int) -> mgs.GpuState:
    return mgs.GpuState(index, f"GPU-{index}", "NVIDIA H200", None, 0, True, "Enabled", "Enabled")


def test_a_layout_with_instances_passes() -> None:
    mrq.check_request(mrq.Request(layout={"1g.18gb": 7}))


@pytest.mark.parametrize(
    ("request_", "words"),
    [
        (mrq.Request(), "give exactly one of layout"),
        (mrq.Request(layout={"1g.18gb": 7}, config={"a": 1}), "give exactly one of layout"),
        (mrq.Request(config={"a": 1}), "config_name is empty"),
        (mrq.Request(layout={"1g.18gb": 7}, allow_stop=("bogus",)), "unknown client kind 'bogus'"),
        (mrq.Request(layout={"1g.18gb": 1}, mig_enabled=False), "mig_enabled=false"),
    ],
)
def test_bad_option_combinations_are_refused(request_: mrq.Request, words: str) -> None:
    with pytest.raises(mgs.MigApplyError, match=words):
        mrq.check_request(request_)


def test_messages_name_the_options_as_the_role_spells_them() -> None:
    with pytest.raises(mgs.MigApplyError, match=r"mig_layout=.*zero GPU instances"):
        mrq.check_request(mrq.Request(layout={}, var_prefix="mig_"))


def test_targets_of_all_or_the_selected_gpus() -> None:
    req = mrq.Request(layout={"1g.18gb": 7})
    target = mrq.Target(True, {"1g.18gb": 7})
    assert mrq.targets(req, [gpu(0), gpu(1)]) == {0: target, 1: target}
    req = mrq.Request(layout={"1g.18gb": 7}, devices=(1,))
    assert mrq.targets(req, [gpu(0), gpu(1)]) == {1: target}


def test_an_unknown_gpu_index_is_refused_listing_the_gpus() -> None:
    req = mrq.Request(layout={"1g.18gb": 7}, devices=(3,))
    with pytest.raises(
        mgs.MigApplyError, match=r"GPU 3 does not exist on this host \(GPUs: \[0, 1\]\)"
    ):
        mrq.targets(req, [gpu(0), gpu(1)])


def test_request_from_the_role_file_names_options_with_the_role_prefix() -> None:
    req = mrq.request_from_file({"layout": {"1g.18gb": 7}, "devices": [0]})
    assert req.layout == {"1g.18gb": 7}
    assert req.devices == (0,)
    assert req.var_prefix == "mig_"
    assert req.allow_reboot is False


def test_an_empty_layout_with_mig_on_is_the_dynamic_mig_starting_state() -> None:
    req = mrq.Request(layout={}, dynamic_mig=True, var_prefix="mig_")
    mrq.check_request(req)
    assert mrq.targets(req, [gpu(0)]) == {0: mrq.Target(True, {})}
