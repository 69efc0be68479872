"""Which LLM servers may receive MIMIC-derived text, and the one spelling of a server's address.

When the requests carry MIMIC-derived text (``ServerPolicy``), the server's address, read from the environment at
job time, must be a loopback address or a host the user declared in ``phi_servers``; the check runs before any
connection is attempted. Names are not resolved: ``localhost`` is the only name taken as loopback. The host
checked is the host connected to: one canonical spelling (``canonical_host``: ``localhost.`` is ``localhost``;
what has none is refused), and a loopback host is connected to by its address (``connect_host``: ``localhost`` is
127.0.0.1), so no name lookup ever happens for it. ``base_url`` reads a base URL into its parts, refusing what
has no canonical spelling, port 0 and control characters."""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import LLMError

log = logging.getLogger(__name__)

LOOPBACK_NAMES = ("localhost",)
PHYSIONET_TERMS = ("PhysioNet's credentialed data use agreement for MIMIC-III lets you share the notes with no one "
                   "it does not cover, and a server that receives a prompt receives the notes")
POLICY_DOCS = "docs/cliniq.md#llm-servers"


_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")


def canonical_host(host: str) -> str:
    """The one spelling of a URL's host that the policy checks and the connection uses: lower case, without
    brackets; an IP address in its standard form (``ipaddress``); a name without its one trailing dot (the root of
    DNS: ``localhost.`` is ``localhost``). ValueError for what has no such spelling: an empty label (``a..b``,
    ``localhost..``), a label of other characters than ASCII letters, digits, ``-`` and ``_`` (an international
    name is written in its ``xn--`` form), an address in a form that only the C library reads (``127.1``,
    ``2130706433``, ``0x7f000001``), a zone index (``%eth0``)."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if "%" in host:
        raise ValueError("a zone index")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    name = host[:-1] if host.endswith(".") else host
    labels = name.split(".")
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError("not a host name")
    try:
        socket.inet_aton(name)  # parsing only: no lookup
    except OSError:
        return name
    raise ValueError("an IP address in a non-standard form")


def _bare_host(host: str) -> str:
    """``canonical_host``, or the host lower-cased where it has no canonical spelling (it then matches nothing)."""
    try:
        return canonical_host(host)
    except ValueError:
        return host.strip().lower()


def connect_host(host: str) -> str:
    """The address a connection to the canonical ``host`` opens: the loopback address itself for ``localhost``
    (no name lookup ever happens for a loopback host), the host as it is otherwise."""
    return "127.0.0.1" if host in LOOPBACK_NAMES else host


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 (also as ::ffff:127.x.y.z) and the name ``localhost``. Other names are not resolved: one
    that resolves to a loopback address (an /etc/hosts alias, a wildcard DNS name) is not loopback here."""
    host = _bare_host(host)
    if host in LOOPBACK_NAMES:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


@dataclass(frozen=True)
class ServerPolicy:
    """The requests carry MIMIC-derived text (``what`` names them, for the message): only a loopback server, or a
    host the user declared in ``phi_servers`` as covered by their data use agreement, may receive them."""

    what: str
    phi_servers: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, config: dict, what: str) -> ServerPolicy:
        """The declaration as the workflow's configuration holds it (the job reads it from there, not from its
        params: a declaration changes no output, so it must rerun nothing)."""
        return cls(what, tuple(str(h) for h in (config or {}).get("phi_servers") or ()))

    def allows(self, host: str) -> bool:
        return is_loopback(host) or _bare_host(host) in {_bare_host(h) for h in self.phi_servers}

    def check(self, url: str, variable: str) -> None:
        """Stop unless ``url`` (from the environment variable ``variable``) names an allowed host. Nothing is
        resolved or connected; the URL is not repeated in the message (it is never written anywhere)."""
        host = base_url(url, variable)[1]
        if self.allows(host):
            if not is_loopback(host) and url.lower().startswith("http:"):
                log.warning("%s go to a declared server over plain http (unencrypted)", self.what)
            return
        raise LLMError(f"{self.what} quote MIMIC-III notes, and the LLM server that {variable} names is neither a "
                       "loopback address (127.0.0.0/8, ::1, localhost) nor declared in phi_servers: "
                       f"{PHYSIONET_TERMS}. Nothing was sent.",
                       fix=f"serve the LLM on this machine (127.0.0.1), or, if your data use agreement covers that "
                           f"server, add its host name (the host of ${variable}) to phi_servers in the configuration "
                           f"({POLICY_DOCS}).")


def base_url(url: str, variable: str) -> tuple[str, str, int, str]:
    """(scheme, canonical host, port, path) of a base URL: the host the policy checks is the host the connection
    uses (``canonical_host``). LLMError for a URL that is not printable ASCII (control characters such as CR/LF,
    spaces, non-ASCII letters), has no http(s) scheme or no host, a host without a canonical spelling, or port 0."""
    fix = f"export {variable}=http://127.0.0.1:8000/v1 (the server's base URL, ending in /v1)."
    url = url.strip()
    if any(not 0x21 <= ord(c) <= 0x7E for c in url):
        raise LLMError(f"the environment variable {variable} holds a character that is not printable ASCII (a control "
                       "character such as a line break, a space, or a non-ASCII letter).",
                       fix=fix + " Write an international host name in its xn-- form.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        parts, port = None, None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise LLMError(f"the environment variable {variable} does not hold an http(s) URL with a host.", fix=fix)
    try:
        host = canonical_host(parts.hostname)
    except ValueError as exc:
        raise LLMError(f"the host in the environment variable {variable} has no canonical spelling ({exc}): it is "
                       "neither a host name of ASCII letters, digits and hyphens nor an IP address in standard form.",
                       fix=fix) from None
    if port == 0:
        raise LLMError(f"the environment variable {variable} names port 0, which no server listens on.", fix=fix)
    return parts.scheme, host, port or (443 if parts.scheme == "https" else 80), parts.path.rstrip("/")
