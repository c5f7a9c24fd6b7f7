"""Fixtures that start real control planes (``tests.harness.controlplane``).

``control_plane``: one control plane per pinned Kubernetes release (session scope,
parameterised by version; a release whose binaries are not cached is skipped with the
command that builds them). Tests that only read from it share it; a test that needs its
own flags starts its own with ``start_control_plane``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpufleet.build import binaries, release_pins
from tests.harness.component_flags import parse_version
from tests.harness.controlplane import (
    REQUIRED_KUBERNETES_BINARIES,
    ControlPlane,
    build_command,
    missing_binaries,
)

RELEASES = release_pins.load_releases()

#: The pinned releases the tests cover (``optional`` ones are built only on request).
PINNED_VERSIONS: list[str] = [r.version for r in RELEASES.releases if not r.optional]
DEFAULT_VERSION: str = RELEASES.default


def minor(version: str) -> int:
    return parse_version(version)[1]


def version_id(version: str) -> str:
    return f"v{version}"


def require_binaries(version: str) -> None:
    """Skip the test when the control-plane binaries of ``version`` are not cached."""
    missing = missing_binaries(version)
    if missing:
        pytest.skip(
            f"Kubernetes v{version} control-plane binaries are not cached "
            f"({', '.join(missing)}); build them with: "
            f"{build_command(version, REQUIRED_KUBERNETES_BINARIES)} && "
            f"{build_command(tools=['etcd', 'kwok'])}"
        )


@pytest.fixture(scope="session", params=PINNED_VERSIONS, ids=version_id)
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """A running control plane of one pinned release, shared by the whole session.

    Tests may add objects (KWOK nodes, workloads in their own namespace) but must not
    change its flags. Parameterise a test with
    ``@pytest.mark.parametrize("control_plane", [DEFAULT_VERSION], indirect=True)`` to run
    it on one release only.
    """
    version: str = request.param
    require_binaries(version)
    cp = ControlPlane(version)
    cp.start()
    print(f"\ncontrol plane {cp.version} up in {cp.timings['total']:.1f}s: {_timings(cp)}")
    if cp.binaries and cp.binaries.etcd_note:
        print(cp.binaries.etcd_note)
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="module")
def apiserver() -> Iterator[ControlPlane]:
    """etcd and kube-apiserver of the default release and nothing else (no controller
    writes Nodes: the API server's request counters and the objects are the test's and
    the code's under test), shared by one test module."""
    require_binaries(DEFAULT_VERSION)
    cp = ControlPlane(DEFAULT_VERSION, with_controllers=False)
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


StartControlPlane = Callable[..., ControlPlane]


@pytest.fixture
def start_control_plane() -> Iterator[StartControlPlane]:
    """Factory: ``start_control_plane(version, extra_args=..., **kwargs)`` starts a private
    control plane (skipped when the release is not cached) and stops it after the test.

    A start that fails raises ``ControlPlaneError`` and leaves nothing running.
    """
    started: list[ControlPlane] = []

    def start(version: str | None = None, **kwargs: Any) -> ControlPlane:
        version = version or DEFAULT_VERSION
        require_binaries(version)
        cp = ControlPlane(version, **kwargs)
        started.append(cp)
        cp.start()
        print(f"\ncontrol plane {cp.version} up in {cp.timings['total']:.1f}s: {_timings(cp)}")
        return cp

    yield start
    for cp in started:
        cp.stop()


def _timings(cp: ControlPlane) -> str:
    return ", ".join(f"{k} {v:.1f}s" for k, v in cp.timings.items() if k != "total")


@pytest.fixture(scope="module")
def helm() -> Path:
    """The helm the project builds (the chart tests render charts with it); skipped, with
    the command that builds it, where it is not cached."""
    path = binaries.binary_path("helm")
    if not path.is_file():
        pytest.skip(
            f"helm is not cached at {path}; build it with: "
            "python -m gpufleet.build.binaries build --tools helm"
        )
    return path
