"""Resource API versions, DeviceClasses and the scheduler profile of a listed cluster
(``plugins/module_utils/validate/api.py``).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import api as vapi
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import (
    report as validate_report,
)

from tests.unit.validate.listed_cluster import by_id, healthy
from tests.unit.validate_objects import (
    GPU_CLASS,
)

pytestmark = pytest.mark.unit


def test_missing_resource_api_version_and_device_class() -> None:
    listing, settings = healthy()
    listing.resource_group = {"versions": [{"groupVersion": "resource.k8s.io/v1beta2"}]}
    listing.classes = [GPU_CLASS]
    c = by_id(vapi.api_checks(listing, settings))
    assert c["api.resource-versions"].status == "fail"
    assert "resource.k8s.io/v1 is not served" in c["api.resource-versions"].problems[0].message
    assert c["api.deviceclasses"].status == "fail"
    assert c["api.deviceclasses"].problems[0].subject == "mig.nvidia.com"


def test_scheduler_profile_without_dynamicresources_fails() -> None:
    listing, settings = healthy()
    sched = [
        {
            "host": "cp",
            "custom_config": True,
            "message": "m",
            "changes": [
                {
                    "where": "profile default-scheduler plugins.multiPoint.disabled",
                    "what": "DynamicResources",
                    "old": "disabled",
                    "new": None,
                    "why": "DRA needs it",
                }
            ],
        }
    ]
    c = by_id(vapi.api_checks(listing, settings, sched))
    assert c["api.scheduler-dynamicresources"].status == "fail"


def _default_profile_on_beta(audit: dict | None) -> validate_report.Check:
    listing, settings = healthy()
    listing.version = {"gitVersion": "v1.33.13"}
    sched = [{"host": "cp", "custom_config": False, "message": "no --config", "changes": []}]
    return by_id(vapi.api_checks(listing, settings, sched, audit))["api.scheduler-dynamicresources"]


def test_default_profile_on_a_beta_release_warns_unless_the_gate_is_on_there() -> None:
    # 1.33: DynamicResourceAllocation is beta and off by default; the default profile runs
    # DynamicResources only while the gate is on
    assert _default_profile_on_beta(None).status == "warn"
    cell = {"state": "running", "source": "process", "runtime_config": {}}
    off = {"summary": {"cells": {"kube-scheduler": {"cp": {**cell, "feature_gates": {}}}}}}
    assert _default_profile_on_beta(off).status == "warn"
    on = {
        "summary": {
            "cells": {
                "kube-scheduler": {
                    "cp": {**cell, "feature_gates": {"DynamicResourceAllocation": True}}
                }
            }
        }
    }
    assert _default_profile_on_beta(on).status == "pass"


def test_the_runtime_config_fix_names_options_the_cli_has() -> None:
    """The fix of api.resource-versions (the kubermatic-style runtime-config case) names
    ``gpufleet gates plan --to``: ``gates plan`` has no ``--kubernetes-version``."""
    from tests.unit.cli.test_suggested_commands import problems

    listing, settings = healthy()
    listing.resource_group = {"versions": [{"groupVersion": "resource.k8s.io/v1beta2"}]}
    fix = by_id(vapi.api_checks(listing, settings))["api.resource-versions"].fix
    assert "gpufleet gates plan --to " in fix
    lines = [part.split(" shows")[0].split(" sets")[0] for part in fix.split("gpufleet ")[1:]]
    assert lines[0].startswith("gates plan --to ")
    assert lines[1:] == ["gates apply -i INVENTORY"]
    assert problems([("fix", line.replace(" INVENTORY", "")) for line in lines]) == []
    assert problems([("fix", "gates plan --kubernetes-version 1.37")])
