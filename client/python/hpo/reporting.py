"""Reporting from inside a trial, in a way that never stalls or fails it for hpod's absence.

Each report is appended to the trial's journal ($HPO_TRIAL_DIR/reports.journal) and handed to a
thread of the reporter's own, which delivers it to hpod; the trainer waits for the journal, and
for hpod's answer at most $HPO_REPORT_WAIT seconds (default 0.05) while nothing else waits and hpod
answered last time.
The thread sends a backlog over one ReportStream, in batches, each call with a deadline
($HPO_REPORT_TIMEOUT seconds, default 5). While hpod does not answer, reports wait in the journal
and go, in order, with the next delivery that reaches it; after a miss the thread waits before it
tries again (1 s while hpod's host refuses the connection, doubling up to 30 s while calls run
into their deadline). Reports still waiting when the trial ends are read by hpod from the
journal. A report the journal cannot take (a full disk) waits in memory, with a warning on
stderr, and the process tries for a while to deliver such reports before it exits. hpod's answer
that the trial should stop comes back with that report, or with the next one when it came later. Every report has an id of its own,
so hpod stores each once, whichever way it came.

The journal is the one `hpo report` and `hpo exec` write (common/report_journal.h): one line
per report, ``<id> <step or -> <unix time> <metric>=<value> ...``, and a cursor file
(reports.sent), ``<offset> <retry after, unix ms> <backoff ms>``.
"""
import atexit
import base64
import hashlib
import hmac
import os
import secrets
import sys
import threading
import time

import grpc

from hpo.v1 import hpo_pb2, hpo_pb2_grpc

FIRST_BACKOFF = 1.0
MAX_BACKOFF = 30.0
BATCH = 256  # reports per ReportStream call
EXIT_FLUSH = 10.0  # seconds a process spends at exit on reports no journal keeps
_JOURNAL = "reports.journal"
_CURSOR = "reports.sent"
_UNREACHED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
              grpc.StatusCode.CANCELLED, grpc.StatusCode.ABORTED)


class HpoError(RuntimeError):
    """A refused call: ``code`` is the gRPC status code, the message says what and where."""

    def __init__(self, code, message):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


def channel(endpoint, tls_ca_pem, options=()):
    """An insecure channel, or a TLS one trusting the PEM CA ``tls_ca_pem`` (bytes)."""
    if not tls_ca_pem:
        return grpc.insecure_channel(endpoint, options=options)
    creds = grpc.ssl_channel_credentials(root_certificates=tls_ca_pem)
    return grpc.secure_channel(endpoint, creds, options=options)


def tls_ca_from_environment():
    """The CA to trust, as PEM bytes: $HPO_TLS_CA_DATA (base64 of its PEM, what hpod gives
    trials and agents), else the file $HPO_TLS_CA; None when neither is set."""
    data = os.environ.get("HPO_TLS_CA_DATA")
    if data:
        try:
            return base64.b64decode(data.strip(), validate=True)
        except ValueError:
            raise HpoError(grpc.StatusCode.FAILED_PRECONDITION,
                           "HPO_TLS_CA_DATA is not base64 (of a PEM CA certificate)") from None
    path = os.environ.get("HPO_TLS_CA")
    if path:
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as e:
            raise HpoError(grpc.StatusCode.FAILED_PRECONDITION,
                           f"HPO_TLS_CA: cannot read {path}: {e.strerror}") from None
    return None


# The proofs a trial and hpod exchange instead of the trial's token (common/proofs.h, where the
# texts are defined; a test checks that both sides agree).
def _mac(token, text):
    return hmac.new(token.encode(), text.encode(), hashlib.sha256).hexdigest()


def report_proof_text(trial_id, step, report_id, made, metrics):
    lines = ["hpo-report/1", str(int(trial_id)), "-" if step is None else str(int(step)),
             str(int(report_id)), "-" if made is None else "%.17g" % made]
    lines += ["%s=%.17g" % (k, float(v)) for k, v in sorted(metrics.items())]
    return "\n".join(lines) + "\n"


def report_proof(token, trial_id, step, report_id, made, metrics):
    return _mac(token, report_proof_text(trial_id, step, report_id, made, metrics))


def _reply_proof(token, request_proof, action, step):
    return _mac(token, f"hpo-report-reply/1\n{request_proof}\n{int(action)}\n{int(step)}\n")


def _refusal_proof(token, request_proof, code):
    return _mac(token, f"hpo-report-refusal/1\n{request_proof}\n{int(code)}\n")


