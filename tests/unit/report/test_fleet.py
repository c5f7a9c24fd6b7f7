"""The utilization report's figures (``plugins/module_utils/report/fleet.py``) on a small
fleet whose every figure is computed by hand below: two H200 nodes of one pool (whole
GPUs and MIG devices), an A100 node without the pool label, claims allocated, leaked and
pending for each reason."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr

pytestmark = pytest.mark.unit

GI = 2**30
DRIVER = "gpu.nvidia.com"
POOL_LABEL = "nvidia.com/gpu.product"


def device(name: str, model: str, memory: str, profile: str | None = None) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "type": {"string": "mig" if profile else "gpu"},
        "productName": {"string": model},
    }
    if profile:
        attrs["profile"] = {"string": profile}
    return {"name": name, "attributes": attrs, "capacity": {"memory": {"value": memory}}}


def rslice(node: str, devices: list[dict[str, Any]], driver: str = DRIVER) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{node}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def node(name: str, product: str | None) -> dict[str, Any]:
    labels = {POOL_LABEL: product} if product else {}
    return {"metadata": {"name": name, "labels": labels}}


def claim(
    name: str,
    cls: str = "gpu.nvidia.com",
    selector: str | None = None,
    allocated: list[tuple[str, str]] | None = None,
    reserved: list[str] | None = None,
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    status: dict[str, Any] = {}
    if allocated:
        status["allocation"] = {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": DRIVER, "pool": pool, "device": dev}
                    for pool, dev in allocated
                ]
            }
        }
        status["reservedFor"] = [
            {"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in reserved or []
        ]
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
        "status": status,
    }


def pod(name: str, claim_name: str, phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": {
            "nodeName": "a",
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
        },
        "status": {"phase": phase},
    }


H200, A100 = "NVIDIA H200", "NVIDIA A100-SXM4-80GB"
SLICES = [
    rslice(
        "a",
        [
            device("gpu-0", H200, "140Gi"),
            device("gpu-1", H200, "140Gi"),
            device("mig-0", H200, "18Gi", "1g.18gb"),
            device("mig-1", H200, "18Gi", "1g.18gb"),
            device("mig-2", H200, "71Gi", "3g.71gb"),
        ],
    ),
    rslice(
        "b", [device("mig-3", H200, "18Gi", "1g.18gb"), device("mig-4", H200, "71Gi", "3g.71gb")]
    ),
    rslice("c", [device("gpu-0", A100, "80Gi")]),
    rslice("a", [{"name": "nic-0", "attributes": {}}], driver="rdma.example.com"),
]
NODES = [node("a", "NVIDIA-H200"), node("b", "NVIDIA-H200"), node("c", None)]
PROFILE = "device.attributes['gpu.nvidia.com'].profile == '{}'"
PRODUCT = "device.attributes['gpu.nvidia.com'].productName == '{}'"
CLAIMS = [
    # allocated and used by a running pod
    claim("train", allocated=[("a", "gpu-0")], reserved=["trainer"]),
    # allocated, reserved for a pod that is gone: leaked
    claim("leaked", allocated=[("a", "gpu-1")], reserved=["gone"]),
    # allocated, reserved for a pod that finished: leaked
    claim("infer", MIG := "mig.nvidia.com", allocated=[("a", "mig-2")], reserved=["batch"]),
    # allocated, reserved for nobody and used by no pod: leaked
    claim("a100", allocated=[("c", "gpu-0")]),
    # pending: no B200 is published
    claim("wants-b200", selector=PRODUCT.format("NVIDIA B200")),
    # pending: both H200 whole GPUs are allocated
    claim("wants-h200", selector=PRODUCT.format(H200)),
    # pending: a 3g.71gb is free (on b)
    claim("wants-71", MIG, selector=PROFILE.format("3g.71gb")),
    # pending: a selector on memory, which a shape does not read
    claim(
        "wants-memory",
        MIG,
        selector="device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('20Gi')) >= 0",
    ),
]
PODS = [
    pod("trainer", "train"),
    pod("batch", "infer", phase="Succeeded"),
    pod("waiter", "wants-h200", phase="Pending"),
]


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return fr.build_report(SLICES, CLAIMS, PODS, NODES)


def test_cluster_totals(report: dict[str, Any]) -> None:
    c = report["cluster"]
    # 8 devices of gpu.nvidia.com (the rdma device is not counted); 4 allocated
    assert (c["devices_published"], c["devices_allocated"], c["devices_free"]) == (8, 4, 4)
    # 2x140 + 3x18 + 2x71 + 80 = 556 GiB; allocated 140+140+71+80 = 431; free 18+18+18+71
    assert c["memory_published"] == 556 * GI
    assert c["memory_allocated"] == 431 * GI
    assert c["memory_free"] == 125 * GI
    # stranded: the three free 1g.18gb (no pending claim asks for one); the free 3g.71gb
    # is asked for by wants-71; wants-memory's shape is unknown and does not count
    assert c["memory_stranded"] == 54 * GI
    assert c["pending_unknown"] == 1


def test_the_nodes_that_publish_devices_are_counted_apart_from_the_cluster_s() -> None:
    from gpufleet.render import fleet_report as rp

    doc = fr.build_report(SLICES, CLAIMS, PODS, [*NODES, node("control-plane", None)])
    c = doc["cluster"]
    assert (c["nodes"], c["nodes_publishing"]) == (len(NODES) + 1, len(NODES))
    assert f"8 devices published on {len(NODES)} of {len(NODES) + 1} node(s)" in rp.headline(doc)[0]
    every = fr.build_report(SLICES, CLAIMS, PODS, NODES)
    assert f"8 devices published on {len(NODES)} node(s)," in rp.headline(every)[0]


def test_fragmentation_hand_computed(report: dict[str, Any]) -> None:
    # node a: free 18+18 = 36 GiB, largest 18 -> 0.5; node b: free 18+71 = 89, largest 71
    # -> 18/89; node c: nothing free. Weighted by free memory: (0.5*36 + 18/89*89) / 125
    # = 36/125 = 1 - (18+71)/(36+89)
    assert report["cluster"]["fragmentation"] == pytest.approx(36 / 125, abs=1e-4)
    nodes = {n["node"]: n for n in report["nodes"]}
    assert nodes["a"]["fragmentation"] == 0.5
    assert nodes["b"]["fragmentation"] == pytest.approx(18 / 89, abs=1e-4)
    assert nodes["c"]["fragmentation"] is None
    assert (nodes["b"]["largest_free"], nodes["b"]["memory_free"]) == (71 * GI, 89 * GI)


def test_fragmentation_zero_when_free_memory_is_one_device_per_node() -> None:
    devices = [
        fr.Device("d/a/0", "a", "p", "m", "gpu", 80 * GI),
        fr.Device("d/b/0", "b", "p", "m", "gpu", 80 * GI),
        fr.Device("d/b/1", "b", "p", "m", "gpu", 80 * GI, claim="ns/x"),
    ]
    assert fr.fragmentation(devices) == 0.0
    assert fr.fragmentation(devices[2:]) is None


def test_per_pool_model_and_profile(report: dict[str, Any]) -> None:
    pools = {p["pool"]: p for p in report["pools"]}
    assert set(pools) == {"NVIDIA-H200", "(none)"}
    assert (pools["NVIDIA-H200"]["devices_published"], pools["(none)"]["devices_published"]) == (
        7,
        1,
    )
    assert pools["(none)"]["fragmentation"] is None
    profiles = {(p["model"], p["profile"]): p for p in report["profiles"]}
    assert set(profiles) == {(H200, "gpu"), (H200, "1g.18gb"), (H200, "3g.71gb"), (A100, "gpu")}
    small = profiles[(H200, "1g.18gb")]
    assert (small["devices_published"], small["devices_allocated"], small["devices_free"]) == (
        3,
        0,
        3,
    )
    assert small["memory_stranded"] == small["memory_free"] == 54 * GI
    mid = profiles[(H200, "3g.71gb")]
    assert (mid["devices_allocated"], mid["devices_free"], mid["memory_stranded"]) == (1, 1, 0)
    assert profiles[(H200, "gpu")]["memory_allocated"] == 280 * GI
    rows = {(r["pool"], r["model"], r["profile"]) for r in report["rows"]}
    assert ("(none)", A100, "gpu") in rows and ("NVIDIA-H200", H200, "1g.18gb") in rows


def test_pending_claims_and_why(report: dict[str, Any]) -> None:
    pending = {p["claim"]: p for p in report["pending"]}
    assert {k: v["reason"] for k, v in pending.items()} == {
        "ml/wants-b200": fr.NO_DEVICE,
        "ml/wants-h200": fr.ALL_ALLOCATED,
        "ml/wants-71": fr.FREE_DEVICES,
        "ml/wants-memory": fr.UNKNOWN,
    }
    assert pending["ml/wants-h200"]["users"] == ["ml/waiter"]
    assert pending["ml/wants-b200"]["requests"][0]["shapes"] == ["1 x gpu of NVIDIA B200"]
    assert "compareTo" in pending["ml/wants-memory"]["requests"][0]["shapes"][0]
    assert report["cluster"]["pending_by_reason"] == {
        fr.NO_DEVICE: 1,
        fr.ALL_ALLOCATED: 1,
        fr.COUNTERS_EXHAUSTED: 0,
        fr.UNKNOWN: 1,
        fr.FREE_DEVICES: 1,
    }


def test_leaked_claims_hold_memory(report: dict[str, Any]) -> None:
    leaked = {item["claim"]: item for item in report["leaked"]}
    assert {k: v["kind"] for k, v in leaked.items()} == {
        "ml/leaked": "dead-reservation",
        "ml/infer": "dead-reservation",
        "ml/a100": "unreserved",
    }
    assert "no longer exists" in leaked["ml/leaked"]["reason"]
    assert "is done (phase Succeeded)" in leaked["ml/infer"]["reason"]
    assert leaked["ml/a100"]["devices"] == ["gpu.nvidia.com/c/gpu-0"]
    assert report["cluster"]["memory_leaked"] == (140 + 71 + 80) * GI


def test_no_pool_label_puts_every_node_in_one_pool() -> None:
    report = fr.build_report(SLICES, CLAIMS, PODS, NODES, pool_label="")
    assert [p["pool"] for p in report["pools"]] == ["(none)"]


def test_no_pending_claim_strands_every_free_device() -> None:
    claims = [c for c in CLAIMS if (c.get("status") or {}).get("allocation")]
    c = fr.build_report(SLICES, claims, PODS, NODES)["cluster"]
    assert c["claims_pending"] == 0 and c["memory_stranded"] == c["memory_free"] == 125 * GI


@pytest.mark.parametrize(
    ("cls", "expression", "label"),
    [
        (
            "mig.nvidia.com",
            'device.attributes["gpu.nvidia.com"]["profile"] == "1g.18gb"',
            "1 x 1g.18gb",
        ),
        (
            "mig.nvidia.com",
            "device.driver == 'gpu.nvidia.com' && '2g.35gb' == "
            "device.attributes['gpu.nvidia.com'].profile && "
            "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'",
            "1 x 2g.35gb of NVIDIA H200",
        ),
        ("mig.nvidia.com", None, "1 x any MIG profile"),
        ("gpu.nvidia.com", None, "1 x gpu"),
    ],
)
def test_shapes_read_from_selectors(cls: str, expression: str | None, label: str) -> None:
    ((shape,),) = fr.request_shapes(claim("x", cls, expression))
    assert shape.label() == label


@pytest.mark.parametrize(
    ("cls", "expression", "why"),
    [
        ("mig.nvidia.com", PROFILE.format("1g.18gb") + " || true", "selector"),
        ("mig.nvidia.com", "device.attributes['example.com'].profile == 'x'", "selector term"),
        ("mig.nvidia.com", PROFILE.format("a") + " && " + PROFILE.format("b"), "two values"),
        ("vfio.gpu.nvidia.com", None, "DeviceClass vfio.gpu.nvidia.com"),
    ],
)
def test_shapes_beyond_equality_are_unknown(cls: str, expression: str | None, why: str) -> None:
    ((shape,),) = fr.request_shapes(claim("x", cls, expression))
    assert shape.kind is None and why in shape.why


def test_first_available_and_v1beta1_requests() -> None:
    beta = {
        "metadata": {"name": "b", "namespace": "ml"},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "r", "deviceClassName": "gpu.nvidia.com", "count": 2},
                    {
                        "name": "f",
                        "firstAvailable": [
                            {"name": "big", "deviceClassName": "gpu.nvidia.com"},
                            {
                                "name": "small",
                                "deviceClassName": "mig.nvidia.com",
                                "selectors": [{"cel": {"expression": PROFILE.format("1g.18gb")}}],
                            },
                        ],
                    },
                ]
            }
        },
    }
    shapes = fr.request_shapes(beta)
    assert [[s.label() for s in alts] for alts in shapes] == [
        ["2 x gpu"],
        ["1 x gpu", "1 x 1g.18gb"],
    ]
    report = fr.build_report(SLICES, [*CLAIMS, beta], PODS, NODES)
    (item,) = [p for p in report["pending"] if p["claim"] == "ml/b"]
    # 2 whole GPUs: 3 published, 0 free -> all allocated; "f": its 1g.18gb fits
    assert [r["reason"] for r in item["requests"]] == [fr.ALL_ALLOCATED, fr.FREE_DEVICES]
    assert item["reason"] == fr.ALL_ALLOCATED


def test_memory_quantities() -> None:
    assert fr.memory_bytes("143771Mi") == 143771 * 2**20
    assert fr.memory_bytes("80G") == 80 * 10**9
    assert fr.memory_bytes(None) == fr.memory_bytes("lots") == 0


def test_a_vfio_device_is_its_own_profile_and_fits_no_gpu_or_mig_claim() -> None:
    vfio = device("vfio-0", H200, "140Gi")
    vfio["attributes"]["type"] = {"string": "vfio"}
    slices = [rslice("v", [vfio])]
    claims = [claim("whole", selector=PRODUCT.format(H200)), claim("slice", "mig.nvidia.com")]
    report = fr.build_report(slices, claims, [], [node("v", "NVIDIA-H200")])
    assert [(p["profile"], p["devices_free"]) for p in report["profiles"]] == [("vfio", 1)]
    assert {p["claim"]: p["reason"] for p in report["pending"]} == {
        "ml/whole": fr.NO_DEVICE,
        "ml/slice": fr.NO_DEVICE,
    }
    assert report["cluster"]["memory_stranded"] == 140 * GI


# ------------------------------------------------------------ shared counters (dynamic MIG)


def counters_fleet() -> dict[str, Any]:
    """The simulator's dynamic MIG slices: on the H200 seven claims hold the 1g.18gb at
    placements 0 to 6, on the B200 two claims hold the 3g.90gb at 0 and 4."""
    from tests.unit.dynamic_mig_slices import B200_NODE, H200_NODE, allocated_claim, slices

    claims = [allocated_claim(f"c{i}", H200_NODE, f"gpu-0-mig-1g18gb-19-{i}") for i in range(7)]
    claims += [
        allocated_claim("left", B200_NODE, "gpu-0-mig-3g90gb-9-0"),
        allocated_claim("right", B200_NODE, "gpu-0-mig-3g90gb-9-4"),
    ]
    nodes = [node(H200_NODE, "NVIDIA-H200"), node(B200_NODE, "NVIDIA-B200")]
    return fr.build_report(slices(), claims, [], nodes)


def test_gpus_with_shared_counters_have_free_and_stranded_figures() -> None:
    report = counters_fleet()
    b200, h200 = report["gpus"]
    assert (h200["node"], h200["gpu"], h200["model"], h200["pool"]) == (
        "h200-node", "gpu-0", "NVIDIA H200", "NVIDIA-H200",
    )  # fmt: skip
    # H200: slice 7 is free, but no placement of any profile uses it alone, and the
    # seven 1g.18gb hold all 7 decoders: one slice (140 GiB / 8) and 20 SMs stranded
    assert h200["memory_slices_free"] == h200["memory_slices_stranded"] == [7]
    assert h200["memory_stranded"] == 140 * GI // 8
    assert (h200["multiprocessors_free"], h200["multiprocessors_stranded"]) == (20, 20)
    # B200: the two 3g.90gb hold the 8 memory slices; 126 - 2 x 54 SMs are stranded
    assert b200["memory_slices_free"] == [] and b200["memory_stranded"] == 0
    assert (b200["multiprocessors_free"], b200["multiprocessors_stranded"]) == (18, 18)
    assert b200["claims"] == ["default/left", "default/right"]
    assert report["cluster"]["shared_counters"] == {
        "gpus": 2,
        "memory_slices": 16,
        "memory_slices_free": 1,
        "memory_slices_stranded": 1,
        "memory": 140 * GI + 171648 * 2**20,
        "memory_free": h200["memory_free"],
        "memory_stranded": 140 * GI // 8,
        "multiprocessors": 132 + 126,
        "multiprocessors_free": 38,
        "multiprocessors_stranded": 38,
    }


def test_a_fleet_without_shared_counters_has_no_gpu_rows(report: dict[str, Any]) -> None:
    assert report["gpus"] == []
    assert report["cluster"]["shared_counters"]["gpus"] == 0


def test_a_counter_set_of_another_shape_is_skipped_not_read() -> None:
    from tests.unit.dynamic_mig_slices import H200_NODE, slices

    odd = slices(H200_NODE)
    odd[0]["spec"]["sharedCounters"][0]["counters"] = ["memory-slice-0"]
    report = fr.build_report(odd, [], [], [node(H200_NODE, None)])
    assert report["cluster"]["objects_skipped"] == {"resourceslices": 1}
    assert report["gpus"] == []


# ------------------------------------------- devices and memory of a GPU with shared counters

MIG_CLASS = "mig.nvidia.com"


def dynamic_h200(*allocated: str, pending: tuple[str, ...] = ()) -> dict[str, Any]:
    """The report of the simulator's H200 (dynamic MIG, ``h200-node``) with a claim
    allocated each of ``allocated`` and a claim pending for each MIG profile of
    ``pending``."""
    from tests.unit.dynamic_mig_slices import H200_NODE, allocated_claim, slices

    claims = [allocated_claim(f"held-{i}", H200_NODE, d) for i, d in enumerate(allocated)]
    claims += [claim(f"wants-{p}", MIG_CLASS, PROFILE.format(p)) for p in pending]
    return fr.build_report(slices(H200_NODE), claims, [], [node(H200_NODE, "NVIDIA-H200")])


def h200_objects() -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The H200's devices by name and its one CounterSet, as the fixture publishes them."""
    from tests.unit.dynamic_mig_slices import H200_NODE, slices

    specs = [s["spec"] for s in slices(H200_NODE)]
    devices = {d["name"]: d for spec in specs for d in spec.get("devices") or []}
    (counter_set,) = [cs for spec in specs for cs in spec.get("sharedCounters") or []]
    return devices, counter_set


