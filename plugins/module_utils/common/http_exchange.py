# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""One HTTP exchange with an outside server under one deadline: connect, TLS handshake,
request, headers and body together end within ``deadline_s`` seconds, however slowly the
server sends (a per-read socket timeout alone would wait forever for a server that sends
one byte every few seconds).

The host name is resolved in a helper thread that the exchange waits for only as long as
the deadline allows (``getaddrinfo`` itself takes no timeout, and a resolver that does not
answer would otherwise hold the exchange for as long as the system's resolver settings
say); each address is then tried with the time left, not a fresh timeout each. The rest
is thread-free: the request asks the server to close the connection after its answer
(``Connection: close``); the answer's bytes are read as they come, each wait on the socket
limited to the time left, and at most ``max_bytes`` of them; ``http.client`` then parses
what was read (status, headers, ``Content-Length`` or chunked body).

A URL's userinfo (``http://user:password@host``) is sent as HTTP basic authentication
(RFC 7617), never used as part of the host name, and never shown: :func:`shown_url`
is what messages print. Standard library only.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import io
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Answer",
    "HttpError",
    "Target",
    "arm",
    "budget",
    "exchange",
    "parse_url",
    "read_within",
    "resolve",
    "shown_url",
]

#: Seconds one exchange may take, unless the caller says otherwise.
DEFAULT_DEADLINE = 30.0
#: Bytes read per wait on the socket.
_CHUNK = 65536


class _Budget(threading.local):
    """The deadline of the exchange this thread is in (None: none), and the longest
    single wait on a socket within it."""

    deadline: float | None = None
    per_wait: float = DEFAULT_DEADLINE


_BUDGET = _Budget()


@contextlib.contextmanager
def budget(deadline: float, per_wait: float) -> Iterator[None]:
    """Within the block, every read of a socket armed by :func:`arm` in this thread waits
    at most the time left to ``deadline`` (a ``time.monotonic()`` value; at most
    ``per_wait`` seconds per wait) and fails with TimeoutError once it has passed: one
    deadline for an exchange made by a client library (urllib3) that only knows per-read
    timeouts."""
    before = (_BUDGET.deadline, _BUDGET.per_wait)
    _BUDGET.deadline, _BUDGET.per_wait = deadline, per_wait
    try:
        yield
    finally:
        _BUDGET.deadline, _BUDGET.per_wait = before


def _shrink(sock: socket.socket) -> None:
    deadline = _BUDGET.deadline
    if deadline is None:
        return
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the exchange ran past its deadline")
    socket.socket.settimeout(sock, min(left, _BUDGET.per_wait))


class _BoundedSocket(socket.socket):
    __slots__ = ()

    def recv(self, *args: Any) -> bytes:
        _shrink(self)
        return super().recv(*args)

    def recv_into(self, *args: Any) -> int:
        _shrink(self)
        return super().recv_into(*args)


class _BoundedSSLSocket(ssl.SSLSocket):
    def recv(self, *args: Any) -> bytes:
        _shrink(self)
        return super().recv(*args)

    def recv_into(self, *args: Any) -> int:
        _shrink(self)
        return super().recv_into(*args)


def arm(sock: Any) -> Any:
    """``sock`` (a connected socket, plain or TLS) made to obey :func:`budget`; any other
    object is returned as it is."""
    # the exact classes: an instance of a subclass (one armed already) is left as it is
    if type(sock) is ssl.SSLSocket:  # pylint: disable=unidiomatic-typecheck
        sock.__class__ = _BoundedSSLSocket
    elif type(sock) is socket.socket:  # pylint: disable=unidiomatic-typecheck
        sock.__class__ = _BoundedSocket
    return sock


def armed(sock: Any) -> bool:
    """Whether ``sock`` was made to obey :func:`budget` by :func:`arm`: each wait of a
    read on it ends by the budget's deadline, so a read may wait more than once."""
    return isinstance(sock, _BoundedSocket | _BoundedSSLSocket)


