"""Hostile input for every ``gpufleet`` command (upgrade aside) and for the input parsing
the modules share. A CLI case must be refused before anything runs (ansible-runner, podman
and the API server are replaced by tripwires): exit 2, no traceback, and the message names
the option, the variable or the file. A module_utils case must raise the module's own error
(never RecursionError, UnicodeDecodeError, MemoryError, TypeError ...) naming its input.
"""
