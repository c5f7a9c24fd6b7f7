"""The scheduler's DynamicResources plugin in its configuration
(``plugins/module_utils/kube/scheduler_config.py``).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import manifests as kce
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import scheduler_config as schc
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.flags import (
    ConfigEditError,
)

pytestmark = pytest.mark.unit


SCHED = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
profiles:
- schedulerName: default-scheduler
- schedulerName: gpu-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: NodeResourcesFit
      - name: DefaultPreemption
      disabled:
      - name: '*'
    filter:
      disabled:
      - name: DynamicResources
    score:
      disabled:
      - name: '*'
"""


def test_scheduler_config_without_profiles_has_dynamic_resources() -> None:
    text = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    assert schc.scheduler_config_has_dynamic_resources(text)
    assert not schc.enable_dynamic_resources(text).changed


def test_enable_dynamic_resources_fixes_star_and_named_disables() -> None:
    assert not schc.scheduler_config_has_dynamic_resources(SCHED)
    result = schc.enable_dynamic_resources(SCHED)
    assert schc.scheduler_config_has_dynamic_resources(result.text)
    data = kce.yaml.safe_load(result.text)
    plugins = data["profiles"][1]["plugins"]
    # placed before DefaultPreemption, as the default plugin set has it
    assert plugins["multiPoint"]["enabled"] == [
        {"name": "NodeResourcesFit"},
        {"name": "DynamicResources"},
        {"name": "DefaultPreemption"},
    ]
    assert "disabled" not in plugins["filter"]
    # score is optional for DRA and older releases lack DynamicResources scoring: untouched
    assert plugins["score"] == {"disabled": [{"name": "*"}]}
    assert data["profiles"][0] == {"schedulerName": "default-scheduler"}
    assert data["clientConnection"] == {"kubeconfig": "/etc/kubernetes/scheduler.conf"}
    assert not schc.enable_dynamic_resources(result.text).changed


def test_scheduler_config_of_an_old_api_is_refused() -> None:
    text = "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n"
    with pytest.raises(ConfigEditError, match=r"kubescheduler\.config\.k8s\.io/v1"):
        schc.scheduler_config_has_dynamic_resources(text)
