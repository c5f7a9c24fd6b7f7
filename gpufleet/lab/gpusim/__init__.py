"""GPU simulator: the ``nvidia-smi`` that stands in for the card on lab nodes.

Standard library only (Python 3.11): the package is copied onto Debian lab nodes that
have ``python3`` and nothing else. The state file it shares with the DRA kubelet plugin
(simulator) is described in ``lab/gpu-simulator/README.md``.
"""
