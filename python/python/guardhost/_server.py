"""``guardhost-provider-server``: the child process of an ``isolation: process`` provider.

Not for people: guardhost starts it as ``guardhost-provider-server
provider-server`` and speaks its provider protocol on stdin/stdout, exactly
as with ``guardhost provider-server``.
"""

from __future__ import annotations

import os
import sys
import threading
import time


def _exit_with_the_host(host: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != host:
            os._exit(3)


def main() -> int:
    """Serves one provider until the host closes standard input."""
    if sys.argv[1:] != ["provider-server"]:
        print("usage: guardhost-provider-server provider-server (started by guardhost for `isolation: process`)", file=sys.stderr)
        return 2
    from ._guardhost import serve_provider

    # Private copies of the protocol's ends (not inherited by children);
    # then stdin reads /dev/null and stdout goes to stderr, so what the
    # provider prints cannot corrupt the protocol.
    protocol_in = os.dup(0)
    protocol_out = os.dup(1)
    sys.stdout.flush()
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    threading.Thread(target=_exit_with_the_host, args=(os.getppid(),), daemon=True, name="host-watch").start()
    return serve_provider(protocol_in, protocol_out)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
