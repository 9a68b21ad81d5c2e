"""A 50 MB download through the egress proxy, from inside the sandbox, against the same
download by the same client outside it, measured alternately in the same run.

A loopback server in its own process serves 50 MB (``sendfile``), over HTTP and over
TLS. ``curl`` downloads it to ``/dev/null`` directly on the host (the baseline), and
inside ``lw.bash`` as a worker whose policy allows the server's name (resolved by the
test override, as the tests do), through the proxy: a forwarded request for HTTP, a
CONNECT tunnel for HTTPS. Both sides report curl's own ``time_total``, so the command's
start-up is not in the figure; the ratio is throughput through the proxy over
throughput outside (target >= 0.5). It also prints what a command with a policy costs
on ``true`` against one without (the broker and the proxy's session).

Usage: python benchmarks/egress.py [--rounds N] [--backend bwrap|landlock] [--megabytes M]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from temporalio.testing import ActivityEnvironment

from lw_temporal import BashRequest, NetworkPolicy, WorkflowDefinition
from lw_temporal._bash import BashActivities
from lw_temporal._config import LwConfig
from lw_temporal._egress import ProxyLimits

WORKER = ("run_bench@1/steps/step_1", "lw.Worker")
PLAIN = ("run_plain@1/steps/step_1", "lw.Worker")

#: The server: one file, every request answered with sendfile (HTTP, then HTTPS).
SERVER = r"""
import socket, ssl, sys, threading
path, cert, key = sys.argv[1:4]
size = __import__('os').path.getsize(path)
def serve(listener, wrap):
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=answer, args=(conn, wrap), daemon=True).start()
def answer(conn, wrap):
    try:
        if wrap is not None:
            conn = wrap.wrap_socket(conn, server_side=True)
        data = b''
        while b'\r\n\r\n' not in data:
            chunk = conn.recv(4096)
            if not chunk:
                return
            data += chunk
        conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n' % size)
        with open(path, 'rb') as f:
            if wrap is None:
                conn.sendfile(f)
            else:
                while block := f.read(1 << 20):
                    conn.sendall(block)
    except OSError:
        pass
    finally:
        conn.close()
tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
tls.load_cert_chain(cert, key)
ports = []
for wrap in (None, tls):
    listener = socket.create_server(('127.0.0.1', 0))
    ports.append(listener.getsockname()[1])
    threading.Thread(target=serve, args=(listener, wrap), daemon=True).start()
print(*ports, flush=True)
threading.Event().wait()
"""


def _certificate(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-subj", "/CN=big.test",
         "-addext", "subjectAltName=DNS:big.test", "-days", "2"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def _curl(url: str, ca: Path | str) -> list[str]:
    return [
        "curl",
        "-sS",
        "--fail",
        "-o",
        "/dev/null",
        "-w",
        "%{time_total}",
        "--cacert",
        str(ca),
        url,
    ]


async def main(rounds: int, backend: str, megabytes: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        os.chmod(root, 0o755)
        big = root / "big.bin"
        big.write_bytes(os.urandom(megabytes << 20))
        cert, key = _certificate(root)
        server = subprocess.Popen(  # noqa: ASYNC220 (the stand-in server, once)
            [sys.executable, "-c", SERVER, str(big), str(cert), str(key)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            http_port, https_port = (int(p) for p in server.stdout.readline().split())
            policy = NetworkPolicy(
                allow=(f"big.test:{http_port}", f"big.test:{https_port}"), roles=("worker",)
            )
            definitions = [
                WorkflowDefinition(id="bench", network=policy),
                WorkflowDefinition(id="plain"),
            ]
            config = LwConfig.create(root / "data", definitions)
            # Run in an ActivityEnvironment, so without caller checks (there is no server
            # to confirm the caller; benchmarks/callers.py measures what they add).
            config.callers.enabled = False
            activities = BashActivities(
                config, sandbox=backend, egress=ProxyLimits(resolve={"big.test": "127.0.0.1"})
            )
            env = ActivityEnvironment()
            env.info = dataclasses.replace(env.info, workflow_id=WORKER[0], workflow_type=WORKER[1])
            plain_env = ActivityEnvironment()
            plain_env.info = dataclasses.replace(
                env.info, workflow_id=PLAIN[0], workflow_type=PLAIN[1]
            )
            ca_text = cert.read_text()
            urls = {
                "http (forwarded)": f"http://big.test:{http_port}/big.bin",
                "https (CONNECT)": f"https://big.test:{https_port}/big.bin",
            }
            print(f"{megabytes} MB, {rounds} rounds, backend {backend}, load {os.getloadavg()}")
            for label, url in urls.items():
                direct_url = (
                    url.replace("big.test", "127.0.0.1") if url.startswith("http:") else url
                )
                outside, inside = [], []
                for _ in range(rounds + 1):  # the first round warms up
                    resolve = ["--resolve", f"big.test:{https_port}:127.0.0.1"]
                    done = subprocess.run(  # noqa: ASYNC221
                        [*_curl(direct_url, cert), *resolve], check=True, capture_output=True
                    )
                    outside.append(float(done.stdout))
                    command = f"cat > ca.pem <<'PEM'\n{ca_text}PEM\n" + " ".join(
                        _curl(url, "ca.pem")
                    )
                    result = await env.run(
                        activities.bash, BashRequest(command=command, timeout_seconds=300)
                    )
                    assert result.exit_code == 0, result
                    inside.append(float(result.stdout))
                out, ins = statistics.median(outside[1:]), statistics.median(inside[1:])
                rate_out, rate_in = megabytes / out, megabytes / ins
                print(f"\n[{label}]")
                print(f"  outside the sandbox   {out * 1000:8.1f} ms  {rate_out:8.1f} MB/s")
                print(f"  through the proxy     {ins * 1000:8.1f} ms  {rate_in:8.1f} MB/s")
                print(f"  proxy / outside = {rate_in / rate_out:.2f}x throughput (target >= 0.50)")
            timings: dict[str, list[float]] = {"with a policy": [], "without": []}
            for i in range(rounds * 4):
                for name in list(timings)[i % 2 :] + list(timings)[: i % 2]:
                    run_env = env if name == "with a policy" else plain_env
                    start = time.perf_counter()
                    result = await run_env.run(activities.bash, BashRequest(command="true"))
                    timings[name].append(time.perf_counter() - start)
                    assert result.exit_code == 0, result
            with_policy, without = (statistics.median(v) for v in timings.values())
            print("\n[lw.bash on true]")
            print(f"  with a policy   {with_policy * 1000:8.2f} ms (broker, proxy session)")
            print(f"  without         {without * 1000:8.2f} ms")
        finally:
            activities.egress.stop()
            server.kill()
            server.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backend", default="bwrap", choices=("bwrap", "landlock"))
    parser.add_argument("--megabytes", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.backend, args.megabytes))
