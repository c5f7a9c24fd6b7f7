# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The Kubernetes API client: raw JSON requests to the API server with the ``kubernetes``
client's configuration and authentication, one deadline per request, requests counted,
lists paged and decoded one item at a time.

Objects stay plain JSON dicts (no model classes), independent of the client release. A
list page is decoded by ``msgspec`` where it is installed (in C, each item straight into
the fields its trim reads), else item by item by the standard library's ``json``; both
give the same items. A paged list is stored compressed (``PagedList``) and walked again
page by page; what is listed and how each kind is trimmed is ``cluster/listing.py``.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import marshal
import re
import threading
import time
import urllib.parse
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import http_exchange as web

try:
    import msgspec
except ImportError:  # the standard library's json decodes every page
    msgspec = None

__all__ = [
    "Kube",
    "KubeError",
    "PagedList",
    "decode_list",
    "fast_page",
    "folded",
    "gc_paused",
    "kube_auth_argspec",
]


#: Seconds to connect to the API server, and to wait for the next bytes of an answer.
#: A read that times out is not retried (urllib3 would retry a GET three times), so a
#: server that accepts connections and never answers ends a request after 15 s.
CONNECT_TIMEOUT = 5
READ_TIMEOUT = 15
#: (connect, read) seconds of every request: a ``Kube``'s unless it is given its own, and
#: ``_request_timeout`` of every call made with the client's generated API classes.
REQUEST_TIMEOUT = (CONNECT_TIMEOUT, READ_TIMEOUT)
#: Seconds one request may take in all: connect, headers and body
#: (``common.http_exchange.read_within`` reads the body under it), however slowly the server sends.
#: A page of 2,000 pods from a loaded API server comes in a few seconds.
REQUEST_DEADLINE = 60
#: Bytes of one answer (a page of 2,000 pods is about 20 MB).
MAX_ANSWER_BYTES = 512 * 1024 * 1024
#: Items per list request, unless told otherwise (``validate_page_size``): measured on
#: 100,000 ResourceClaims and 95,000 pods, pages of 5,000 put about 100 MiB in flight
#: (the answer's bytes, its text and the decoded items), pages of 2,000 about 50 MiB,
#: pages of 1,000 no less time; 2,000 is 50 requests for 100,000 claims.
PAGE_SIZE = 2000
#: Pages one list may take (``Kube.pages``); a server whose ``continue`` tokens never
#: end is stopped there.
MAX_PAGES = 10_000
#: Seconds a kubeconfig's exec credential plugin (``users[].user.exec``) may run: the
#: client waits for it without a limit, so a plugin that hangs (on a cloud endpoint that
#: does not answer) would hang every command. A minute leaves room for a plugin that
#: asks for an interactive login.
EXEC_TIMEOUT = 60
#: Shortest credential ``Kube.hidden`` replaces in a server's message (a shorter one would
#: blot out common words and is no real credential).
MIN_HIDDEN = 4


