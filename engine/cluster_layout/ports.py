"""Free ports on 127.0.0.1 for a local cluster's tasks, chosen when the cluster starts.

Choosing binds a socket per port, so it happens once per run (``LocalCluster``), never
while a project is edited or its plan shown (``local_cluster_tasks`` binds nothing).
"""

from __future__ import annotations

import socket


def free_local_ports(count: int) -> list[int]:
    """Ports the system says are free on 127.0.0.1, all different.

    Each socket stays bound until every port is chosen, so the system cannot hand
    out the same port twice; they are released just before the tasks bind them.
    """
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
