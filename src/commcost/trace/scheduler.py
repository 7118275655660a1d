"""A Dask scheduler address checked before a client is built: the scheme, and a handshake in time.

``trace --scheduler`` connects with ``distributed.Client``, whose connect timeout covers opening
the TCP connection but not the handshake after it: a port that accepts and never answers (a
dashboard or an HTTP proxy given by mistake) would hold the client forever, and a service that
speaks first (an SSH banner) is read as a frame length of exabytes. So the address is checked here
first, in one stated time:

* the scheme: ``tcp://HOST:PORT`` (or ``HOST:PORT``) only. ``tls://`` needs certificates and a
  security configuration, ``ucx://`` the UCX bindings, ``ws://``/``wss://`` the web-socket comm and
  ``inproc://`` this very process; commcost takes none of them, so each is refused in one line;
* the handshake: a Dask listener writes its handshake first, as soon as it accepts a connection
  (``distributed.comm.core.Listener.on_connection`` writes, then reads), as one frame that starts
  with its length, 8 bytes (``distributed.comm.tcp.TCP.read``, ``struct`` format ``Q``). The probe
  connects, waits at most ``timeout_s`` for those 8 bytes, and accepts a length below
  :data:`MAX_HANDSHAKE_BYTES`; silence or anything else is not a Dask scheduler.
"""

from __future__ import annotations

import socket
import struct
from urllib.parse import urlsplit

from commcost.core.errors import InputError

__all__ = ["check_scheduler", "HANDSHAKE_TIMEOUT_S", "MAX_HANDSHAKE_BYTES", "SCHEMES_REFUSED"]

HANDSHAKE_TIMEOUT_S = 10.0
"""Seconds to connect and to receive the scheduler's first bytes, each."""

MAX_HANDSHAKE_BYTES = 1 << 20
"""A handshake frame is a small msgpack dict (a few hundred bytes); a first length above 1 MiB is
not one (``SSH-2.0-`` read as a length is about 3.5e18 bytes)."""

SCHEMES_REFUSED = {
    "tls": "needs certificates and a Dask security configuration, which commcost does not take",
    "ucx": "needs the UCX bindings (ucx-py) and a UCX network, which commcost does not set up",
    "ucxx": "needs the UCX bindings and a UCX network, which commcost does not set up",
    "ws": "needs Dask's web-socket comm, which commcost does not set up",
    "wss": "needs Dask's web-socket comm and certificates, which commcost does not set up",
    "inproc": "names a scheduler inside this very process",
}
"""Address schemes Dask knows and commcost refuses, and why."""


def _parse(address: str) -> tuple[str, int]:
    text = address.strip()
    if not text:
        raise InputError("--scheduler is empty: give tcp://HOST:PORT")
    scheme, sep, _ = text.partition("://")
    if not sep:
        text, scheme = "tcp://" + text, "tcp"
    scheme = scheme.lower()
    if scheme in SCHEMES_REFUSED:
        raise InputError(f"--scheduler {address}: {scheme}:// {SCHEMES_REFUSED[scheme]}; give tcp://HOST:PORT")
    if scheme != "tcp":
        raise InputError(f"--scheduler {address}: unknown scheme {scheme!r}; give tcp://HOST:PORT")
    try:
        parts = urlsplit(text)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise InputError(f"--scheduler {address}: not tcp://HOST:PORT ({exc})") from None
    if not host or port is None or parts.path not in ("", "/") or parts.query or parts.fragment:
        raise InputError(f"--scheduler {address}: not tcp://HOST:PORT (the scheduler's port, usually 8786)")
    if port == 0:
        raise InputError(f"--scheduler {address}: port 0 is not a port a scheduler listens on")
    return host, port


def check_scheduler(address: str, timeout_s: float = HANDSHAKE_TIMEOUT_S) -> str:
    """``address`` as ``tcp://HOST:PORT`` once a Dask listener there has begun its handshake within
    ``timeout_s`` (module docstring); else :class:`InputError` naming ``--scheduler``."""
    host, port = _parse(address)
    where = f"--scheduler {address}"
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except socket.timeout:
        raise InputError(f"{where}: no connection within {timeout_s:g} s") from None
    except OSError as exc:
        raise InputError(f"{where}: cannot connect ({exc.strerror or exc})") from None
    try:
        sock.settimeout(timeout_s)
        head = b""
        while len(head) < 8:
            chunk = sock.recv(8 - len(head))
            if not chunk:
                raise InputError(f"{where}: the service closed the connection without a Dask handshake")
            head += chunk
    except socket.timeout:
        raise InputError(f"{where}: connected, but no Dask handshake within {timeout_s:g} s "
                         "(a dashboard or an HTTP port? the scheduler's port is usually 8786)") from None
    except OSError as exc:
        raise InputError(f"{where}: connection lost during the handshake ({exc.strerror or exc})") from None
    finally:
        sock.close()
    (n,) = struct.unpack("Q", head)  # native order, as Dask packs it
    if not 0 < n < MAX_HANDSHAKE_BYTES:
        shown = head.decode("ascii", "replace")
        raise InputError(f"{where}: not a Dask scheduler (it sent {shown!r} first)")
    return f"tcp://{host if ':' not in host else '[' + host + ']'}:{port}"
