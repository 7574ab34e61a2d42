"""A client of ``lshbench serve``, the online near-duplicate service, on the standard library's HTTP client.

>>> client = lshbench.Client("http://127.0.0.1:7878")
>>> client.check([{"id": "a", "text": "the cat sat on the mat"}])
[{'id': 'a', 'duplicates': [], 'unchecked': 0, 'empty': False, 'inserted': True, 'seq': 1}]

One ``Client`` keeps one connection open and is not to be shared between threads: give each thread its own.
Every method raises ``ServerError`` (with the HTTP status and the server's message) when the server refuses a
request, and ``OSError`` when it cannot be reached.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

__all__ = ["Client", "ServerError"]

Document = Union[Mapping[str, str], Sequence[str]]


class ServerError(Exception):
    """The server answered with an error: ``status`` (400, 401, 404, 408, 413, 503, 507, ...) and ``message``."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def _document(doc: Any, need_id: bool) -> Dict[str, str]:
    """``{"id", "text"}`` from a mapping or an ``(id, text)`` pair (or, for queries, a bare text)."""
    if isinstance(doc, str):
        if need_id:
            raise TypeError("a document to check or insert needs an id: pass {'id': ..., 'text': ...} or (id, text)")
        return {"text": doc}
    if isinstance(doc, Mapping):
        unknown = set(doc) - {"id", "text"}
        if unknown:
            raise ValueError(f"unknown document fields: {sorted(unknown)} (a document has 'id' and 'text')")
        out = {"text": doc["text"]}
        if "id" in doc and doc["id"] is not None:
            out["id"] = str(doc["id"])
        elif need_id:
            raise ValueError("a document to check or insert needs an 'id'")
        return out
    if isinstance(doc, (tuple, list)) and len(doc) == 2:
        return {"id": str(doc[0]), "text": doc[1]}
    raise TypeError(f"a document is a dict with 'id' and 'text', an (id, text) pair or a str, not {type(doc).__name__}")


class Client:
    """A client of ``lshbench serve`` at ``url`` (``http://host:port``), sending ``token`` as a bearer token."""

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 60.0):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(f"url {url!r}: expected http://HOST:PORT (lshbench serve speaks plain HTTP)")
        self.url = url.rstrip("/")
        self._host = parsed.hostname
        self._port = parsed.port or 80
        self._prefix = parsed.path.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._conn: Optional[http.client.HTTPConnection] = None

    def __repr__(self) -> str:
        return f"Client({self.url!r}{', token=...' if self.token else ''})"

    def close(self) -> None:
        """Closes the connection (the next call opens a new one)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _request(self, method: str, path: str, body: Optional[Any] = None) -> Any:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        # A kept-alive connection the server has closed meanwhile (its idle timeout) fails at once: that one is
        # retried on a fresh connection. A fresh connection's failure is raised.
        while True:
            reused = self._conn is not None
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
            try:
                self._conn.request(method, self._prefix + path, body=data, headers=headers)
                response = self._conn.getresponse()
                raw = response.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()
                if not reused:
                    raise
        if response.getheader("Connection", "").lower() == "close":
            self.close()
        if response.status != 200:
            try:
                message = json.loads(raw)["error"]
            except (ValueError, KeyError, TypeError):
                message = raw.decode("utf-8", "replace")
            raise ServerError(response.status, message)
        ctype = response.getheader("Content-Type", "")
        return json.loads(raw) if ctype.startswith("application/json") else raw.decode("utf-8")

    @staticmethod
    def _path_id(doc_id: str) -> str:
        return urllib.parse.quote(str(doc_id), safe="")

    def check(self, documents: Iterable[Document], insert: str = "always") -> List[Dict[str, Any]]:
        """Checks each document against the index, then inserts it (``insert``: ``"always"``, ``"if-unique"``
        or ``"never"``), in order; answered once durable. One result per document: ``duplicates`` (earlier
        near-duplicates with ``id``, ``seq``, ``estimate`` and, with exact verification, ``jaccard``),
        ``inserted``, ``seq``, ``reason`` when not inserted, ``empty``, ``unchecked``."""
        if insert not in ("always", "if-unique", "never"):
            raise ValueError(f"insert={insert!r}: expected 'always', 'if-unique' or 'never'")
        docs = [_document(d, need_id=True) for d in documents]
        return self._request("POST", "/v1/check", {"documents": docs, "insert": insert})["results"]

    def query(self, documents: Iterable[Document]) -> List[Dict[str, Any]]:
        """The near-duplicates of each document (a text, or a dict with ``text`` and an optional ``id``) among
        the durable documents; nothing is inserted."""
        docs = [_document(d, need_id=False) for d in documents]
        return self._request("POST", "/v1/query", {"documents": docs})["results"]

    def insert(self, documents: Iterable[Document]) -> List[Dict[str, Any]]:
        """Inserts each document without looking for near-duplicates; answered once durable."""
        docs = [_document(d, need_id=True) for d in documents]
        return self._request("POST", "/v1/insert", {"documents": docs})["results"]

    def get(self, doc_id: str) -> Optional[Dict[str, Any]]:
        """The document ``doc_id`` (``id``, ``seq``, ``empty``, and ``text`` when the index keeps texts), or
        ``None`` when the index has no such document."""
        try:
            return self._request("GET", "/v1/documents/" + self._path_id(doc_id))
        except ServerError as e:
            if e.status == 404:
                return None
            raise

    def delete(self, doc_id: str) -> bool:
        """Deletes ``doc_id``; ``True`` when it was there. Answered once durable."""
        try:
            return bool(self._request("DELETE", "/v1/documents/" + self._path_id(doc_id))["deleted"])
        except ServerError as e:
            if e.status == 404:
                return False
            raise

    def stats(self) -> Dict[str, Any]:
        """The index's size (``documents``), memory and disk (in all and per document), parameters, S-curve and
        recovery, as ``GET /v1/stats`` answers."""
        return self._request("GET", "/v1/stats")

    def health(self) -> bool:
        """Whether the server answers ``GET /healthz`` with ``ok``."""
        try:
            return self._request("GET", "/healthz").strip() == "ok"
        except ServerError:
            return False
