"""What every DRA plan must hold, shared by the plan and transition tests: the gates each
component starts with, and hypothesis strategies over versions, features and gate wishes.
"""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import features as dra_features
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import sanitize as dra_sanitize
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import settings as dra_settings
from hypothesis import strategies as st

DRA = "DynamicResourceAllocation"

FEATURE_SETS = st.lists(st.sampled_from(dra_features.ALL_FEATURES), max_size=5, unique=True)


def _effective(plan: dra_settings.ComponentPlan, component: str) -> dict[str, bool]:
    out = {}
    for name in dra_gates.GATES:
        state = dra_gates.gate_state(name, plan.version)
        if state.known:
            out[name] = state.default
        elif state.status == "removed" and dra_gates.GATES[name].specs[-1].locked:
            out[name] = dra_gates.GATES[name].specs[-1].default
        else:
            out[name] = False
    out.update(plan.components[component].feature_gates)
    return out


def _assert_plan_is_startable(plan: dra_settings.ComponentPlan) -> None:
    v = plan.version
    served = {a.version for a in dra_api.served_api_versions(v)}
    for component in dra_core.COMPONENTS:
        settings_ = plan.components[component]
        effective = _effective(plan, component)
        for name, value in settings_.feature_gates.items():
            state = dra_gates.gate_state(name, v)
            assert state.known, (component, name, state)
            assert not state.locked, (component, name)
            if value:
                for dep in dra_gates.GATES[name].depends_on:
                    assert effective[dep], (component, name, dep)
            forbidden = settings_.forbidden_gates.get(name)
            assert forbidden is None or value not in forbidden.values
        if v.minor >= dra_core.DEPENDENCIES_DECLARED_SINCE:
            for name, on in effective.items():
                if on and dra_gates.gate_state(name, v).known:
                    for dep in dra_gates.GATES[name].depends_on:
                        assert effective[dep], (component, name, dep)
        report = dra_sanitize.sanitize(settings_.feature_gates, settings_.runtime_config, v)
        assert report.must_remove == [], report.must_remove
    for entry in plan.runtime_config:
        assert entry.split("=")[0].split("/")[1] in served
