"""One exchange with an OpenAI-compatible server: a POST to ``<base>/chat/completions`` (or another endpoint, e.g.
``/embeddings``) under a total deadline.

A watchdog shuts the socket down at the deadline, whatever phase the exchange is in, so a server that trickles its
answer a byte at a time cannot hold a job; the body is read in blocks and counted, and reading stops past the
bytes the request's ``max_tokens`` allows. A body shorter than its Content-Length is a broken connection
(``http.client.IncompleteRead``). An error status's body is not read (an error page may echo the prompt).
Redirects are never followed; an http proxy from the environment is used only where the caller passes one
(``env_proxy``: never for a loopback host, never under the server policy)."""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from .policy import is_loopback


class Expired(Exception):
    """The request's deadline passed."""


class TooLarge(Exception):
    pass


class Compressed(Exception):
    pass


@dataclass
class Server:
    scheme: str
    host: str
    port: int
    path: str
    key: str
    url_env: str
    key_env: str
    context: ssl.SSLContext | None = field(default=None, repr=False)
    proxy: tuple[str, int] | None = None  # an http proxy from the environment (never under a ServerPolicy)


def env_proxy(scheme: str, host: str) -> tuple[str, int] | None:
    """The http proxy the environment names for this scheme and host (http_proxy, https_proxy, no_proxy); none for
    a loopback host."""
    import urllib.request

    url = urllib.request.getproxies().get(scheme)
    if not url or is_loopback(host) or urllib.request.proxy_bypass(host):
        return None
    parts = urlsplit(url if "://" in url else "http://" + url)
    if parts.scheme != "http" or not parts.hostname:
        return None
    return parts.hostname, parts.port or 80


def exchange(server: Server, payload: bytes, *, read_timeout: float, deadline: float, max_bytes: int,
             endpoint: str = "/chat/completions") -> tuple:
    """POST one request; (status, Retry-After seconds or None, body bytes; empty unless 2xx). A watchdog shuts the
    socket down at the deadline, whatever phase the exchange is in; the body is read in blocks and counted."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise Expired
    timeout = min(read_timeout, remaining)
    target = server.path + endpoint
    host, port = server.proxy or (server.host, server.port)
    if server.scheme == "https":
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=server.context)
        if server.proxy:
            conn.set_tunnel(server.host, server.port)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        if server.proxy:
            target = f"http://{server.host}:{server.port}{target}"
    expired = threading.Event()
    connected = {}  # the socket, kept here: http.client lets go of it once a response that closes arrives

    def expire():
        expired.set()
        with contextlib.suppress(KeyError, OSError):
            connected["socket"].shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(remaining, expire)
    timer.daemon = True
    timer.start()
    try:
        conn.connect()
        connected["socket"] = conn.sock
        if expired.is_set():
            raise Expired
        conn.request("POST", target, body=payload, headers={
            "Content-Type": "application/json", "Accept": "application/json", "Accept-Encoding": "identity",
            "Authorization": f"Bearer {server.key}", "User-Agent": "r2med-eval"})
        resp = conn.getresponse()
        if not 200 <= resp.status < 300:  # the body is not read: an error page may echo the prompt
            retry_after = resp.getheader("Retry-After")
            return resp.status, (float(retry_after) if (retry_after or "").strip().isdigit() else None), b""
        length = resp.getheader("Content-Length")
        if length and length.strip().isdigit() and int(length) > max_bytes:
            raise TooLarge
        body = bytearray()
        while True:
            block = resp.read1(1 << 16)
            if not block:
                break
            body += block
            if len(body) > max_bytes:
                raise TooLarge
        if expired.is_set():
            raise Expired
        if length and length.strip().isdigit() and len(body) < int(length):  # the server closed mid-body
            raise http.client.IncompleteRead(bytes(body), int(length) - len(body))
        if (resp.getheader("Content-Encoding") or "identity").strip().lower() not in ("identity", ""):
            raise Compressed
        return resp.status, None, bytes(body)
    except (OSError, http.client.HTTPException):
        if expired.is_set():
            raise Expired from None
        raise
    finally:
        timer.cancel()
        conn.close()