class _Unproven(grpc.RpcError):
    """An answer at hpod's address without hpod's proof: treated as hpod not reached."""

    def __init__(self, message):
        super().__init__(message)
        self._message = message

    def code(self):
        return grpc.StatusCode.UNAVAILABLE

    def details(self):
        return self._message


def _timeout():
    try:
        t = float(os.environ.get("HPO_REPORT_TIMEOUT", ""))
        return t if t > 0 else 5.0
    except ValueError:
        return 5.0


def _wait():
    """How long a report waits for hpod's answer before the thread goes on with it alone, in
    seconds: $HPO_REPORT_WAIT, a duration as hpo reads it ("100ms", "0.5s", "0s": not at all),
    default 0.05."""
    text = os.environ.get("HPO_REPORT_WAIT", "").strip()
    try:
        t = float(text[:-2]) / 1000 if text.endswith("ms") else float(text.rstrip("s"))
        return t if t >= 0 else 0.05
    except ValueError:
        return 0.05


def _line(entry):
    rid, step, metrics, made = entry
    fields = [str(rid), "-" if step is None else str(int(step)), f"{made:.6f}"]
    for name, value in sorted(metrics.items()):
        if not name or any(c in name for c in " \t\r\n="):
            raise HpoError(grpc.StatusCode.INVALID_ARGUMENT,
                           f"metric name '{name}' is empty or holds a blank or '='")
        fields.append(f"{name}={float(value)!r}")
    return " ".join(fields) + "\n"


def _parse(text, start):
    """Entries of journal text read from byte ``start``: (entry, end offset) pairs."""
    out, pos = [], 0
    while True:
        nl = text.find(b"\n", pos)
        if nl < 0:
            return out  # a line still being written
        f = text[pos:nl].decode("utf-8", "replace").split()
        pos = nl + 1
        try:
            metrics = {}
            for m in f[3:]:
                k, v = m.split("=", 1)
                metrics[k] = float(v)
            if len(f) >= 4 and k and int(f[0]) != 0:
                out.append(((int(f[0]), None if f[1] == "-" else int(f[1]), metrics, float(f[2])),
                            start + pos))
        except ValueError:
            pass  # a malformed line: skipped, as hpod skips it