class HttpError(Exception):
    """The exchange failed or ran past its deadline; ``str()`` says why (the URL shown
    without credentials). ``status`` is the HTTP status when the server answered one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Target:
    """A parsed ``http(s)://[user[:password]@]host[:port][/path][?query]`` URL."""

    scheme: str
    host: str
    port: int
    path: str
    user: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def shown(self) -> str:
        """The URL as messages print it: the password replaced by ``***``, the query
        dropped."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        netloc = host if self.port == default else f"{host}:{self.port}"
        if self.user is not None:
            netloc = f"{urllib.parse.quote(self.user, safe='')}:***@{netloc}"
        return f"{self.scheme}://{netloc}{self.path}"


def parse_url(url: str) -> Target:
    """``url`` as a :class:`Target`; raises HttpError (with the URL shown without its
    password) for a URL that is not ``http``/``https`` with a host and a port 1-65535.
    Percent-escapes in the user and password are decoded."""
    try:
        parts = urllib.parse.urlsplit(str(url))
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port, parts = None, None, None
    if parts is None or parts.scheme not in ("http", "https") or not host or port == 0:
        raise HttpError(
            f"{_redacted(str(url))[:80]!r} is not an http(s) URL with a host; fix: give e.g. "
            "http://prometheus:9090"
        )
    if any(c in host for c in " \t\r\n/\\") or any(ord(c) < 32 for c in str(url)):
        raise HttpError(
            f"{_redacted(str(url))[:80]!r} holds a space or control character; fix: give "
            "the URL without it"
        )
    user = urllib.parse.unquote(parts.username) if parts.username is not None else None
    password = urllib.parse.unquote(parts.password) if parts.password is not None else None
    return Target(
        scheme=parts.scheme,
        host=host,
        port=port or (443 if parts.scheme == "https" else 80),
        path=parts.path.rstrip("/"),
        user=user,
        password=password,
    )


def shown_url(url: str) -> str:
    """``url`` as it may be printed: a password replaced by ``***`` and the query and
    fragment dropped; text that does not parse as a URL is shown after its last ``@``."""
    try:
        return parse_url(url).shown
    except HttpError:
        return _redacted(str(url))


def _redacted(text: str) -> str:
    text = text.split("?")[0].split("#")[0]
    if "@" not in text:
        return text
    scheme, sep, _sep = text.partition("://")
    return (scheme + sep if sep else "") + "***@" + text.rpartition("@")[2]


@dataclass(frozen=True)
class Answer:
    """The server's answer: HTTP ``status``, ``content_type`` (lower case, without
    parameters) and ``body`` (bytes, the transfer encoding undone)."""

    status: int
    content_type: str
    body: bytes


class _Recorded:
    """What ``http.client.HTTPResponse`` reads an answer from: the bytes already read."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(io.BytesIO(self._data))  # type: ignore[arg-type]


