"""A CDI spec judged as the CDI library loads it and as a container with a GPU needs it
(``plugins/module_utils/nvidia/cdi_spec.py``), on the real ``nvidia-ctk`` 1.20.2 specs of
the h200-single host and hand-broken variants whose library verdicts were read from the
library itself (tests/unit/nvidia/cdi_variants.py)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import cdi_spec

from tests.unit.nvidia import cdi_variants as cv

pytestmark = pytest.mark.unit


def every_node(_path: str) -> bool:
    return True


@pytest.mark.parametrize("name", sorted(cv.VARIANTS))
def test_the_library_verdict_of_each_spec(name: str) -> None:
    build, loads, _ = cv.VARIANTS[name]
    problems = cdi_spec.library_problems(build())
    assert (problems == []) is loads, problems


@pytest.mark.parametrize("name", sorted(cv.VARIANTS))
def test_the_gpu_verdict_of_each_spec(name: str) -> None:
    build, _, broken = cv.VARIANTS[name]
    assert bool(cdi_spec.gpu_problems(build(), every_node)) is broken


def test_the_real_spec_passes_both_and_was_written_for_the_host_root() -> None:
    spec = cv.load(cv.REAL)
    assert cdi_spec.library_problems(spec) == []
    assert cdi_spec.gpu_problems(spec, every_node) == []
    assert cdi_spec.spec_driver_root(spec) == "/"


def test_the_no_dev_spec_loads_but_no_device_has_its_nodes() -> None:
    spec = cv.load(cv.NO_DEV)
    assert cdi_spec.library_problems(spec) == []
    problems = cdi_spec.gpu_problems(spec, every_node)
    assert problems == [
        f"device {name!r} {tail}"
        for name in ("0", cv.UUID, "all")
        for tail in (
            "has no /dev/nvidia<N> device node: the container sees no GPU",
            "and the common edits lack /dev/nvidiactl, /dev/nvidia-uvm",
        )
    ]
    root = cdi_spec.spec_driver_root(spec)
    assert root == "/usr/local/nvidia"
    assert cdi_spec.generate_command(root) == (
        "nvidia-ctk cdi generate --driver-root=/usr/local/nvidia --dev-root=/ "
        "--device-name-strategy=index --device-name-strategy=uuid "
        "--output=/var/run/cdi/nvidia.yaml"
    )


def test_library_messages_name_the_device_and_the_rule() -> None:
    build = cv.VARIANTS["empty-device-edits"][0]
    assert cdi_spec.library_problems(build()) == ["device '0': invalid device, empty device edits"]
    assert cdi_spec.library_problems(cv.VARIANTS["no-devices"][0]()) == ["invalid spec, no devices"]


def test_a_spec_without_devices_explains_why() -> None:
    (problem,) = cdi_spec.gpu_problems(cv.VARIANTS["no-devices"][0](), every_node)
    assert "nvidia-ctk found no GPU" in problem and "--dev-root" in problem


def test_a_device_node_the_host_lacks_is_named_once() -> None:
    spec = cv.VARIANTS["host-path-elsewhere"][0]()
    problems = cdi_spec.gpu_problems(spec, lambda p: p != "/dev/nvidia7")
    assert problems == [
        "device '0': device node /dev/nvidia0 comes from /dev/nvidia7, which this host lacks "
        "(the CDI library fails to inject it: failed to stat CDI host device)"
    ]
    # not known is not judged
    assert cdi_spec.gpu_problems(spec, lambda p: None) == []


def test_a_node_with_its_type_and_major_needs_no_host_path() -> None:
    """The library injects a minimally specified node without stat-ing the host (the
    toolkit's molecule scenario writes such nodes for the GPU simulator)."""
    spec = cv.VARIANTS["host-path-elsewhere"][0]()
    spec["devices"][0]["containerEdits"]["deviceNodes"][0]["type"] = "c"
    assert cdi_spec.gpu_problems(spec, lambda p: p != "/dev/nvidia7") == []
    del spec["devices"][0]["containerEdits"]["deviceNodes"][0]["major"]
    assert len(cdi_spec.gpu_problems(spec, lambda p: p != "/dev/nvidia7")) == 1


def test_other_kinds_are_not_judged_for_gpus() -> None:
    spec = cv.load(cv.NO_DEV)
    spec["kind"] = "example.com/gpu"
    assert cdi_spec.gpu_problems(spec, every_node) == []


@pytest.mark.parametrize(
    ("root", "dev", "flags"),
    [
        ("/", "/", []),
        ("", "/", []),
        ("/usr/local/nvidia", "/", ["--driver-root=/usr/local/nvidia", "--dev-root=/"]),
        ("/usr/local/nvidia/", "/", ["--driver-root=/usr/local/nvidia", "--dev-root=/"]),
        (
            "/run/nvidia/driver",
            "/run/nvidia/driver",
            [
                "--driver-root=/run/nvidia/driver",
                "--dev-root=/run/nvidia/driver",
            ],
        ),
    ],
)
def test_generate_argv_passes_dev_root_with_every_driver_root(
    root: str, dev: str, flags: list[str]
) -> None:
    argv = cdi_spec.generate_argv(root, dev, "/var/run/cdi/nvidia.yaml.new")
    assert argv == [
        "nvidia-ctk",
        "cdi",
        "generate",
        *flags,
        "--device-name-strategy=index",
        "--device-name-strategy=uuid",
        "--output=/var/run/cdi/nvidia.yaml.new",
    ]


@pytest.mark.parametrize(
    ("root", "dev", "output", "what"),
    [
        ("usr/local/nvidia", "/", "/x.yaml", "driver root"),
        ("/usr/local/nvidia", "dev", "/x.yaml", "dev root"),
        ("/", "/", "nvidia.yaml", "output"),
    ],
)
def test_generate_argv_refuses_relative_paths(root: str, dev: str, output: str, what: str) -> None:
    with pytest.raises(ValueError, match=f"the {what} .* is not an absolute path"):
        cdi_spec.generate_argv(root, dev, output)