class Reporter:
    """One trial's reports (see the module's text). Without a trial directory (a trial that
    something else runs), a report waits for hpod instead, a minute at most, and a refusal or
    hpod's absence raises HpoError."""

    def __init__(self, endpoint=None, trial_id=None, token=None, trial_dir=None, tls_ca_pem=None):
        if endpoint is not None:
            self.endpoint, self.trial_id, self.token = endpoint, trial_id, token
        else:
            try:
                self.endpoint = os.environ["HPO_ENDPOINT"]
                self.trial_id = int(os.environ["HPO_TRIAL_ID"])
                self.token = os.environ["HPO_TRIAL_TOKEN"]
            except KeyError as e:
                raise HpoError(grpc.StatusCode.FAILED_PRECONDITION,
                               f"not inside an hpod trial: {e.args[0]} is not set") from None
            trial_dir = os.environ.get("HPO_TRIAL_DIR") or None
        # Where hpod says it listens now (its data directory's endpoint file), followed after a
        # miss: hpod may have come back on another port or node.
        self.endpoint_file = os.environ.get("HPO_ENDPOINT_FILE") if endpoint is None else None
        self.tls_ca = tls_ca_pem if tls_ca_pem is not None else tls_ca_from_environment()
        self._connect()
        self.timeout = _timeout()
        self.journal = os.path.join(trial_dir, _JOURNAL) if trial_dir else None
        self.cursor = os.path.join(trial_dir, _CURSOR) if trial_dir else None
        self.sent, self.retry_after, self.backoff = self._read_cursor()
        self.pending = self._unsent()  # [(entry, end offset or 0)]
        self._wake = threading.Event()
        self._answered = threading.Condition()
        self.wait = _wait()
        self._thread = None
        self._stop = False  # hpod asked the trial to stop
        self._warned = False

    def _connect(self):
        # Quick to reconnect once hpod is back (gRPC's own backoff grows to two minutes).
        options = [("grpc.initial_reconnect_backoff_ms", 200), ("grpc.min_reconnect_backoff_ms", 200),
                   ("grpc.max_reconnect_backoff_ms", 2000)]
        if getattr(self, "channel", None) is not None:
            self.channel.close()
        self.channel = channel(self.endpoint, self.tls_ca, options)
        self.stub = hpo_pb2_grpc.ReportServiceStub(self.channel)

    def _follow(self):
        """After a miss: True when the endpoint file names another address, now this one's."""
        if not self.endpoint_file:
            return False
        try:
            with open(self.endpoint_file) as f:
                now = f.read().strip()
        except OSError:
            return False
        if not now or now == self.endpoint:
            return False
        self.endpoint = now
        self._connect()
        return True

    def _read_cursor(self):
        try:
            with open(self.cursor) as f:
                sent, retry_ms, backoff_ms = (int(x) for x in f.read().split())
            if backoff_ms > 0:
                return sent, retry_ms / 1000.0, backoff_ms / 1000.0
            return sent, 0.0, 0.0
        except (OSError, TypeError, ValueError):
            return 0, 0.0, 0.0

    def _write_cursor(self):
        if not self.cursor:
            return
        tmp = self.cursor + ".tmp"
        try:
            with open(tmp, "w") as f:
                f.write(f"{self.sent} {int(self.retry_after * 1000) if self.backoff else 0} "
                        f"{int(self.backoff * 1000)}\n")
            os.replace(tmp, self.cursor)
        except OSError:
            pass

    def _unsent(self):
        if not self.journal:
            return []
        try:
            with open(self.journal, "rb") as f:
                f.seek(self.sent)
                return _parse(f.read(), self.sent)
        except OSError:
            return []

    def _record(self, step, metrics):
        entry = (secrets.randbits(63) | 1, None if step is None else int(step),
                 {k: float(v) for k, v in metrics.items()}, time.time())
        line = _line(entry)
        end = 0
        if self.journal:
            try:
                with open(self.journal, "ab") as f:
                    f.write(line.encode())
                    end = f.tell()
            except OSError:
                end = 0  # not written: it waits in memory
        self.pending.append((entry, end))

    def _request(self, entry):
        # The token never leaves the trial: the report carries a proof of it, and only an answer
        # (or a refusal) with hpod's proof over that one is taken.
        rid, step, metrics, made = entry
        proof = report_proof(self.token, self.trial_id, step, rid, made, metrics)
        req = hpo_pb2.ReportRequest(trial_id=self.trial_id, metrics=metrics, report_id=rid,
                                    time=made, proof=proof)
        if step is not None:
            req.step = step
        return req

    def _refused(self, e, proof):
        """A failed call: raises it as it is when hpod was not reached or proved its refusal."""
        if e.code() in _UNREACHED:
            raise e
        said = dict(e.trailing_metadata() or ())
        if not hmac.compare_digest(said.get("hpo-refusal-proof", ""),
                                   _refusal_proof(self.token, proof, e.code().value[0])):
            raise _Unproven(f"the server at {self.endpoint} refused the report without proof "
                            f"that it is hpod ({e.details()}); the report waits") from None
        raise e

    def _check(self, reply, proof):
        if not hmac.compare_digest(reply.proof, _reply_proof(self.token, proof, reply.action,
                                                             reply.step)):
            raise _Unproven(f"the server at {self.endpoint} answered without proof that it is "
                            "hpod; the report waits")
        return reply

    def _send(self, entry):
        req = self._request(entry)
        try:
            reply = self.stub.Report(req, timeout=self.timeout)
        except grpc.RpcError as e:
            self._refused(e, req.proof)
        return self._check(reply, req.proof)

    def _send_batch(self, entries):
        """Several reports over one ReportStream: (hpod's answers in order, as many as it gave,
        and the error that ended the stream early or None)."""
        reqs = [self._request(entry) for entry in entries]
        replies = []
        try:
            try:
                for reply in self.stub.ReportStream(iter(reqs),
                                                    timeout=self.timeout + 0.02 * len(reqs)):
                    replies.append(self._check(reply, reqs[len(replies)].proof))
                    if len(replies) == len(reqs):
                        break
            except grpc.RpcError as e:
                self._refused(e, reqs[min(len(replies), len(reqs) - 1)].proof)
        except grpc.RpcError as e:
            return replies, e
        if len(replies) < len(reqs):
            return replies, _Unproven("hpod ended the report stream early")
        return replies, None

    def deliver(self, now=False):
        """Hands the waiting reports to hpod, oldest first. Returns (stop, missed): whether hpod
        asked the trial to stop, and the gRPC error when it was not reached (else None)."""
        stop, followed = False, False
        if not now and self.backoff and time.time() < self.retry_after:
            return stop, None
        while self.pending:
            batch = self.pending[:BATCH]
            sent = time.time()
            if len(batch) > 1:
                replies, err = self._send_batch([entry for entry, _ in batch])
            else:
                try:
                    replies, err = [self._send(batch[0][0])], None
                except grpc.RpcError as e:
                    replies, err = [], e
            for reply, (_, end) in zip(replies, batch):
                self._done(end)
                stop = stop or reply.action == hpo_pb2.ReportResponse.ACTION_STOP
            if err is None:
                continue
            if err.code() in _UNREACHED and not followed and self._follow():
                followed = True  # hpod listens elsewhere now: once
                continue
            if err.code() in _UNREACHED:
                self._connect()  # the next try on a new connection
                # A refused connection costs nothing to try again; only calls that ran into
                # their deadline (a host that does not answer) make the wait grow.
                slow = time.time() - sent >= FIRST_BACKOFF
                self.backoff = min(self.backoff * 2, MAX_BACKOFF) if self.backoff and slow else FIRST_BACKOFF
                self.retry_after = time.time() + self.backoff
                self._write_cursor()
                return stop, err
            self._done(batch[len(replies)][1])
            raise HpoError(err.code(), err.details()) from None
        return stop, None

    def _done(self, end):
        self.pending.pop(0)
        moved = end > self.sent
        missing = self.backoff > 0
        self.sent = max(self.sent, end)
        self.backoff, self.retry_after = 0.0, 0.0
        if moved or missing:
            self._write_cursor()

    def _in_memory(self):
        return any(end == 0 for _, end in self.pending)

    def report(self, step, metrics):
        if not self.journal:
            return self._report_now(step, metrics)
        self._record(step, metrics)
        if self._in_memory() and not self._warned:
            self._warned = True
            print(f"hpo: the journal {self.journal} cannot be written (a full or read-only disk?); "
                  "reports wait in memory until hpod takes them", file=sys.stderr)
        if self._thread is None:
            self._thread = threading.Thread(target=self._sender, name="hpo-report-sender",
                                            daemon=True)
            self._thread.start()
            atexit.register(self._flush)
        entry = self.pending[-1][0]
        waits = not self.backoff and len(self.pending) == 1
        self._wake.set()
        if waits and self.wait > 0:
            # Nothing else waits and hpod answered last time: its answer, a stop above all, is
            # worth a short wait.
            with self._answered:
                self._answered.wait_for(
                    lambda: self.backoff or all(e is not entry for e, _ in self.pending),
                    timeout=self.wait)
        return not self._stop

    def _sender(self):
        """The reporter's thread: delivers whenever there is something to, as the wait after a
        miss allows."""
        while True:
            if not self.pending:
                timeout = None
            elif self.backoff:
                timeout = max(0.05, self.retry_after - time.time())
            else:
                timeout = 0.05
            self._wake.wait(timeout)
            self._wake.clear()
            try:
                stop, _ = self.deliver()
                self._stop = self._stop or stop
            except HpoError as e:
                print(f"hpo: hpod refused a report: {e}", file=sys.stderr)
            except Exception as e:  # never the trainer's failure
                print(f"hpo: reporting failed: {e!r}", file=sys.stderr)
            with self._answered:
                self._answered.notify_all()

    def _flush(self):
        """At exit: reports no journal keeps get a last chance."""
        give_up = time.time() + EXIT_FLUSH
        while self._in_memory() and time.time() < give_up:
            try:
                self.deliver(now=True)
            except HpoError:
                pass
            if self._in_memory():
                time.sleep(max(0.05, min(self.retry_after, give_up) - time.time()))

    def _report_now(self, step, metrics):
        """Without a journal nothing keeps a report but this process: it waits for hpod, a
        minute at most, and hpod's absence or refusal raises HpoError."""
        self._record(step, metrics)
        stop, missed = self.deliver()
        give_up = time.time() + 60
        while missed is not None and self.pending and time.time() < give_up:
            time.sleep(max(0.0, min(self.retry_after, give_up) - time.time()))
            more, missed = self.deliver(now=True)
            stop = stop or more
        if missed is not None and self.pending:
            raise HpoError(missed.code(), missed.details())
        return not stop


_reporter = None


def report(step=None, **metrics):
    """Inside a trial: pushes metrics (e.g. ``report(step=3, val_acc=0.91)``).

    Returns True to go on, False once hpod has asked the trial to stop (checkpoint and exit); the
    answer to a report comes with the next one. Never waits for hpod and never fails for its
    absence: the report is written to the trial's journal and a thread delivers it; while hpod is
    away, reports wait there and go when it answers (or hpod reads them when the trial ends). Reads HPO_ENDPOINT, HPO_TRIAL_ID, HPO_TRIAL_TOKEN, HPO_TRIAL_DIR and
    HPO_ENDPOINT_FILE (where hpod listens now, should it come back elsewhere).
    """
    global _reporter
    if _reporter is None:
        _reporter = Reporter()
    return _reporter.report(step, metrics)