def _left(deadline: float, shown: str, seconds: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise HttpError(
            f"{shown} did not finish its answer within {seconds:g} s; fix: check that the URL "
            "is the server's and that it answers (curl it), or try again"
        )
    return left


def _is_address(host: str) -> bool:
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except OSError:
            continue
        return True
    return False


def resolve(target: Target, deadline: float, seconds: float) -> list[tuple[Any, ...]]:
    """``getaddrinfo`` of the target's host and port (stream sockets) by ``deadline``: a
    name is resolved in a daemon thread, waited for with the time left. Raises HttpError
    when the deadline passes first, OSError (``socket.gaierror``) when the name does not
    resolve."""
    port = target.port
    if _is_address(target.host):
        return socket.getaddrinfo(target.host, port, type=socket.SOCK_STREAM)
    found: list[Any] = []

    def lookup() -> None:
        try:
            found.append(socket.getaddrinfo(target.host, port, type=socket.SOCK_STREAM))
        except (OSError, UnicodeError) as err:
            found.append(err)

    thread = threading.Thread(target=lookup, name="resolve " + target.host, daemon=True)
    thread.start()
    thread.join(_left(deadline, target.shown, seconds))
    if not found:
        raise HttpError(
            f"{target.shown}: the name {target.host} did not resolve within {seconds:g} s; "
            "fix: check the host name and this machine's DNS settings (/etc/resolv.conf), "
            "or give the server's address"
        )
    if isinstance(found[0], BaseException):
        raise found[0]
    return list(found[0])


def _connect(
    target: Target, deadline: float, seconds: float, context: ssl.SSLContext | None
) -> socket.socket:
    error: OSError = OSError(f"{target.host} has no address")
    for family, kind, proto, _name, address in resolve(target, deadline, seconds):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(_left(deadline, target.shown, seconds))
            sock.connect(address)
            break
        except OSError as err:
            sock.close()
            error = err
        except HttpError:
            sock.close()
            raise
    else:
        raise error
    if target.scheme != "https":
        return sock
    context = context or ssl.create_default_context()
    sock.settimeout(_left(deadline, target.shown, seconds))
    return context.wrap_socket(sock, server_hostname=target.host)


def _request(target: Target, path_query: str, headers: Mapping[str, str]) -> bytes:
    host = f"[{target.host}]" if ":" in target.host else target.host
    lines = [f"GET {path_query} HTTP/1.1", f"Host: {host}:{target.port}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if target.user is not None:
        pair = f"{target.user}:{target.password or ''}".encode()
        lines.append("Authorization: Basic " + base64.b64encode(pair).decode("ascii"))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")


def read_within(
    read: Callable[[int], bytes],
    set_timeout: Callable[[float], None] | None,
    deadline: float,
    seconds: float,
    cap: int,
    shown: str,
) -> bytes:
    """Every byte ``read(n)`` gives until it gives none, by ``deadline`` (a
    ``time.monotonic()`` value; ``seconds`` is the whole deadline, for the message), each
    wait limited to the time left (``set_timeout``: the socket's ``settimeout``), at most
    ``cap`` bytes. ``read`` must return what one wait on the socket brings (``recv``,
    ``read1``), so that a peer sending one byte at a time cannot outlast the deadline.
    Raises HttpError naming ``shown`` when the deadline passes or more than ``cap`` bytes
    come. The one reader of every outside answer (``exchange``, the Kubernetes API client)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        left = _left(deadline, shown, seconds)
        if set_timeout is not None:
            set_timeout(left)
        try:
            chunk = read(_CHUNK)
        except TimeoutError:
            _left(deadline, shown, seconds)
            continue
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > cap:
            raise HttpError(
                f"{shown} answered more than {cap:,} bytes (reading stopped there); "
                "fix: check that the URL is the server's"
            )


def exchange(
    url: str,
    path_query: str,
    deadline_s: float = DEFAULT_DEADLINE,
    max_bytes: int = 64 * 1024 * 1024,
    headers: Mapping[str, str] | None = None,
    what: str = "the server",
    context: ssl.SSLContext | None = None,
) -> Answer:
    """GET ``path_query`` (``/api/v1/query?query=...``, appended to the URL's own path)
    of the server at ``url``, all of it within ``deadline_s`` seconds, at most
    ``max_bytes`` of answer (headers and body) read. Raises HttpError for a URL that does
    not parse, a server that cannot be reached, an exchange that runs past the deadline,
    an answer larger than ``max_bytes`` or one that is not HTTP; any status is returned
    (the caller judges it). ``what`` names the server in messages; ``context`` is the TLS
    setting of an https URL (its CA, a client certificate), the system's CAs when None."""
    target = parse_url(url)
    deadline = time.monotonic() + deadline_s
    try:
        sock = _connect(target, deadline, deadline_s, context)
    except HttpError:
        raise
    except (OSError, ssl.SSLError, UnicodeError) as err:
        reason = " ".join(str(getattr(err, "strerror", None) or err).split())[:200]
        raise HttpError(
            f"cannot reach {what} at {target.shown}: {reason}; fix: check the URL and that this "
            "machine can reach it"
        ) from None
    try:
        sock.settimeout(_left(deadline, target.shown, deadline_s))
        sock.sendall(_request(target, target.path + path_query, headers or {}))
        raw = read_within(sock.recv, sock.settimeout, deadline, deadline_s, max_bytes, target.shown)
    except (OSError, ssl.SSLError) as err:
        reason = " ".join(str(getattr(err, "strerror", None) or err).split())[:200]
        raise HttpError(
            f"{target.shown} broke off the exchange: {reason}; fix: try again"
        ) from None
    finally:
        sock.close()
    return _parse(raw, target)


def _parse(raw: bytes, target: Target) -> Answer:
    """The :class:`Answer` in the bytes ``raw`` of an HTTP/1.x response."""
    response = http.client.HTTPResponse(_Recorded(raw))  # type: ignore[arg-type]
    try:
        response.begin()
        body = response.read()
    except (http.client.HTTPException, ValueError, OSError) as err:
        kind = type(err).__name__
        raise HttpError(
            f"{target.shown} did not answer HTTP, or its answer was cut short ({kind}); fix: "
            "check that the URL is the server's (its scheme, host and port)"
        ) from None
    content_type = (response.getheader("Content-Type") or "").split(";")[0].strip().lower()
    return Answer(status=response.status, content_type=content_type, body=body)
