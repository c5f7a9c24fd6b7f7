"""Hypothesis strategies over feature-gate merges and what a component makes of its flags,
shared by the flag and command-line tests.
"""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import flags as kfl
from hypothesis import strategies as st


def effective_gates(value: str | None) -> dict[str, bool]:
    return {e.key: bool(kfl.parse_go_bool(e.value)) for e in kfl.parse_feature_gates(value or "")}


GATE = st.from_regex(r"[A-Z][A-Za-z0-9]{0,8}", fullmatch=True)

GO_BOOL = st.sampled_from(sorted(kfl._GO_TRUE | kfl._GO_FALSE))

GATE_TOKEN = st.builds(
    lambda k, v, pad: f"{pad}{k}={v}{pad}", GATE, GO_BOOL, st.sampled_from(["", " "])
)

GATE_VALUE = st.lists(GATE_TOKEN, max_size=8).map(",".join)


@st.composite
def gate_merges(draw: st.DrawFn) -> tuple[str, dict[str, bool], set[str]]:
    value = draw(GATE_VALUE)
    present = sorted(effective_gates(value))
    pool = st.sampled_from(present) | GATE if present else GATE
    wanted = draw(st.dictionaries(pool, st.booleans(), max_size=4))
    absent = draw(st.sets(pool, max_size=4)) - set(wanted)
    return value, wanted, absent