def consumed(device: dict[str, Any], counter: str) -> int:
    """Bytes or count of ``counter`` that a fixture device consumes (0 when it does not)."""
    (entry,) = device["consumesCounters"]
    return fr.memory_bytes((entry["counters"].get(counter) or {}).get("value"))


def memory_slices(device: dict[str, Any]) -> set[int]:
    (entry,) = device["consumesCounters"]
    return {int(c.rsplit("-", 1)[1]) for c in entry["counters"] if c.startswith("memory-slice-")}


def profile_of(device: dict[str, Any]) -> str:
    return (device["attributes"].get("profile") or {}).get("string", "gpu")


def test_seven_1g_on_an_h200_leave_no_free_device_and_the_counters_memory() -> None:
    devices, counter_set = h200_objects()
    held = [n for n in devices if profile_of(devices[n]) == "1g.18gb"]
    report = dynamic_h200(*held, pending=("3g.71gb",))
    c = report["cluster"]
    # the seven hold all 7 decoders: every other device is blocked, none is free
    assert (c["devices_published"], c["devices_allocated"]) == (len(devices), len(held))
    assert (c["devices_free"], c["devices_blocked"]) == (0, len(devices) - len(held))
    # memory once, from the counters: what the seven hold plus what the counter has left
    capacity = fr.memory_bytes(counter_set["counters"]["memory"]["value"])
    left = capacity - sum(consumed(devices[n], "memory") for n in held)
    memory = {n: fr.memory_bytes(d["capacity"]["memory"]["value"]) for n, d in devices.items()}
    assert c["memory_allocated"] == sum(memory[n] for n in held)
    assert c["memory_free"] == left == report["gpus"][0]["memory_free"]
    assert c["memory_published"] == c["memory_allocated"] + left == capacity
    # nothing fits: all of the free memory is stranded, and it is all fragments
    assert c["memory_stranded"] == left
    assert c["fragmentation"] == 1.0
    (row,) = report["nodes"]
    assert (row["largest_free"], row["devices_free"], row["memory_free"]) == (0, 0, left)
    # the free memory counts in the whole GPU's row, a MIG profile's rows only what it holds
    profiles = {p["profile"]: p for p in report["profiles"]}
    assert (profiles["gpu"]["memory_free"], profiles["gpu"]["memory_published"]) == (left, left)
    small = profiles["1g.18gb"]
    assert small["memory_published"] == small["memory_allocated"] and small["memory_free"] == 0
    # a 3g.71gb is published and not allocated, but it fits nowhere
    (pending,) = report["pending"]
    assert (pending["claim"], pending["reason"]) == ("ml/wants-3g.71gb", fr.COUNTERS_EXHAUSTED)
    assert "gpufleet claims explain" in pending["message"]
    assert c["pending_by_reason"][fr.COUNTERS_EXHAUSTED] == 1
    assert c["pending_by_reason"][fr.FREE_DEVICES] == 0


