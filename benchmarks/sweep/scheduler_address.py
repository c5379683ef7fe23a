"""The dask scheduler a sweep sends its runs to: its address checked before any connection.

A user types the address: a typo (``tcp:/host:8786``), a missing port, the
dashboard's web address (``http://host:8787``) or a port where nothing
listens. dask itself answers these with a long traceback after its
connection timeout, or not at all (the dashboard's web server never
answers dask's handshake). :func:`check_scheduler` says in a line or two
what was tried and what to do, within a few seconds.
"""

import re
import socket

#: The port ``dask scheduler`` listens on by default, and its dashboard's.
SCHEDULER_PORT, DASHBOARD_PORT = 8786, 8787

_ADDRESS = re.compile(
    r"^(?:tcp://)?(?P<host>\[[0-9a-fA-F:]+\]|[A-Za-z0-9.\-_]+):(?P<port>\d{1,5})$"
)


class SchedulerAddressError(ValueError):
    """An address that is not a dask scheduler's, with what to do.

    Examples
    --------
    >>> parse_scheduler_address("http://localhost:8787")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    benchmarks.sweep.scheduler_address.SchedulerAddressError: --scheduler http://localhost:8787 is
    a web address (the dashboard?): the scheduler's is tcp://HOST:PORT, as `dask scheduler` prints
    it (port 8786 by default).
    """


def parse_scheduler_address(text):
    """``tcp://HOST:PORT`` from what the user typed (``HOST:PORT`` is accepted), or a clear error.

    Examples
    --------
    >>> parse_scheduler_address("localhost:8786"), parse_scheduler_address("tcp://10.0.0.2:9000")
    ('tcp://localhost:8786', 'tcp://10.0.0.2:9000')
    >>> parse_scheduler_address("127.0.0.1")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    benchmarks.sweep.scheduler_address.SchedulerAddressError: --scheduler 127.0.0.1 has no port:
    write tcp://127.0.0.1:8786 (8786 is dask's default).
    """
    text = text.strip()
    if re.match(r"^https?://", text):
        raise SchedulerAddressError(
            f"--scheduler {text} is a web address (the dashboard?): the scheduler's is "
            f"tcp://HOST:PORT, as `dask scheduler` prints it (port {SCHEDULER_PORT} by default)."
        )
    match = _ADDRESS.match(text)
    if match is None:
        if re.match(r"^(?:tcp://)?[A-Za-z0-9.\-_]+$", text):
            host = text.removeprefix("tcp://")
            raise SchedulerAddressError(
                f"--scheduler {text} has no port: write tcp://{host}:{SCHEDULER_PORT} "
                f"({SCHEDULER_PORT} is dask's default)."
            )
        raise SchedulerAddressError(
            f"--scheduler {text} is not an address dask reads: write tcp://HOST:PORT, "
            f"e.g. tcp://192.168.1.10:{SCHEDULER_PORT}, as `dask scheduler` prints it."
        )
    if not 0 < int(match["port"]) < 65536:
        raise SchedulerAddressError(f"--scheduler {text}: {match['port']} is not a port number.")
    return f"tcp://{match['host']}:{match['port']}"


def check_scheduler(address, timeout=5.0):
    """Raise :class:`SchedulerAddressError` unless a dask scheduler answers at ``address``
    (``tcp://HOST:PORT``).

    A dask scheduler greets a new connection with its handshake; a web
    server (the dashboard) waits for a request and answers it with HTTP.

    Examples
    --------
    >>> # the discard port: nothing listens
    >>> check_scheduler("tcp://127.0.0.1:9", timeout=1)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    benchmarks.sweep.scheduler_address.SchedulerAddressError: Nothing answers at tcp://127.0.0.1:9
    (Connection refused). Start the scheduler there (dask scheduler --port 9), or give the address
    it prints.
    """
    host, port = address.removeprefix("tcp://").rsplit(":", 1)
    host, port = host.strip("[]"), int(port)
    try:
        with socket.create_connection((host, port), timeout=timeout) as connection:
            connection.settimeout(min(2.0, timeout))
            try:
                greeting = connection.recv(256)
            except socket.timeout:
                greeting = b""
            if b"compression" in greeting:
                return
            reply = b""
            if not greeting:
                connection.sendall(b"GET / HTTP/1.0\r\n\r\n")
                try:
                    reply = connection.recv(64)
                except socket.timeout:
                    pass
    except socket.gaierror:
        raise SchedulerAddressError(
            f"--scheduler {address}: no machine is called {host!r} here."
        ) from None
    except (ConnectionRefusedError, socket.timeout, OSError) as error:
        reason = (
            "Connection refused"
            if isinstance(error, ConnectionRefusedError)
            else f"no answer within {timeout:.0f} s"
        )
        raise SchedulerAddressError(
            f"Nothing answers at {address} ({reason}). Start the scheduler there "
            f"(dask scheduler --port {port}), or give the address it prints."
        ) from None
    if reply.startswith(b"HTTP/"):
        raise SchedulerAddressError(
            f"{address} answers HTTP: that is a web server (dask's dashboard, port "
            f"{DASHBOARD_PORT} by default), not the scheduler. Give the tcp:// address `dask "
            f"scheduler` prints (port {SCHEDULER_PORT} by default)."
        )
    raise SchedulerAddressError(
        f"Something listens at {address} but does not answer as a dask scheduler. Give the tcp:// "
        "address `dask scheduler` prints."
    )
