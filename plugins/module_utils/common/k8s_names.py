# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Kubernetes' own rules for names and label values, as the API server applies them
(``staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go``: ``IsDNS1123Label``,
``IsDNS1123Subdomain``, ``IsValidLabelValue``, ``IsQualifiedName`` and their length
constants ``DNS1123LabelMaxLength`` 63, ``DNS1123SubdomainMaxLength`` 253,
``LabelValueMaxLength`` 63, ``qualifiedNameMaxLength`` 63), and the DRA driver names of
``pkg/apis/resource/validation`` (``ValidateCSIDriverName``, ``DriverNameMaxLength`` 63).

Each check matches the whole text: a trailing newline or space is refused (Python's ``$``
would let ``"team-a\\n"`` through). Each returns the reason the value is refused, or None.
Standard library only.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "DNS1123_LABEL_MAX",
    "DNS1123_SUBDOMAIN_MAX",
    "DRIVER_NAME_MAX",
    "LABEL_VALUE_MAX",
    "QUALIFIED_NAME_MAX",
    "dns1123_label",
    "dns1123_subdomain",
    "driver_name",
    "label_value",
    "qualified_name",
]

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63
QUALIFIED_NAME_MAX = 63
DRIVER_NAME_MAX = 63

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _judged(value: Any, pattern: re.Pattern[str], limit: int, what: str, form: str) -> str | None:
    """Why ``value`` is not ``what`` (at most ``limit`` characters matching ``pattern``
    over the whole text; ``form`` says the grammar in words), or None."""
    text = _text(value)
    if text is None:
        return f"is a {type(value).__name__}, not a string"
    if len(text) > limit:
        return f"is {len(text)} characters long, more than {what}'s {limit}"
    if not pattern.fullmatch(text):
        return f"is not {form}"
    return None


def dns1123_label(value: Any) -> str | None:
    """Why ``value`` is not a DNS-1123 label (a namespace, a LocalQueue, a Job), or None."""
    return _judged(
        value,
        _LABEL,
        DNS1123_LABEL_MAX,
        "a DNS label",
        "a DNS label (lower-case letters, digits and '-', starting and ending with a letter "
        "or digit)",
    )


def dns1123_subdomain(value: Any) -> str | None:
    """Why ``value`` is not a DNS-1123 subdomain (most object names), or None."""
    return _judged(
        value,
        _SUBDOMAIN,
        DNS1123_SUBDOMAIN_MAX,
        "a name",
        "a DNS subdomain (lower-case letters, digits, '-' and '.', each part starting and "
        "ending with a letter or digit)",
    )


def label_value(value: Any) -> str | None:
    """Why ``value`` is not a label value, or None (the empty string is one)."""
    return _judged(
        value,
        _VALUE,
        LABEL_VALUE_MAX,
        "a label value",
        "a label value (letters, digits, '-', '_' and '.', starting and ending with a "
        "letter or digit)",
    )


def qualified_name(value: Any) -> str | None:
    """Why ``value`` is not a qualified name (``[prefix/]name``: a label or annotation
    key), or None."""
    text = _text(value)
    if text is None:
        return f"is a {type(value).__name__}, not a string"
    prefix, slash, name = text.rpartition("/")
    if slash and (not prefix or dns1123_subdomain(prefix)):
        return "has a prefix that is not a DNS subdomain"
    if not name or len(name) > QUALIFIED_NAME_MAX or not _VALUE.fullmatch(name):
        return (
            f"is not a qualified name ([prefix/]name, the name at most {QUALIFIED_NAME_MAX} "
            "characters of letters, digits, '-', '_' and '.', starting and ending alphanumeric)"
        )
    return None


def driver_name(value: Any) -> str | None:
    """Why ``value`` is not a DRA driver name (a DNS subdomain of at most 63 characters,
    upper case allowed: ``ValidateCSIDriverName``), or None."""
    text = _text(value)
    return _judged(
        text.lower() if text is not None else value,
        _SUBDOMAIN,
        DRIVER_NAME_MAX,
        "a DRA driver name",
        "a DNS subdomain (letters, digits, '-' and '.', each part starting and ending with a "
        "letter or digit)",
    )