def test_a_3g_at_placement_0_leaves_free_each_placement_that_fits_in_the_other_half() -> None:
    devices, counter_set = h200_objects()
    (low,) = [
        n for n in devices if profile_of(devices[n]) == "3g.71gb" and 0 in memory_slices(devices[n])
    ]
    held_slices = memory_slices(devices[low])
    report = dynamic_h200(low)
    # free: each device placed in the slices the 3g leaves (the other counters suffice),
    # counted once per placement, per profile; every other unallocated device is blocked
    fit = [n for n in devices if n != low and not memory_slices(devices[n]) & held_slices]
    profiles = {p["profile"]: p for p in report["profiles"]}
    for profile, row in profiles.items():
        of_profile = [n for n in devices if profile_of(devices[n]) == profile]
        free = sum(1 for n in fit if n in of_profile)
        assert (row["devices_free"], row["devices_blocked"]) == (
            free, len(of_profile) - free - row["devices_allocated"]
        ), profile  # fmt: skip
    c = report["cluster"]
    assert c["devices_free"] == len(fit) > 0
    assert c["devices_blocked"] == len(devices) - len(fit) - 1
    capacity = fr.memory_bytes(counter_set["counters"]["memory"]["value"])
    left = capacity - consumed(devices[low], "memory")
    assert (c["memory_free"], c["memory_published"]) == (left, capacity)
    # no claim pending: the free memory is capacity nobody waits for
    assert c["memory_stranded"] == left
    # the largest device that fits now is the 3g.71gb of the other half
    largest = max(fr.memory_bytes(devices[n]["capacity"]["memory"]["value"]) for n in fit)
    assert report["nodes"][0]["largest_free"] == largest
    assert c["fragmentation"] == pytest.approx(1 - largest / left, abs=1e-4)
    # the DRA path counts what can be allocated, as the report does
    dra = report["paths"]["cluster"][1]
    assert (dra["devices"], dra["free"]) == (c["devices_allocated"] + c["devices_free"], len(fit))


