"""Settings of a validate run (``plugins/module_utils/validate/run.py``)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit


def test_a_pending_threshold_of_zero_is_kept() -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import (
        run as validate_run,
    )

    assert validate_run.settings_from({"pending_threshold": 0}, []).pending_threshold_s == 0
    assert validate_run.settings_from({}, []).pending_threshold_s == 300
