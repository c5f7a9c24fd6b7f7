"""``gpufleet mig mode`` and the functions of the MIG mode move with hostile input.

CLI: a ``--batch`` or ``-e mig_mode_batch`` that is not a count from 1 or a percentage from
1% to 100% in ASCII digits (full-width and superscript digits, 5,000 digits, ``0``, which
Ansible's ``serial`` reads as every node at once), and an ``-e mig_mode_to`` that is not a
mode (a template): exit 2 naming the option, before any run (the tripwires of
``conftest``). The playbook judges ``mig_mode_batch`` from the inventory the same way.

Functions (``dra_driver.mig_mode``, filters ``mig_mode``): pods, ResourceSlices and
ResourceClaims whose fields have other types than the API's are read as absent, never
raised on; a target that is not a mode is refused with a message of bounded length."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter import mig_mode as fm
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import mig_mode as mm

from gpufleet.commands import mig_mode as mode_cmd
from tests.unit.hostile.inputs import assert_refused, invoke

pytestmark = pytest.mark.unit

DRIVER = "gpu.nvidia.com"

BAD_BATCHES = {
    "zero": "0",
    "negative": "-1",
    "zero-percent": "0%",
    "over-100-percent": "101%",
    "scientific": "1e3",
    "full-width": "\uff11",
    "full-width-percent": "\uff12\uff15%",
    "superscript": "\u00b2",
    "arabic-indic": "\u0663",
    "5000-digits": "9" * 5000,
    "7-digits": "1234567",
    "double-percent": "2%%",
    "nul": "\x002",
    "empty": "",
    "float": "1.5",
}


@pytest.mark.parametrize("batch", list(BAD_BATCHES.values()), ids=list(BAD_BATCHES))
def test_a_batch_that_is_no_count_or_percentage_is_refused(
    hostile: dict[str, str], batch: str
) -> None:
    result = invoke(
        hostile, ["mig", "mode", "--to", "dynamic", "-i", hostile["inventory"], "--batch", batch]
    )
    assert_refused(result, ("--batch",))
    assert "e.g. 25%" in result.output
    assert len(result.output) < 1000, len(result.output)


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ("mig_mode_to={{ lookup('pipe','id') }}", "mig_mode_to"),
        ("mig_mode_to=Dynamic", "mig_mode_to"),
        ("mig_mode_batch=0", "mig_mode_batch"),
        ("mig_mode_batch=-3", "mig_mode_batch"),
        ("mig_mode_batch=true", "mig_mode_batch"),
        ("mig_mode_batch={{ lookup('pipe','id') }}", "mig_mode_batch"),
        ("mig_mode_batch=[1]", "mig_mode_batch"),
    ],
    ids=[
        "to-template",
        "to-capital",
        "batch-zero",
        "batch-negative",
        "batch-bool",
        "batch-template",
        "batch-list",
    ],
)
def test_extra_vars_of_the_move_are_judged_before_the_run(
    hostile: dict[str, str], extra: str, named: str
) -> None:
    result = invoke(
        hostile, ["mig", "mode", "--to", "static", "-i", hostile["inventory"], "-e", extra]
    )
    assert_refused(result, (named,))
    assert "uid=" not in result.output


@pytest.mark.parametrize(
    ("batch", "expected"), [(" 2 ", 2), ("25%", "25%"), ("100%", "100%"), ("999999", 999999)]
)
def test_a_batch_in_ascii_digits_reaches_the_playbook_as_serial_reads_it(
    batch: str, expected: Any
) -> None:
    assert mode_cmd.mode_extravars("dynamic", batch)["mig_mode_batch"] == expected


def test_the_playbook_judges_the_inventory_batch_before_any_change() -> None:
    book = Path(__file__).parents[3] / "playbooks" / "mig_mode.yml"
    first = yaml.safe_load(book.read_text())[0]["tasks"]
    names = [t["name"] for t in first]
    assert names.index("MIG mode | The batch size") < names.index(
        "MIG mode | The DRA driver release in the target mode, its plugin pods left running"
    )
    assert "MIG mode | The batch size" in mode_cmd.REFUSING_TASKS
    for value in (0, -1, "0", "x", "1e3", True, "\uff11", None):
        assert fm.mig_mode_batch_problem(value).startswith("mig_mode_batch="), value
    for value in (1, "3", "50%"):
        assert fm.mig_mode_batch_problem(value) == ""


# ------------------------------------------------------------------ odd API objects

ODD = ["x", None, 5, [], {}, [1], {"a": 1}, b"\xff", "\udcff", [[[[]]]], [{}]]


def _pod(**spec: Any) -> dict[str, Any]:
    base = {
        "nodeName": "gpu-1",
        "containers": [{"env": [{"name": "FEATURE_GATES", "value": "DynamicMIG=true"}]}],
    }
    return {"metadata": {"name": "plugin-1"}, "spec": {**base, **spec}}


def _odd_pods(odd: Any) -> list[Any]:
    pods = [
        _pod(containers=odd),
        _pod(containers=[odd]),
        _pod(containers=[{"env": odd}]),
        _pod(containers=[{"env": [odd]}]),
        _pod(containers=[{"env": [{"name": "FEATURE_GATES", "value": odd}]}]),
        _pod(containers=[{"command": odd, "args": odd}]),
        _pod(containers=[{"args": odd}]),
        {"metadata": {"name": "p"}, "spec": odd},
        odd,
    ]
    return pods


@pytest.mark.parametrize("odd", ODD, ids=[repr(o)[:12] for o in ODD])
def test_plugin_pods_of_odd_shape_are_read_as_static_not_raised(odd: Any) -> None:
    for pod in _odd_pods(odd):
        state = mm.node_state("gpu-1", [pod], [], DRIVER, "dynamic")
        assert state["plugin"] in ("static", "none"), (pod, state)
        assert mm.nodes_behind([pod], "static") == []
    # metadata of another type is read as absent: the pod runs, in the mode of its spec
    pod = {"metadata": odd, "spec": _pod()["spec"]}
    assert mm.node_state("gpu-1", [pod], [], DRIVER, "dynamic")["plugin"] == "dynamic"
    assert mm.nodes_behind([pod], "static") == ["gpu-1"]


@pytest.mark.parametrize("odd", ODD, ids=[repr(o)[:12] for o in ODD])
def test_slices_of_odd_shape_publish_nothing(odd: Any) -> None:
    spec = {"nodeName": "gpu-1", "driver": DRIVER}
    for s in [
        {"spec": odd},
        {"spec": {**spec, "devices": odd}},
        {"spec": {**spec, "devices": [odd]}},
        odd,
    ]:
        assert mm.slices_mode([s], "gpu-1", DRIVER) == "none", s
    counters = {"spec": {**spec, "sharedCounters": odd}}  # only a mapping is a counter set
    assert mm.slices_mode([counters], "gpu-1", DRIVER) == ("dynamic" if odd == [{}] else "none")
    # a device whose consumesCounters is not a list consumes no counters
    device = {"spec": {**spec, "devices": [{"name": "d", "consumesCounters": odd}]}}
    wanted = "dynamic" if odd == [{}] else "static"
    assert mm.slices_mode([device], "gpu-1", DRIVER) == wanted


@pytest.mark.parametrize("odd", ODD, ids=[repr(o)[:12] for o in ODD])
def test_claims_of_odd_shape_hold_nothing_on_the_node(odd: Any) -> None:
    result = [{"driver": DRIVER, "pool": "gpu-1", "device": "gpu-0"}]
    claims = [
        {"status": odd},
        {"status": {"allocation": odd}},
        {"status": {"allocation": {"devices": odd}}},
        {"status": {"allocation": {"devices": {"results": odd}}}, "reservedFor": [{}]},
        {
            "metadata": odd,
            "status": {
                "allocation": {"devices": {"results": result}},
                "reservedFor": [{"name": "p"}],
            },
        },
        odd,
    ]
    held = mm.claims_on_node(claims, "gpu-1", DRIVER)
    assert held in ([], ["/"]), held  # only the claim with odd metadata is held, unnamed
    assert fm.mig_mode_claims_on_node(odd, "gpu-1", DRIVER) == []


@pytest.mark.parametrize(
    "target", ["{{ lookup('pipe','id') }}", None, 1, ["dynamic"], "Dynamic", "d" * 100_000]
)
def test_a_target_that_is_no_mode_is_refused_in_a_short_message(target: Any) -> None:
    with pytest.raises(AnsibleFilterError) as err:
        fm.mig_mode_node([], "gpu-1", [], DRIVER, target)
    assert "mig_mode_to=" in str(err.value) and "fix:" in str(err.value)
    assert len(str(err.value)) < 400, len(str(err.value))
    with pytest.raises(AnsibleFilterError):
        fm.mig_mode_nodes_behind(5, target)
