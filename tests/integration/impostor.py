"""What answers at hpod's address while hpod is away, as another user's process would: it binds
the port hpod left and writes down everything its callers send.

  impostor.py clear HOST:PORT LOG MARKER   a gRPC server in clear text: every call of every
      service is taken, its metadata and request bytes are logged, and it answers as hpod would
      want to be obeyed: reports are told to stop, agents are ordered to run `id > MARKER`
  impostor.py tls HOST:PORT LOG            a TLS server with a certificate of its own CA: logs
      each connection and every byte a client sends once the handshake succeeds

Runs until killed. The log's last line is a count: "calls N" (clear) or "connections N
handshakes N bytes N" (tls), rewritten as it goes.
"""
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc

from hpo.v1 import hpo_pb2


def clear(address, log_path, marker):
    lock = threading.Lock()
    calls = [0]
    log = open(log_path, "a")

    def hear(method, context, request):
        with lock:
            calls[0] += 1
            log.write(f"{method} {list(context.invocation_metadata())!r} {request!r}\n")
            log.write(f"calls {calls[0]}\n")
            log.flush()

    def order(nonce=""):
        resp = hpo_pb2.AgentSyncResponse(epoch="impostor")
        launch = resp.orders.add(seq=1).launch
        launch.trial_id, launch.segment = 99, 1
        launch.argv.extend(["/bin/sh", "-c", f"id > {marker}"])
        launch.workdir, launch.trial_dir = "/tmp", "/tmp"
        launch.stdout_path = launch.stderr_path = "/dev/null"
        return resp

    def unary(method):
        def handle(request, context):
            hear(method, context, request)
            if method.endswith("/Report"):
                return hpo_pb2.ReportResponse(action=hpo_pb2.ReportResponse.ACTION_STOP,
                                              step=1).SerializeToString()
            if method.endswith("/AgentCall"):
                env = hpo_pb2.AgentEnvelope()
                env.ParseFromString(request)
                return hpo_pb2.AgentEnvelope(job_id=env.job_id, body=order().SerializeToString(),
                                             mac="0" * 64).SerializeToString()
            if method.endswith("/AgentSync"):
                return order().SerializeToString()
            return b""
        return handle

    def stream(method):
        def handle(requests, context):
            for request in requests:
                hear(method, context, request)
                yield hpo_pb2.ReportResponse(action=hpo_pb2.ReportResponse.ACTION_STOP,
                                             step=1).SerializeToString()
        return handle

    class Everything(grpc.GenericRpcHandler):
        def service(self, details):
            if details.method.endswith("Stream") or details.method.endswith("/WatchSweep"):
                return grpc.stream_stream_rpc_method_handler(stream(details.method))
            return grpc.unary_unary_rpc_method_handler(unary(details.method))

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((Everything(),))
    if server.add_insecure_port(address) == 0:
        sys.exit(f"impostor: cannot bind {address}")
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


def tls(address, log_path):
    work = tempfile.mkdtemp()
    key, cert = os.path.join(work, "key.pem"), os.path.join(work, "cert.pem")
    name = socket.gethostname()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-days", "2", "-subj", f"/CN={name}", "-addext",
                    f"subjectAltName=DNS:{name},DNS:localhost,IP:127.0.0.1", "-keyout", key,
                    "-out", cert],
                   check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.set_alpn_protocols(["h2"])
    counts = {"connections": 0, "handshakes": 0, "bytes": 0}
    lock = threading.Lock()
    log = open(log_path, "a")

    def note(line=None):
        with lock:
            if line:
                log.write(line + "\n")
            log.write(" ".join(f"{k} {v}" for k, v in counts.items()) + "\n")
            log.flush()

    def serve(conn):
        try:
            with context.wrap_socket(conn, server_side=True) as s:
                with lock:
                    counts["handshakes"] += 1
                s.settimeout(5)
                while True:
                    data = s.recv(65536)
                    if not data:
                        break
                    with lock:
                        counts["bytes"] += len(data)
                    note(repr(data))
        except (ssl.SSLError, OSError) as e:
            note(f"handshake refused: {e}")

    host, port = address.rsplit(":", 1)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, int(port)))
    listener.listen(64)
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        with lock:
            counts["connections"] += 1
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    if sys.argv[1] == "clear":
        clear(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        tls(sys.argv[2], sys.argv[3])
