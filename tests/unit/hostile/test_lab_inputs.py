"""``gpufleet lab up --gpu-model`` with values the GPU simulator does not model (close
misspellings of the newest models, control characters, a pasted file): exit 2 naming
``--gpu-model`` and a model that exists, before any podman call or lab build (the
tripwires of ``conftest``), the value cut to one short line."""

from __future__ import annotations

import pytest

from tests.unit.hostile.inputs import assert_refused, invoke

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "model",
    ["", " ", "\x00", "b300", "NVIDIA B300 ", "nvidia gb300", "PG506-96GB", "NVIDIA GB200 NVL",
     "NVIDIA H200\nNVIDIA B300", "[red]x", "b" * 10_000],
    ids=["empty", "space", "nul", "short-name", "trailing-space", "lower-case", "no-prefix",
         "suffix", "two-lines", "markup", "10000-chars"],
)  # fmt: skip
def test_lab_up_refuses_a_model_the_gpu_simulator_lacks(
    hostile: dict[str, str], model: str
) -> None:
    result = invoke(hostile, ["lab", "up", "--gpu-model", model])
    assert_refused(result, ("--gpu-model",))
    assert "'NVIDIA B300'" in " ".join(result.output.split())  # a model that exists
    assert len(result.output) < 3_000, len(result.output)
