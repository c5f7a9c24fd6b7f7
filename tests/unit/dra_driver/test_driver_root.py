"""Where NVIDIA's DRA kubelet plugin looks for the driver (``dra_driver.driver_root``), pinned
against the values recorded from its source (tests/unit/data/dra_driver/
kubelet-plugin-root-search.yaml, with the commit they were read at)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import driver_root as ddr

pytestmark = pytest.mark.unit

RECORD = (
    Path(__file__).resolve().parents[1] / "data" / "dra_driver" / "kubelet-plugin-root-search.yaml"
)


def _record() -> dict:
    return yaml.safe_load(RECORD.read_text())


def test_the_lists_are_the_plugins_at_the_recorded_commit() -> None:
    rec = _record()
    assert rec["commit"] == ddr.SOURCE_COMMIT
    assert f"{rec['repository']} {rec['path']}" == ddr.SOURCE
    assert tuple(d.lstrip("/") for d in rec[ddr.NVML_LIBRARY]) == ddr.LIBRARY_SEARCH_DIRS
    assert tuple(d.lstrip("/") for d in rec[ddr.SMI_BINARY]) == ddr.BINARY_SEARCH_DIRS


def test_the_source_is_cited_where_the_lists_are_written() -> None:
    text = Path(ddr.__file__).read_text()
    assert ddr.SOURCE_COMMIT in text and "cmd/gpu-kubelet-plugin/root.go" in text


def test_the_root_itself_is_searched_first_and_usr_lib_never() -> None:
    assert ddr.search_dirs("libnvidia-ml.so.1")[0] == ""
    assert "usr/lib" not in ddr.search_dirs("libnvidia-ml.so.1")
    assert "lib" not in ddr.search_dirs("libnvidia-ml.so.1")
    assert ddr.search_dirs("nvidia-smi")[:2] == ("", "opt/bin")


def test_search_items_are_relative_paths_in_the_plugins_order() -> None:
    items = ddr.search_items(["libnvidia-ml.so.1", "nvidia-smi"])
    assert items[0] == "libnvidia-ml.so.1"
    assert items[1] == "usr/lib64/libnvidia-ml.so.1"
    assert items[7] == "nvidia-smi"
    assert items[-1] == "sbin/nvidia-smi"
    assert len(items) == 1 + len(ddr.LIBRARY_SEARCH_DIRS) + 1 + len(ddr.BINARY_SEARCH_DIRS)
    assert not any(i.startswith("/") for i in items)


@pytest.mark.parametrize("name", ["libcuda.so.1", "", "../nvidia-smi", "nvidia-smi "])
def test_another_file_is_refused_by_name(name: str) -> None:
    with pytest.raises(ValueError, match="is not a file the DRA kubelet plugin looks up"):
        ddr.search_dirs(name)
