"""Kubernetes' name and label-value rules (``plugins/module_utils/common/k8s_names.py``),
with the limits of ``k8s.io/apimachinery/pkg/util/validation/validation.go``."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import k8s_names as kn

pytestmark = pytest.mark.unit


def test_a_dns_label_is_at_most_63_characters_and_the_whole_text() -> None:
    assert kn.dns1123_label("a" * 63) is None
    assert "63" in (kn.dns1123_label("a" * 64) or "")
    assert kn.dns1123_label("team-a\n") is not None
    assert kn.dns1123_label("-a") is not None
    assert "not a string" in (kn.dns1123_label(7) or "")


def test_a_dns_subdomain_is_at_most_253_characters_of_dot_separated_labels() -> None:
    assert kn.dns1123_subdomain("gpu.nvidia.com") is None
    assert "253" in (kn.dns1123_subdomain("a" * 254) or "")
    assert kn.dns1123_subdomain("a..b") is not None
    assert kn.dns1123_subdomain("a.\n") is not None


def test_a_label_value_may_be_empty_and_holds_at_most_63_characters() -> None:
    assert kn.label_value("") is None
    assert kn.label_value("High_Priority.1") is None
    assert "63" in (kn.label_value("p" * 64) or "")
    assert kn.label_value("_a") is not None


def test_a_qualified_name_has_an_optional_subdomain_prefix() -> None:
    assert kn.qualified_name("kueue.x-k8s.io/queue-name") is None
    assert kn.qualified_name("team") is None
    assert kn.qualified_name("Bad_Prefix/x") is not None
    assert kn.qualified_name("a/" + "n" * 64) is not None