def test_a_pending_3g_is_free_devices_all_allocated_or_counters_exhausted_on_dynamic_mig() -> None:
    devices, _counter_set = h200_objects()
    three = sorted(n for n in devices if profile_of(devices[n]) == "3g.71gb")
    (four,) = [n for n in devices if profile_of(devices[n]) == "4g.71gb"]
    second_half = min(memory_slices(devices[three[1]]))
    (one,) = [
        n
        for n in devices
        if profile_of(devices[n]) == "1g.18gb" and memory_slices(devices[n]) == {second_half}
    ]

    def reasons(*held: str) -> dict[str, str]:
        report = dynamic_h200(*held, pending=("3g.71gb",))
        return {p["claim"]: p["reason"] for p in report["pending"]}

    # one 3g held: the other placement fits
    assert reasons(three[0]) == {"ml/wants-3g.71gb": fr.FREE_DEVICES}
    # both 3g placements held: every device of the shape is allocated
    assert reasons(*three) == {"ml/wants-3g.71gb": fr.ALL_ALLOCATED}
    # a 4g on the first half and a 1g on the first slice of the second: neither 3g is
    # allocated, neither has its memory slices left
    report = dynamic_h200(four, one, pending=("3g.71gb",))
    blocked = {p["profile"]: p["devices_blocked"] for p in report["profiles"]}
    assert blocked["3g.71gb"] == len(three)
    assert reasons(four, one) == {"ml/wants-3g.71gb": fr.COUNTERS_EXHAUSTED}


