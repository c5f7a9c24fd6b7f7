"""gpufleet: provision, upgrade and validate Kubernetes GPU fleets that use DRA."""

__version__ = "0.1.0"
