"""Wheel build hook: ship the Ansible collection beside the Python package.

ansible-core scans every ``sys.path`` entry for an ``ansible_collections`` directory, so
a wheel that installs ``ansible_collections/gpufleet/cluster`` makes the collection
resolvable with no ``ansible-galaxy`` step. Only the standard wheel gets the copy; an
editable install reaches the working tree through ``.collections/`` instead, so that no
stale copy shadows it.
"""

from __future__ import annotations

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

COLLECTION_DIR = "ansible_collections/gpufleet/cluster"
COLLECTION_CONTENT = (
    "galaxy.yml",
    # the collections the roles call, for ansible-galaxy collection install -r
    "requirements.yml",
    "meta",
    "plugins",
    "roles",
    "playbooks",
    "inventory",
    "README.md",
)


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        if version != "standard":
            return
        for item in COLLECTION_CONTENT:
            build_data["force_include"][item] = f"{COLLECTION_DIR}/{item}"