def test_the_free_memory_of_a_dynamic_gpu_is_stranded_where_no_pending_shape_takes_it() -> None:
    devices, _counter_set = h200_objects()
    (low,) = [
        n for n in devices if profile_of(devices[n]) == "3g.71gb" and 0 in memory_slices(devices[n])
    ]
    held = memory_slices(devices[low])
    # a pending 3g fits in the free half and takes all of its slices: nothing stranded
    c = dynamic_h200(low, pending=("3g.71gb",))["cluster"]
    assert c["memory_free"] > 0 and c["memory_stranded"] == 0
    # a pending 2g.35gb fits too, but its placements that fit leave free slices no one
    # waiting takes: those are stranded, a slice's share of the memory counter each
    report = dynamic_h200(low, pending=("2g.35gb",))
    gpu = report["gpus"][0]
    fitting = [
        memory_slices(d)
        for d in devices.values()
        if profile_of(d) == "2g.35gb" and not memory_slices(d) & held
    ]
    holes = [i for i in gpu["memory_slices_free"] if i not in set().union(*fitting)]
    assert fitting and holes
    per_slice = gpu["memory"] // gpu["memory_slices"]
    assert report["cluster"]["memory_stranded"] == per_slice * len(holes)
    assert report["pending"][0]["reason"] == fr.FREE_DEVICES
    # a pending whole GPU fits nowhere: all of the free memory is stranded
    c = dynamic_h200(low, pending=("7g.141gb",))["cluster"]
    assert c["memory_stranded"] == c["memory_free"]


