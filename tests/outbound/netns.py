"""Run a Python module in a network namespace of its own, with its own hosts file.

The namespace has only a loopback interface, holding 127.0.0.1 and the `public` addresses
given (so a server can listen on an address the address policy takes for the internet, and
no packet leaves the machine); its `/etc/hosts` is `hosts`, bind-mounted, so rewriting that
file in place changes what a host name resolves to, as a DNS answer changing would (DNS
rebinding). Needs `unshare` and `ip` and the right to make namespaces (root here): a machine
without them fails the test, never skips it.

    result = run_isolated("tests.outbound.rebinding_probe", "two-policies",
                          hosts=tmp_path / "hosts", public=["8.8.4.4"])
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_isolated(
    module: str, *args: str, hosts: Path, public: Sequence[str], timeout_s: float = 60
) -> Any:
    """Run `python -m module args` in the namespace; return the JSON its last stdout line
    holds. `hosts` is made (empty) if missing."""
    hosts.touch()
    setup = ["ip link set lo up"]
    setup += [f"ip addr add {shlex.quote(address)}/32 dev lo" for address in public]
    setup.append(f"mount --bind {shlex.quote(str(hosts))} /etc/hosts")
    python = shlex.join([sys.executable, "-m", module, *args])
    script = " && ".join([*setup, f"exec {python}"])
    done = subprocess.run(  # noqa: S603 - fixed programs, quoted arguments
        ["unshare", "--net", "--mount", "sh", "-c", script],  # noqa: S607 - found on PATH
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, f"isolated run failed ({done.returncode}):\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])