class KubeError(Exception):
    """A request failed: ``status`` (HTTP status or None when the server was not reached)
    and the server's message."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(f"{status or 'no answer'}: {message}")
        self.status = status
        self.message = message


class Kube:
    """One API server connection from a kubeconfig (``None``: ``KUBECONFIG`` or
    ``~/.kube/config``; in a pod, the in-cluster configuration). ``connections``: HTTP
    connections kept for requests sent from several threads at once (default: the
    client's, five per CPU). ``timeout``: (connect, read) seconds of each request (default:
    ``REQUEST_TIMEOUT`` as it is when the Kube is made). Raises KubeError when the
    kubeconfig cannot be loaded or the ``kubernetes`` package is missing.

    Requests go through the client's ``ApiClient`` only, never its generated API classes
    (``CoreV1Api`` alone takes about a second of CPU to import, and each of its calls
    validates its arguments with pydantic)."""

    def __init__(
        self,
        kubeconfig: str | None = None,
        context: str | None = None,
        connections: int | None = None,
        timeout: tuple[float, float] | None = None,
    ) -> None:
        self.client = api_client(kubeconfig, context, connections)
        self._counters(timeout)

    def _counters(self, timeout: tuple[float, float] | None = None) -> None:
        self.requests = 0
        self.log: list[str] = []
        self._lock = threading.Lock()
        self.timeout = REQUEST_TIMEOUT if timeout is None else timeout

    @classmethod
    def from_client(cls, api_client: Any, timeout: tuple[float, float] | None = None) -> Kube:
        """A Kube over an existing ``kubernetes.client.ApiClient``."""
        kube = cls.__new__(cls)
        kube.client = bound_connections(api_client)
        kube._counters(timeout)
        return kube

    @property
    def server(self) -> str:
        """The API server's URL (``clusters[].cluster.server`` of the kubeconfig) as it
        may be printed: credentials in it are hidden (``shown_url``)."""
        return shown_url(
            str(getattr(getattr(self.client, "configuration", None), "host", "") or "?")
        )

    def request(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, Any]] = (),
        body: Any = None,
        content_type: str = "application/json",
        raw: bool = False,
        decode: Callable[[bytes | str], Any] | None = None,
    ) -> Any:
        """One request; returns the decoded JSON body (``decode(body)`` when given).
        Raises KubeError for a status outside 2xx (with the server's message) or a
        connection failure."""
        with self._lock:  # list_cluster reads several kinds at once
            self.requests += 1
            self.log.append(
                f"{method} {path}" + (f"?{urllib.parse.urlencode(list(query))}" if query else "")
            )
        headers = {"Accept": "*/*" if raw else "application/json"}
        deadline = time.monotonic() + REQUEST_DEADLINE
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            with web.budget(deadline, self.timeout[1]):
                status, data = self._call(method, path, query, headers, body, deadline)
        except web.HttpError as err:
            raise KubeError(None, f"{method} {path}: {err}") from None
        except Exception as err:
            status = getattr(err, "status", None)
            if status is None and time.monotonic() >= deadline:
                raise KubeError(None, self.past_deadline(method, path)) from None
            if status is None:
                raise KubeError(None, unreachable(self.server, err, self.timeout)) from None
            message = getattr(err, "body", None) or getattr(err, "reason", None) or str(err)
            raise KubeError(status, self.hidden(_message(message))) from None
        return self._decoded(method, path, status, data, raw, decode)

    def hidden(self, text: str) -> str:
        """``text`` (a server's message) with the credentials this client sends replaced
        by ``***``: the bearer token (``configuration.api_key``, with and without its
        ``Bearer`` prefix) and the basic-auth password, so that a server or proxy that
        repeats the request's ``Authorization`` header does not put them into a message
        that is printed or served (``report --serve`` answers 503 with it)."""
        conf = getattr(self.client, "configuration", None)
        keys = [str(v) for v in (getattr(conf, "api_key", None) or {}).values() if v]
        found = {
            *keys,
            *(k.split(None, 1)[-1] for k in keys),
            str(getattr(conf, "password", "") or ""),
        }
        for secret in sorted((f for f in found if len(f) >= MIN_HIDDEN), key=len, reverse=True):
            text = text.replace(secret, "***")
        return text

    def past_deadline(self, method: str, path: str) -> str:
        """What to say when ``method path`` ran past ``REQUEST_DEADLINE``."""
        return (
            f"the API server {self.server} did not finish its answer to {method} {path} within "
            f"{REQUEST_DEADLINE:g} s; fix: check that kube-apiserver answers there (curl -k "
            f"{self.server}/version) and is not overloaded, or try again"
        )

    def _call(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, Any]],
        headers: dict[str, str],
        body: Any,
        deadline: float,
    ) -> tuple[Any, Any]:
        """(status, body bytes) of one request through the client."""
        if hasattr(self.client, "param_serialize"):  # kubernetes >= 31 (OpenAPI generator 7)
            params = self.client.param_serialize(
                method=method,
                resource_path=path,
                query_params=list(query),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            resp = self.client.call_api(*params, _request_timeout=self.timeout)
            status = resp.status
            data = _body(resp, deadline, self.server)
            if data is None:
                data = getattr(resp, "data", b"")
        else:  # pragma: no cover - older client releases
            resp = self.client.call_api(
                path,
                method,
                query_params=list(query),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=self.timeout,
            )
            status, data = resp.status, resp.data
        return status, data

    def _decoded(
        self,
        method: str,
        path: str,
        status: Any,
        data: Any,
        raw: bool,
        decode: Callable[[bytes | str], Any] | None,
    ) -> Any:
        """The body of an answer: an error for a status outside 2xx, else its text
        (``raw``), ``decode(data)`` or its JSON."""
        if not 200 <= int(status) < 300:
            raise KubeError(int(status), self.hidden(_message(data)))
        if raw:
            return data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data or "")
        try:
            if decode is not None:
                return decode(data or b"{}")
            doc = json.loads(data) if data else {}
        except (ValueError, RecursionError) as err:  # JSONDecodeError, UnicodeDecodeError
            raise KubeError(None, self.not_json(method, path, err)) from None
        return without_lone_surrogates(doc) if data and _has_surrogate_escape(data) else doc

    def not_json(self, method: str, path: str, why: Any) -> str:
        """What to say when the answer to ``method path`` is not the JSON object the
        Kubernetes API serves there."""
        return (
            f"the API server {self.server} answered {method} {path} with something that is "
            f"not the Kubernetes API's JSON ({' '.join(str(why).split())[:120]}); fix: check "
            f"that {self.server} is the cluster's kube-apiserver (curl -k "
            f"{self.server}/version), or give the cluster's kubeconfig"
        )

    def request_text(self, path: str) -> str:
        """GET ``path`` and return the body as text (pod logs)."""
        return self.request("GET", path, raw=True)

    def get(self, path: str, query: Sequence[tuple[str, Any]] = ()) -> Any:
        """GET ``path``: the decoded JSON object (a mapping); KubeError for anything
        else."""
        out = self.request("GET", path, query)
        if not isinstance(out, Mapping):
            raise KubeError(None, self.not_json("GET", path, f"a {type(out).__name__}"))
        return out

    def pages(
        self,
        path: str,
        page_size: int = PAGE_SIZE,
        query: Sequence[tuple[str, Any]] = (),
        trim: Callable[[dict[str, Any]], Any] | None = None,
        schema: Any = None,
        ahead: bool = True,
    ) -> Iterator[list[Any]]:
        """The items of a list path, one page at a time: ``page_size`` per request
        (``limit``/``continue``), each item passed through ``trim`` as it is decoded, so
        that only the page being read is ever held whole; ``schema``: the fields ``trim``
        reads (``decode_list``). Yields each page's trimmed items (a list). Raises
        KubeError for a failed request, a ``continue`` token that repeats or is not a
        string, or more than ``MAX_PAGES`` pages.

        The next page is asked for while this one is decoded: its ``continue`` token is
        read from the answer's first bytes, where kube-apiserver writes the list's
        metadata (``_continue_ahead``), and the request runs on a thread of its own while
        the page is decoded and handed over. A token read ahead that is not the decoded
        page's leaves its answer unused and the right page is asked for then; at most
        two answers of one list are held at once. ``ahead=False``: one request at a time
        (for lists already read side by side)."""
        seen: set[str] = set()

        def fetch(token: str | None) -> Any:
            q = [*query, ("limit", page_size)] + ([("continue", token)] if token else [])
            return self.request("GET", path, q, decode=_undecoded)

        data = fetch(None)
        for _round in range(MAX_PAGES):
            guess = _continue_ahead(data) if ahead else None
            asked = _Ahead(fetch, guess) if guess and guess not in seen else None
            items: list[Any] = []
            try:
                page = _decode(items, trim, schema, data or b"{}")
            except (ValueError, RecursionError) as err:  # JSONDecodeError, UnicodeDecodeError
                raise KubeError(None, self.not_json("GET", path, err)) from None
            data = None  # the answer's bytes let go before its items are handed over
            meta = page.get("metadata")
            token = meta.get("continue") if isinstance(meta, Mapping) else None
            yield items
            if not token:
                return
            if not isinstance(token, str) or token in seen:
                raise KubeError(
                    None,
                    self.not_json(
                        "GET",
                        path,
                        f"metadata.continue {str(token)[:40]!r} repeats or is not a string",
                    ),
                )
            seen.add(token)
            data = asked.result() if asked is not None and asked.token == token else fetch(token)
        raise KubeError(
            None,
            f"the API server {self.server} answered GET {path} with more than {MAX_PAGES} "
            f"pages of {page_size}; fix: check that {self.server} is the cluster's "
            "kube-apiserver, or list in fewer, larger pages",
        )

    def list(
        self,
        path: str,
        page_size: int = PAGE_SIZE,
        query: Sequence[tuple[str, Any]] = (),
        trim: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        schema: Any = None,
    ) -> list[dict[str, Any]]:
        """Every item of a list path as one list (:meth:`pages` joined)."""
        pages = self.pages(path, page_size, query, trim, schema)
        return [item for page in pages for item in page]

    def paged(
        self,
        path: str,
        page_size: int = PAGE_SIZE,
        query: Sequence[tuple[str, Any]] = (),
        trim: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        schema: Any = None,
        ahead: bool = True,
        keep: Callable[[Any], bool] | None = None,
    ) -> PagedList:
        """Every item of a list path as a :class:`PagedList` (each page stored
        compressed as it arrives); ``ahead`` as for :meth:`pages`. With ``keep``, only
        the trimmed items it accepts are stored, judged while their page is decoded
        anyway (``PagedList.vetted`` tells how many it refused), so that a reader that
        must judge every item does not walk the stored pages for it."""
        return PagedList.of_pages(self.pages(path, page_size, query, trim, schema, ahead), keep)


class PagedList:
    """The items of one list kept as their pages, each page serialized (``marshal``,
    which reads back faster than JSON; kept in memory only, never written) and
    zlib-compressed as it arrives; iterating decodes one page at a time, so a check that
    walks the list holds one page of objects, not all of them.

    A trimmed page of 5,000 pods is about 6 MB as Python objects and 0.1 MB stored
    (the items of a list repeat the same keys and values). Items must be JSON values
    (what ``decode_list`` produced). Supports ``len``, iteration (each pass decodes
    anew: items are fresh objects, changes to them are not kept), ``bool``, equality
    with a list and indexing (which decodes the page holding the item)."""

    __slots__ = ("_derived", "_len", "_pages", "_sizes", "_vetted")

    def __init__(self, items: Iterable[Any] = (), page_size: int = 1000) -> None:
        self._pages: list[bytes] = []
        self._sizes: list[int] = []
        self._len = 0
        self._derived: dict[str, Any] = {}
        #: (the predicate every item was kept by, the items it refused): ``of_pages``
        self._vetted: tuple[Callable[[Any], bool], int] | None = None
        page: list[Any] = []
        for item in items:
            page.append(item)
            if len(page) >= page_size:
                self.add_page(page)
                page = []
        self.add_page(page)

    @classmethod
    def of_pages(
        cls, pages: Iterable[Sequence[Any]], keep: Callable[[Any], bool] | None = None
    ) -> PagedList:
        """The items of ``pages``, each page stored as it comes; with ``keep``, only the
        items it accepts, judged page by page (``vetted`` then tells how many it
        refused)."""
        out = cls()
        refused = 0
        for page in pages:
            if keep is not None:
                kept = [item for item in page if keep(item)]
                refused += len(page) - len(kept)
                page = kept
            out.add_page(page)
        if keep is not None:
            out._vetted = (keep, refused)
        return out

    def add_page(self, items: Sequence[Any]) -> None:
        if not items:
            return
        self._pages.append(zlib.compress(marshal.dumps(list(items)), 1))
        self._sizes.append(len(items))
        self._len += len(items)
        self._derived.clear()
        self._vetted = None  # a page added later was not judged

    def stored(self) -> tuple[list[bytes], list[int], int | None]:
        """The compressed pages, their item counts, and how many items the predicate the
        list was built with refused (None: not built with one, ``vetted``): what
        ``restored`` takes to make the same list again in another process."""
        return list(self._pages), list(self._sizes), self._vetted[1] if self._vetted else None

    @classmethod
    def restored(
        cls,
        pages: Sequence[bytes],
        sizes: Sequence[int],
        keep: Callable[[Any], bool] | None = None,
        refused: int | None = None,
    ) -> PagedList:
        """The list ``stored`` gave; with ``keep`` and ``refused``, built with ``keep``
        (``vetted(keep)`` is ``refused``). Raises ValueError for pages and counts that do
        not pair up."""
        if len(pages) != len(sizes) or any(
            not isinstance(b, bytes) or not isinstance(n, int) or isinstance(n, bool) or n < 1
            for b, n in zip(pages, sizes, strict=True)
        ):
            raise ValueError("stored pages and their item counts do not pair up")
        out = cls()
        out._pages = list(pages)
        out._sizes = list(sizes)
        out._len = sum(sizes)
        if keep is not None and refused is not None:
            out._vetted = (keep, refused)
        return out

    def derived(self, key: str, compute: Callable[[PagedList], Any]) -> Any:
        """``compute(self)``, kept under ``key`` until a page is added: a fact of all the
        items that several readers need (the newest generation of each pool of
        ResourceSlices), computed in one walk instead of one walk per reader. The
        value is shared: readers must not change it."""
        if key not in self._derived:
            self._derived[key] = compute(self)
        return self._derived[key]

    def derive(self, folds: Mapping[str, Callable[[], Any]], once: Sequence[Any] = ()) -> list[Any]:
        """The results of several folds of the items, in the order of ``folds``, each kept
        under its key as ``derived`` keeps a value, then those of the folds ``once`` (kept
        nowhere). ``folds`` maps a key to a function that makes a fresh fold: an object
        with ``add(item)``, called for every item in order, and ``result()``. The folds
        whose key holds no value yet and those of ``once`` are computed together, in one
        walk: what several checks read from one list (the pods: the claims' users, the
        kube-apiserver pods, the DRA plugin pods) is decoded once, not once per check. A
        fold must not change the items it is given (the next fold of the walk is given
        the same objects)."""
        missing = {k: make() for k, make in folds.items() if k not in self._derived}
        _walk(self, [*missing.values(), *once])
        for k, fold in missing.items():
            self._derived[k] = fold.result()
        return [*(self._derived[k] for k in folds), *(fold.result() for fold in once)]

    def forget(self, *keys: str) -> None:
        """Drop the values kept under ``keys`` (``derived``, ``derive``); all of them when
        no key is given. A reader that asks again computes its value anew."""
        for key in keys or list(self._derived):
            self._derived.pop(key, None)

    def vetted(self, keep: Callable[[Any], bool]) -> int | None:
        """How many items ``keep`` (that very function) refused when this list was built
        with it (``of_pages``, ``Kube.paged``): every item stored is one it accepted.
        None when the list was not built that way, or pages were added since."""
        if self._vetted is not None and self._vetted[0] is keep:
            return self._vetted[1]
        return None

    def filtered(self, keep: Callable[[Any], bool]) -> PagedList:
        """A PagedList of the items ``keep`` accepts, page by page; a page whose items
        are all kept is shared, not stored again."""
        out = PagedList()
        for blob, size in zip(self._pages, self._sizes, strict=True):
            page = marshal.loads(zlib.decompress(blob))
            kept = [item for item in page if keep(item)]
            if len(kept) == size:
                out._pages.append(blob)
                out._sizes.append(size)
                out._len += size
            else:
                out.add_page(kept)
            del page, kept  # before the next page is decoded
        return out

    def iter_pages(self) -> Iterator[list[Any]]:
        """Each stored page, decoded."""
        for blob in self._pages:
            yield marshal.loads(zlib.decompress(blob))

    def __iter__(self) -> Iterator[Any]:
        for blob in self._pages:
            page = marshal.loads(zlib.decompress(blob))
            yield from page
            del page  # before the next page is decoded: one page held at a time

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def __getitem__(self, index: int) -> Any:
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("PagedList index out of range")
        for blob, size in zip(self._pages, self._sizes, strict=True):
            if index < size:
                return marshal.loads(zlib.decompress(blob))[index]
            index -= size
        raise IndexError("PagedList index out of range")  # pragma: no cover

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PagedList | list | tuple):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    @property
    def stored_bytes(self) -> int:
        """Bytes of the compressed pages."""
        return sum(len(b) for b in self._pages)


def _walk(items: Iterable[Any], folds: Sequence[Any]) -> None:
    """Every item of ``items`` added to each of ``folds``, in one walk (none without
    folds)."""
    if not folds:
        return
    adds = [fold.add for fold in folds]
    for item in items:
        for add in adds:
            add(item)


def folded(
    items: Iterable[Any], folds: Mapping[str, Callable[[], Any]], once: Sequence[Any] = ()
) -> list[Any]:
    """``PagedList.derive`` of ``items`` when it is a ``PagedList`` (the results of
    ``folds`` kept there, for the next reader); of any other iterable, the folds (those
    ``folds`` makes, then ``once``) computed in one walk of it and kept nowhere."""
    if isinstance(items, PagedList):
        return items.derive(folds, once)
    made = [*(make() for make in folds.values()), *once]
    _walk(items, made)
    return [fold.result() for fold in made]


def kube_auth_argspec() -> dict[str, dict[str, str]]:
    """The argument spec of the options every module that reads the API shares
    (``kubeconfig``, ``context``; doc fragment ``gpufleet.cluster.kube_auth``), a new copy
    per call."""
    return {"kubeconfig": {"type": "path"}, "context": {"type": "str"}}


def api_client(
    kubeconfig: str | None = None, context: str | None = None, connections: int | None = None
) -> Any:
    """A ``kubernetes.client.ApiClient``: the kubeconfig checked first
    (:func:`check_kubeconfig`), exec credential plugins bounded, no retry of a read that
    timed out, a pool of at least ``connections`` HTTP connections. Pass
    ``_request_timeout=REQUEST_TIMEOUT`` to every call made with the generated API classes.
    Raises KubeError naming the kubeconfig (or the missing package) and the fix."""
    try:
        from kubernetes import client as k8s_client
        from kubernetes import config as k8s_config
    except ImportError as err:
        raise KubeError(
            None, "the Python package 'kubernetes' is missing; fix: pip install kubernetes"
        ) from err
    check_kubeconfig(kubeconfig)
    bound_exec_plugins()
    try:
        configuration = k8s_client.Configuration()
        k8s_config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=configuration
        )
        configuration.retries = no_read_retries()
        if connections:
            configuration.connection_pool_maxsize = max(
                configuration.connection_pool_maxsize or 0, connections
            )
        return bound_connections(k8s_client.ApiClient(configuration))
    except Exception as err:  # ConfigException, OSError, yaml errors
        where = kubeconfig or "KUBECONFIG or ~/.kube/config"
        raise KubeError(
            None,
            f"cannot load the kubeconfig {where}: {err}; fix: give the cluster's admin "
            "kubeconfig (the command's --kubeconfig FILE or KUBECONFIG; in a playbook, the "
            "role's kubeconfig variable)",
        ) from None


def bound_exec_plugins() -> None:
    """Make the ``kubernetes`` client's exec credential plugins (``users[].user.exec``) run
    under one deadline of ``EXEC_TIMEOUT`` seconds for the whole exchange (its
    ``ExecProvider`` calls ``communicate()`` with no timeout, which waits for the end of
    the plugin's output: a child the plugin left running with that output open holds it
    forever). The plugin runs in its own session; at the deadline its whole process group
    is killed and its pipes closed. A plugin that fails is reported by its command and
    exit status only: its standard error, which may hold a token, is never repeated. The
    client logs the error (then the request goes out without credentials and the server
    refuses it). Idempotent."""
    import subprocess
    import types

    from kubernetes.config import exec_provider

    if getattr(exec_provider, "_gpufleet_bounded", False):
        return
    exec_provider.subprocess = types.SimpleNamespace(  # type: ignore[assignment]
        Popen=_bounded_popen(exec_provider.ConfigException), PIPE=subprocess.PIPE
    )
    exec_provider._gpufleet_bounded = True  # type: ignore[attr-defined]


def _bounded_popen(config_error: type[Exception]) -> type:
    """The ``subprocess.Popen`` of :func:`bound_exec_plugins`; ``config_error`` is the
    client's ``ConfigException``."""
    import os
    import signal
    import subprocess

    class BoundedPopen(subprocess.Popen):  # type: ignore[type-arg]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["start_new_session"] = True  # its own process group, killed whole
            super().__init__(*args, **kwargs)

        def _end_group(self) -> None:
            with contextlib.suppress(OSError):
                os.killpg(self.pid, signal.SIGKILL)
            for pipe in (self.stdin, self.stdout, self.stderr):
                with contextlib.suppress(OSError, ValueError):
                    if pipe is not None:
                        pipe.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.wait(timeout=1)

        def communicate(self, input: Any = None, timeout: float | None = None) -> Any:
            command = self.args[0] if isinstance(self.args, list | tuple) else self.args
            run_it = (
                f"run it yourself to see its message: {os.path.basename(str(command))!r} with "
                "the args and env of the kubeconfig's users[].user.exec"
            )
            limit = EXEC_TIMEOUT if timeout is None else min(timeout, EXEC_TIMEOUT)
            try:
                out, _unused = super().communicate(input, limit)
            except subprocess.TimeoutExpired:
                self._end_group()
                raise config_error(
                    f"exec: the kubeconfig's credential plugin {command!r} did not finish "
                    f"within {EXEC_TIMEOUT:g} s (it, or a process it started, kept its output "
                    f"open); fix: {run_it} (it may wait for a login or for its identity "
                    "provider), or give a kubeconfig with a token or a client certificate"
                ) from None
            if self.returncode:
                raise config_error(
                    f"exec: the kubeconfig's credential plugin {command!r} failed (exit "
                    f"status {self.returncode}; its own messages are not repeated here, they "
                    f"may hold credentials); fix: {run_it}"
                )
            return out, ""

    return BoundedPopen


def bound_connections(api_client: Any) -> Any:
    """``api_client`` (a ``kubernetes.client.ApiClient``) whose HTTP connections obey
    ``common.http_exchange.budget``: each socket it connects is armed
    (``common.http_exchange.arm``), so a request made within a budget ends by its deadline,
    headers included, however slowly the server sends. A client without urllib3's pool
    manager is returned as it is."""
    manager = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    if manager is None or not isinstance(getattr(manager, "pool_classes_by_scheme", None), dict):
        return api_client
    import urllib3

    class Connection(urllib3.connection.HTTPConnection):
        def connect(self) -> None:
            super().connect()
            self.sock = web.arm(self.sock)

    class TLSConnection(urllib3.connection.HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            self.sock = web.arm(self.sock)

    class Pool(urllib3.HTTPConnectionPool):
        ConnectionCls = Connection

    class TLSPool(urllib3.HTTPSConnectionPool):
        ConnectionCls = TLSConnection

    manager.pool_classes_by_scheme = {"http": Pool, "https": TLSPool}
    return api_client


def no_read_retries() -> Any:
    """urllib3 retries for the client: connection failures twice, never a read that timed
    out or a status (``Configuration.retries``; None keeps urllib3's three of each)."""
    import urllib3

    return urllib3.util.Retry(total=2, connect=2, read=0, status=0, redirect=0, other=0)


def shown_url(url: str) -> str:
    """``url`` with what may be a credential replaced by ``***``: the user and password
    (``https://user:token@host``) and the query (``?token=...``); the scheme, host, port
    and path stay, so the message still names the server."""
    try:
        parts = urllib.parse.urlsplit(url)
        netloc = parts.netloc
    except ValueError:
        return "***" if "@" in url or "?" in url else url
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = "***" if parts.query else ""
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def unreachable(server: str, err: BaseException, timeout: tuple[float, float]) -> str:
    """What to say when the API server at ``server`` gave no HTTP answer (``err``): a
    timeout (connect or read, ``timeout`` seconds) or a refused or failed connection, and
    the fix."""
    reason = getattr(err, "reason", None) or err  # MaxRetryError wraps the last error
    text = " ".join(str(reason).split())
    kind = type(reason).__name__
    said = re.search(r"(read|connect) timeout=([0-9.]+)", text)  # urllib3's own figure
    if kind == "ConnectTimeoutError" or (said and said.group(1) == "connect"):
        what = f"did not accept a connection within {float(said[2]) if said else timeout[0]:g} s"
    elif "Timeout" in kind or "timed out" in text.lower():
        seconds = float(said[2]) if said else timeout[1]
        handshake = server.startswith("https") and seconds == timeout[0] != timeout[1]
        what = f"accepted the connection but sent no answer within {seconds:g} s" + (
            " (not even the TLS handshake)" if handshake else ""
        )
    else:
        what = f"cannot be reached ({text[:200]})"
    return (
        f"the API server {server} {what}; fix: check that kube-apiserver runs and answers "
        f"there (curl -k {server}/version), or give a kubeconfig whose server is the cluster's"
    )


def check_kubeconfig(kubeconfig: str | None) -> None:
    """Refuse (KubeError) a kubeconfig file that is a directory, binary, not UTF-8, larger
    than 4 MiB, not YAML or not a mapping, naming the file; ``kubeconfig`` None checks
    ``KUBECONFIG``'s files (the client merges them) or ``~/.kube/config`` if they exist."""
    import os

    from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig

    if kubeconfig:
        paths = [kubeconfig]
    else:
        env = os.environ.get("KUBECONFIG", "")
        paths = [p for p in env.split(os.pathsep) if p] or [os.path.expanduser("~/.kube/config")]
        paths = [p for p in paths if os.path.exists(p)]
    for path in paths:
        what = f"the kubeconfig {path}"
        try:
            data = ig.load_yaml(ig.read_text(os.path.expanduser(path), what) or "", what)
        except ig.InputError as err:
            raise KubeError(None, f"{err}; or pass --kubeconfig") from None
        if not isinstance(data, Mapping):
            raise KubeError(
                None,
                f"{what} holds a {type(data).__name__}, not a kubeconfig (a mapping with "
                "clusters, users, contexts); fix: pass --kubeconfig with the cluster's file",
            )
        problem = _kubeconfig_fields(data, os.path.dirname(os.path.expanduser(path)))
        if problem:
            raise KubeError(None, f"{what}: {problem}")


#: The files a kubeconfig entry names, by section (``clusters[].cluster``,
#: ``users[].user``); the client reads them with a plain open().
_KUBECONFIG_FILES = {
    "clusters": ("cluster", ("certificate-authority",)),
    "users": ("user", ("client-certificate", "client-key", "tokenFile")),
}


def _server_url(server: Any) -> bool:
    """Whether a kubeconfig's ``server`` is an ``http``/``https`` URL with a host (what
    the client connects to; anything else fails later with a less clear error)."""
    if not isinstance(server, str):
        return False
    try:
        parts = urllib.parse.urlsplit(server)
        return parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a bad port or bracketed host
        return False


def _kubeconfig_fields(data: Mapping[str, Any], base: str) -> str | None:
    """What is wrong with the entries of a parsed kubeconfig that the ``kubernetes`` client
    would trip over (a traceback's text, or a hang on a named pipe), else None: an entry
    of clusters, users or contexts that is not a mapping, a server that is not an http or
    https URL with a host,
    a file it names that is a directory, a named pipe or a device."""
    import os
    import stat

    for section, inner in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
        entries = data.get(section)
        if entries is None:
            continue
        if not isinstance(entries, list):
            return f"{section} is a {type(entries).__name__}; fix: write {section} as a list"
        for i, entry in enumerate(entries):
            body = entry.get(inner) if isinstance(entry, Mapping) else None
            if not isinstance(entry, Mapping) or not isinstance(body, Mapping | None):
                return (
                    f"{section}[{i}] is not a mapping with name and {inner} (a mapping); "
                    f"fix: write it as - {{name: NAME, {inner}: {{...}}}}"
                )
            server = (body or {}).get("server")
            if section == "clusters" and server is not None and not _server_url(server):
                shown = shown_url(server) if isinstance(server, str) else server
                return (
                    f"{section}[{i}].cluster.server={shown!r} is not an http:// or https:// "
                    "URL with a host; fix: write the API server's URL, e.g. server: "
                    "https://10.0.0.1:6443"
                )
            for key in _KUBECONFIG_FILES.get(section, ("", ()))[1]:
                value = (body or {}).get(key)
                if not isinstance(value, str) or not value:
                    continue
                file = os.path.join(base, os.path.expanduser(value))
                try:
                    mode = os.stat(file).st_mode
                except OSError:
                    continue  # missing: the client names it
                if not stat.S_ISREG(mode):
                    return (
                        f"{section}[{i}].{inner}.{key}={value!r} is not a regular file (a "
                        "directory, named pipe or device); fix: point it at the file itself"
                    )
    return None


def _body(resp: Any, deadline: float, server: str) -> Any:
    """The body of the client's ``RESTResponse`` ``resp`` (the request made with
    ``preload_content=False``), read by ``common.http_exchange.read_within`` by ``deadline``;
    raises its HttpError. A response without a stream (a test's stand-in) is read
    as it is."""
    raw = getattr(resp, "response", None)
    if raw is None or not callable(getattr(raw, "read1", None)):
        return resp.read() if callable(getattr(resp, "read", None)) else resp.data
    import urllib3

    sock = getattr(getattr(raw, "connection", None), "sock", None)
    # On an armed socket each wait ends by the deadline, so one read may gather many of
    # the server's chunks (kube-apiserver writes a list in chunks of about 2 KiB, and a
    # read per chunk through urllib3 cost about a tenth of the CPU of listing pods); on
    # another socket each read takes what one wait brings. A wait that times out ends the
    # answer: urllib3 closes the connection then (and a gathering read loses what it
    # had), so the waits of the body run to the deadline, not to the read timeout.
    gather = web.armed(sock)
    shown = f"the API server {server}"

    def read(n: int) -> bytes:
        try:
            return raw.read(n) if gather else raw.read1(n)
        except urllib3.exceptions.ReadTimeoutError:
            raise web.HttpError(
                f"{shown} did not finish its answer within {REQUEST_DEADLINE:g} s; "
                "fix: check that it answers (kubectl get --raw /readyz), or try again"
            ) from None
        except (urllib3.exceptions.ProtocolError, OSError) as err:
            raise web.HttpError(
                f"{server} broke off its answer ({type(err).__name__}); fix: try again"
            ) from None

    try:
        with web.budget(deadline, REQUEST_DEADLINE):
            body = web.read_within(
                read,
                getattr(sock, "settimeout", None),
                deadline,
                REQUEST_DEADLINE,
                MAX_ANSWER_BYTES,
                shown,
            )
    finally:
        raw.release_conn()
    resp.data = body
    return body


def _message(data: Any) -> str:
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    try:
        doc = json.loads(data) if isinstance(data, str) else data
        if isinstance(doc, Mapping) and doc.get("message"):
            return str(doc["message"])
    except (ValueError, TypeError):
        pass
    return str(data)[:300]


# ------------------------------------------------------------------ decoding a list


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the block.

    Decoding a fleet's lists creates millions of dicts; every full collection meanwhile
    walks all of them again, which more than doubled the time of listing and checking
    1,000 nodes. Decoded JSON holds no reference cycles, so pausing frees nothing later
    than it would have been freed. Not reentrant across threads: pause around the
    threads, not within them.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_WS = re.compile(r"[ \t\n\r]*")
#: A JSON escape of a UTF-16 surrogate. ``json`` joins a pair into one character but
#: decodes a lone one to a str that no UTF-8 writer takes (a terminal, a report file).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_surrogate_escape(data: bytes | str) -> bool:
    if isinstance(data, str):
        return _SURROGATE_ESCAPE.search(data) is not None
    return _SURROGATE_ESCAPE_BYTES.search(data) is not None


def without_lone_surrogates(doc: Any) -> Any:
    """``doc`` (decoded JSON) with every lone surrogate of its strings and keys replaced
    by U+FFFD, in place (a walk without recursion: any depth the decoder read)."""
    if isinstance(doc, str):
        return _SURROGATE.sub("\ufffd", doc)
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in [k for k in node if isinstance(k, str) and _SURROGATE.search(k)]:
                node[_SURROGATE.sub("\ufffd", key)] = node.pop(key)
            pairs: Iterable[tuple[Any, Any]] = list(node.items())
        elif isinstance(node, list):
            pairs = enumerate(node)
        else:
            continue
        for at, value in pairs:
            if isinstance(value, str):
                node[at] = _SURROGATE.sub("\ufffd", value)
            elif isinstance(value, (dict, list)):
                stack.append(value)
    return doc


def _trimmed(item: Any, trim: Callable[[dict[str, Any]], dict[str, Any]] | None) -> Any:
    """``trim(item)``; an item that is not an object, or whose fields have other types
    than the API's, is kept as it came, for its reader to skip (``report.fleet``)."""
    if trim is None or not isinstance(item, dict):
        return item
    try:
        return trim(item)
    except (AttributeError, TypeError, ValueError):
        return item


def _undecoded(data: Any) -> Any:
    """A list answer's body as it came (``Kube.pages`` decodes it itself)."""
    return data


#: How much of a list answer ``_continue_ahead`` reads for the list's metadata.
AHEAD_BYTES = 16384


def _continue_ahead(data: Any) -> str | None:
    """The list's ``metadata.continue`` read from the first ``AHEAD_BYTES`` of its
    answer, where kube-apiserver writes ``kind``, ``apiVersion`` and ``metadata`` before
    ``items``; None when there is none, or the metadata is not there (another order, a
    longer head): then nothing is asked for ahead."""
    if not isinstance(data, bytes):
        return None
    head = data[:AHEAD_BYTES].decode("utf-8", "ignore")
    at = head.find('"metadata"')
    items = head.find('"items"')
    if at < 0 or 0 <= items < at:
        return None
    colon = _WS.match(head, at + len('"metadata"')).end()
    if head[colon : colon + 1] != ":":
        return None
    try:
        meta, _end = json.JSONDecoder().raw_decode(head, _WS.match(head, colon + 1).end())
    except (ValueError, RecursionError):
        return None
    token = meta.get("continue") if isinstance(meta, dict) else None
    return token if isinstance(token, str) and token else None


class _Ahead:
    """``fetch(token)`` on a thread of its own, started at once; ``result()`` waits for
    it and returns its answer or raises its error."""

    def __init__(self, fetch: Callable[[str], Any], token: str) -> None:
        self.token = token
        self._answer: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fetch,), daemon=True)
        self._thread.start()

    def _run(self, fetch: Callable[[str], Any]) -> None:
        try:
            self._answer = fetch(self.token)
        except BaseException as exc:  # raised again by result(), on the caller's thread
            self._error = exc

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._answer


def _decode(
    items: list[Any],
    trim: Callable[[dict[str, Any]], Any] | None,
    schema: Any,
    data: bytes | str,
) -> dict[str, Any]:
    return decode_list(data, items.append, trim, schema)


def decode_list(
    data: bytes | str,
    add: Callable[[Any], Any],
    trim: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    schema: Any = None,
) -> dict[str, Any]:
    """Decode a list response (``{"kind": ..., "metadata": ..., "items": [...]}``) one
    item at a time: each item goes through ``trim`` to ``add`` as soon as it is decoded,
    so the untrimmed items of a page never exist all at once. Returns the other members
    (``kind``, ``apiVersion``, ``metadata``). Raises ValueError for a body that is not a
    JSON object (``json.JSONDecodeError`` names the position).

    With ``msgspec`` installed a page of bytes is decoded by ``fast_page``, each item
    into ``schema`` (a ``TypedDict`` of the fields ``trim`` reads, the rest skipped
    unread; None: the whole item); a page it does not take is decoded here by ``json``,
    which gives the same items."""
    if msgspec is not None and isinstance(data, bytes):
        fast = fast_page(data, trim, schema)
        if fast is not None:
            out, items = fast
            for item in items:
                add(item)
            return out
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    decoder = json.JSONDecoder()
    clean = without_lone_surrogates if _has_surrogate_escape(text) else (lambda doc: doc)
    out: dict[str, Any] = {}
    pos = _WS.match(text, 0).end()
    if text[pos : pos + 1] != "{":
        raise ValueError(f"a list response must be a JSON object, got {text[:40]!r}")
    pos = _WS.match(text, pos + 1).end()
    if text[pos : pos + 1] == "}":
        return out
    while True:
        key, pos = decoder.raw_decode(text, pos)
        pos = _WS.match(text, pos).end()
        if text[pos : pos + 1] != ":":
            raise ValueError(f"expected ':' at {pos} of a list response")
        pos = _WS.match(text, pos + 1).end()
        if key == "items" and text[pos : pos + 1] == "[":
            pos = _WS.match(text, pos + 1).end()
            if text[pos : pos + 1] == "]":
                pos += 1
            else:
                while True:
                    item, pos = decoder.raw_decode(text, pos)
                    add(_trimmed(clean(item), trim))
                    pos = _WS.match(text, pos).end()
                    sep = text[pos : pos + 1]
                    pos = _WS.match(text, pos + 1).end()
                    if sep == "]":
                        break
                    if sep != ",":
                        raise ValueError(f"expected ',' or ']' at {pos} of a list response")
        else:
            value, pos = decoder.raw_decode(text, pos)
            out[clean(key)] = clean(value)
        pos = _WS.match(text, pos).end()
        sep = text[pos : pos + 1]
        pos = _WS.match(text, pos + 1).end()
        if sep == "}":
            return out
        if sep != ",":
            raise ValueError(f"expected ',' or '}}' at {pos} of a list response")


@functools.cache
def _decoders(schema: Any) -> tuple[Any, Any, Any]:
    """msgspec decoders: a list response's members (each left undecoded), the items of
    its ``items`` (each left undecoded), and one item into ``schema`` (None: anything)."""
    raw = msgspec.Raw
    return (
        msgspec.json.Decoder(dict[str, raw]),
        msgspec.json.Decoder(list[raw]),
        msgspec.json.Decoder(Any if schema is None else schema),
    )


def _blanks(data: bytes) -> int:
    return data.count(b" ") + data.count(b"\n") + data.count(b"\r") + data.count(b"\t")


def _edge_blanks(data: bytes) -> int:
    """The blanks before the first and after the last other byte of ``data``."""
    end = len(data)
    while end and data[end - 1] in _BLANK_BYTES:
        end -= 1
    start = 0
    while start < end and data[start] in _BLANK_BYTES:
        start += 1
    return start + len(data) - end


_BLANK_BYTES = frozenset(b" \n\r\t")


def _whole_members(data: bytes, members: Mapping[str, Any]) -> bool:
    """True when ``members`` (a list response's members, undecoded) are all of ``data``
    but the blanks between them. False for a key written with escapes, or a member named
    twice (the decoder keeps the last, where ``json`` reads both lists of items): their
    bytes are more than blanks. The API server writes compact JSON, where the sizes
    alone tell."""
    keys = [msgspec.json.encode(key) for key in members]
    outside = len(data) - 2 - sum(len(raw) for raw in members.values())
    outside -= sum(len(key) + 1 for key in keys) + max(len(members) - 1, 0)
    if outside == _edge_blanks(data):  # kube-apiserver ends its answer with a newline
        return True
    inside = sum(_blanks(bytes(raw)) for raw in members.values()) + sum(map(_blanks, keys))
    return outside == _blanks(data) - inside


def fast_page(
    data: bytes,
    trim: Callable[[dict[str, Any]], Any] | None = None,
    schema: Any = None,
) -> tuple[dict[str, Any], list[Any]] | None:
    """A list response decoded by ``msgspec``: its members but ``items`` (as
    ``decode_list`` returns them) and its items, each decoded alone into ``schema`` and
    passed through ``trim``; None where ``decode_list``'s ``json`` must decode the page
    (msgspec not installed, a lone surrogate escape, JSON that msgspec refuses or reads
    otherwise: ``NaN``, ``Infinity``, a member named twice).

    An item that does not fit ``schema``, or that ``trim`` refuses, is decoded again by
    ``json`` and kept as ``json``'s path keeps it (``_trimmed``), so the items are the
    same either way. ``schema`` must hold every field ``trim`` reads."""
    if msgspec is None or _has_surrogate_escape(data):
        return None
    page_members, page_items, one_item = _decoders(schema)
    try:
        members = page_members.decode(data)
        if not _whole_members(data, members):
            return None
        raws = members.pop("items", None)
        out = {key: msgspec.json.decode(raw) for key, raw in members.items()}
        items = []
        for raw in page_items.decode(raws) if raws is not None else ():
            try:
                item = one_item.decode(raw)
                items.append(trim(item) if trim is not None and isinstance(item, dict) else item)
            except (AttributeError, TypeError, ValueError, msgspec.DecodeError):
                # msgspec.ValidationError is a DecodeError, a ValueError only in later releases
                items.append(_trimmed(json.loads(bytes(raw).decode("utf-8")), trim))
    except (ValueError, RecursionError, msgspec.DecodeError):  # JSONDecodeError is a ValueError
        return None
    return out, items