def test_a_dynamic_gpu_beside_the_static_fleet_leaves_its_figures_as_they_were(
    report: dict[str, Any],
) -> None:
    from tests.unit.dynamic_mig_slices import H200_NODE, allocated_claim, slices

    devices, counter_set = h200_objects()
    held = [n for n in devices if profile_of(devices[n]) == "1g.18gb"]
    claims = [*CLAIMS, *(allocated_claim(f"h{i}", H200_NODE, n) for i, n in enumerate(held))]
    mixed = fr.build_report(
        [*SLICES, *slices(H200_NODE)], claims, PODS, [*NODES, node(H200_NODE, "dynamic")]
    )
    assert [r for r in mixed["rows"] if r["pool"] != "dynamic"] == report["rows"]
    assert [n for n in mixed["nodes"] if n["node"] != H200_NODE] == report["nodes"]
    before, after = report["cluster"], mixed["cluster"]
    capacity = fr.memory_bytes(counter_set["counters"]["memory"]["value"])
    assert after["memory_published"] == before["memory_published"] + capacity
    assert after["devices_free"] == before["devices_free"]  # the H200 has none free
    assert after["memory_free"] == before["memory_free"] + mixed["gpus"][0]["memory_free"]
    # a pending whole H200: the static ones are allocated, the dynamic one is not, but
    # the seven 1g.18gb hold its counters; every other claim waits for what it did
    reasons = {p["claim"]: p["reason"] for p in report["pending"]}
    reasons["ml/wants-h200"] = fr.COUNTERS_EXHAUSTED
    assert {p["claim"]: p["reason"] for p in mixed["pending"]} == reasons


def test_one_pod_index_serves_the_pending_and_the_leaked_claims(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import pods as cpods

    built = []

    class Counted(cpods.PodIndex):
        def __init__(self, *pods: Any) -> None:
            built.append(1)
            super().__init__(*pods)

    whole = fr.build_report(SLICES, CLAIMS, PODS, NODES)
    monkeypatch.setattr(cpods, "PodIndex", Counted)
    assert fr.build_report(SLICES, CLAIMS, PODS, NODES) == whole
    assert len(built) == 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [("143771Mi", 143771 * 2**20), ("1.5Gi", 3 * 2**29), (7, 7), ("x", 0), (None, 0), ([1], 0)],
)
def test_memory_bytes_read_a_quantity_and_remember_its_text(value: Any, expected: int) -> None:
    assert fr.memory_bytes(value) == expected
    assert fr.memory_bytes(value) == expected  # the second read is the remembered one
