"""Start a real Alertmanager for tests (stdlib + requests; no Django import).

    from tests.support.alertmanager import Alertmanager, make_alert

    with Alertmanager(webhook_url=live_server.url + "/hooks/am/abc", bearer_token="tok") as am:
        am.post_alerts([make_alert("LLMContainerOOMKilled", {"cluster": "c1", "pod": "p0"})])
        ...  # wait for the app to have received it

The binary is $ALERTMANAGER_BIN, else `prometheus-alertmanager` (Debian's name), else
`alertmanager` on PATH; `find_binary()` returns None when there is none, and
`require_binary()` skips the calling pytest test in that case.

Alertmanager listens on a free 127.0.0.1 port with `--cluster.listen-address=` (no HA
gossip on 0.0.0.0:9094, and no wait for the cluster to settle) and
`--web.external-url=http://127.0.0.1:PORT`.  Routing defaults are fast:
group_wait 1s, group_interval 2s, repeat_interval 1h, so the first notification arrives
about 1 s after the alerts are posted.  The config, data and log live in a temp dir that
`stop()` removes after killing the process (by PID).

Self-check (starts Alertmanager and a local receiver, posts one alert, prints the body):

    python -m tests.support.alertmanager --selftest
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests

__all__ = [
    "Alertmanager",
    "AlertmanagerError",
    "WebhookSink",
    "find_binary",
    "free_port",
    "make_alert",
    "require_binary",
    "rfc3339",
]


class AlertmanagerError(RuntimeError):
    pass


def find_binary() -> str | None:
    """$ALERTMANAGER_BIN, else `prometheus-alertmanager`, else `alertmanager` on PATH."""
    env = os.environ.get("ALERTMANAGER_BIN")
    if env:
        return env
    for name in ("prometheus-alertmanager", "alertmanager"):
        path = shutil.which(name)
        if path:
            return path
    return None


def require_binary() -> str:
    """The binary's path; inside pytest, skips the test when there is none."""
    path = find_binary()
    if path is None:
        msg = "no Alertmanager binary (set ALERTMANAGER_BIN or install prometheus-alertmanager)"
        try:
            import pytest
        except ImportError:  # pragma: no cover
            raise AlertmanagerError(msg) from None
        pytest.skip(msg)
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rfc3339(dt: datetime) -> str:
    """UTC, millisecond precision, `Z` (what Prometheus sends)."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def make_alert(
    alertname: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    *,
    starts_at: datetime | str | None = None,
    ends_at: datetime | str | None = None,
    generator_url: str = "",
) -> dict[str, Any]:
    """One alert for POST /api/v2/alerts.

    starts_at defaults to now; ends_at defaults to now + 1 h (firing).  An ends_at in the
    past makes Alertmanager treat the alert as resolved.
    """
    now = datetime.now(UTC)
    starts_at = now if starts_at is None else starts_at
    ends_at = now + timedelta(hours=1) if ends_at is None else ends_at
    alert: dict[str, Any] = {
        "labels": {"alertname": alertname, **dict(labels or {})},
        "annotations": dict(annotations or {}),
        "startsAt": starts_at if isinstance(starts_at, str) else rfc3339(starts_at),
        "endsAt": ends_at if isinstance(ends_at, str) else rfc3339(ends_at),
    }
    if generator_url:
        alert["generatorURL"] = generator_url
    return alert


DEFAULT_PD_DETAILS = {
    k: f"{{{{ .CommonLabels.{k} }}}}"
    for k in ("alertname", "cluster", "namespace", "pod", "model_name", "node", "severity")
}


class Alertmanager:
    """A real Alertmanager process delivering to `webhook_url` (and optionally PagerDuty-style
    to `pagerduty_url`).  Use as a context manager, or call start()/stop()."""

    def __init__(
        self,
        webhook_url: str | None = None,
        bearer_token: str | None = None,
        *,
        pagerduty_url: str | None = None,
        routing_key: str = "0" * 32,
        pagerduty_details: Mapping[str, str] | None = None,
        pagerduty_defaults: bool = False,
        group_by: Sequence[str] = ("alertname", "cluster"),
        group_wait: str = "1s",
        group_interval: str = "2s",
        repeat_interval: str = "1h",
        send_resolved: bool = True,
        max_alerts: int = 0,
        webhook_timeout: str | None = None,
        binary: str | None = None,
        startup_timeout: float = 30.0,
        receiver_name: str = "rootline",
    ):
        if not webhook_url and not pagerduty_url:
            raise ValueError("need webhook_url or pagerduty_url")
        self.webhook_url = webhook_url
        self.bearer_token = bearer_token
        self.pagerduty_url = pagerduty_url
        self.routing_key = routing_key
        self.pagerduty_details = dict(DEFAULT_PD_DETAILS if pagerduty_details is None else pagerduty_details)
        # True: the PagerDuty config a team writes first (url and key only), so Alertmanager's
        # own defaults name the event and fill its details.
        self.pagerduty_defaults = pagerduty_defaults
        self.group_by = list(group_by)
        self.group_wait, self.group_interval = group_wait, group_interval
        self.repeat_interval = repeat_interval
        self.send_resolved, self.max_alerts = send_resolved, max_alerts
        self.webhook_timeout = webhook_timeout
        self.binary = binary
        self.startup_timeout = startup_timeout
        self.receiver_name = receiver_name
        self.port: int | None = None
        self.workdir: str | None = None
        self.proc: subprocess.Popen | None = None
        self._log = None
        self._http = requests.Session()

    # -- configuration ------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        receiver: dict[str, Any] = {"name": self.receiver_name}
        if self.webhook_url:
            wh: dict[str, Any] = {"url": self.webhook_url, "send_resolved": self.send_resolved}
            if self.max_alerts:
                wh["max_alerts"] = self.max_alerts
            if self.bearer_token:
                wh["http_config"] = {"authorization": {"type": "Bearer", "credentials": self.bearer_token}}
            receiver["webhook_configs"] = [wh]
        if self.pagerduty_url and self.pagerduty_defaults:
            receiver["pagerduty_configs"] = [
                {
                    "url": self.pagerduty_url,
                    "routing_key": self.routing_key,
                    "send_resolved": self.send_resolved,
                }
            ]
        elif self.pagerduty_url:
            receiver["pagerduty_configs"] = [
                {
                    "url": self.pagerduty_url,
                    "routing_key": self.routing_key,
                    "send_resolved": self.send_resolved,
                    "severity": "{{ if .CommonLabels.severity }}{{ .CommonLabels.severity }}"
                    "{{ else }}error{{ end }}",
                    "class": "{{ .CommonLabels.alertname }}",
                    "details": self.pagerduty_details,
                }
            ]
        return {
            "route": {
                "receiver": self.receiver_name,
                "group_by": self.group_by,
                "group_wait": self.group_wait,
                "group_interval": self.group_interval,
                "repeat_interval": self.repeat_interval,
            },
            "receivers": [receiver],
        }

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        if self.port is None:
            raise AlertmanagerError("not started")
        return "http://127.0.0.1:%d" % self.port

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> Alertmanager:
        if self.proc is not None:
            raise AlertmanagerError("already started")
        binary = self.binary or find_binary()
        if not binary:
            raise AlertmanagerError("no Alertmanager binary (ALERTMANAGER_BIN or PATH)")
        self.workdir = tempfile.mkdtemp(prefix="rl_am_")
        cfg = os.path.join(self.workdir, "alertmanager.yml")
        with open(cfg, "w", encoding="utf-8") as fh:
            json.dump(self.config(), fh, indent=2)  # JSON is valid YAML
        self._log = open(os.path.join(self.workdir, "alertmanager.log"), "wb")
        for attempt in range(3):  # a free port can be taken between probe and bind
            self.port = free_port()
            self.proc = subprocess.Popen(
                [
                    binary,
                    "--config.file=" + cfg,
                    "--storage.path=" + os.path.join(self.workdir, "data"),
                    "--web.listen-address=127.0.0.1:%d" % self.port,
                    "--web.external-url=http://127.0.0.1:%d" % self.port,
                    "--cluster.listen-address=",
                ],
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                self.wait_ready(self.startup_timeout)
                return self
            except AlertmanagerError as err:
                exited = self.proc.poll() is not None
                self._kill()
                if not exited or attempt == 2:
                    log = self.log_tail()
                    self.stop()
                    raise AlertmanagerError("Alertmanager did not become ready:\n" + log) from err
        return self  # pragma: no cover

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise AlertmanagerError(
                    "Alertmanager exited (rc=%s)" % (self.proc.returncode if self.proc else None)
                )
            try:
                if self._http.get(self.url + "/-/ready", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.05)
        raise AlertmanagerError(f"/-/ready not 200 after {timeout:.0f}s")

    def _kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)

    def stop(self) -> None:
        """Kill the process (SIGTERM, then SIGKILL) and remove the temp dir. Idempotent."""
        self._kill()
        if self._log is not None:
            self._log.close()
            self._log = None
        self._http.close()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def __enter__(self) -> Alertmanager:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def log_tail(self, n: int = 40) -> str:
        if not self.workdir:
            return ""
        try:
            with open(os.path.join(self.workdir, "alertmanager.log"), "rb") as fh:
                return b"\n".join(fh.read().splitlines()[-n:]).decode("utf-8", "replace")
        except OSError:
            return ""

    # -- API ------------------------------------------------------------------------------
    def post_alerts(self, alerts: Iterable[Mapping[str, Any]]) -> None:
        """POST /api/v2/alerts (a list of alerts as made by make_alert)."""
        r = self._http.post(self.url + "/api/v2/alerts", json=list(alerts), timeout=5)
        if r.status_code != 200:
            raise AlertmanagerError(f"POST /api/v2/alerts: {r.status_code} {r.text}")

    def alerts(self, **params: Any) -> list[dict[str, Any]]:
        """GET /api/v2/alerts (params e.g. filter='alertname="X"', active=True)."""
        r = self._http.get(self.url + "/api/v2/alerts", params=params, timeout=5)
        r.raise_for_status()
        return r.json()

    def metric(self, name: str, **labels: str) -> float:
        """Sum of one metric from /metrics, e.g. metric('alertmanager_notifications_total',
        integration='webhook')."""
        total = 0.0
        for line in self._http.get(self.url + "/metrics", timeout=5).text.splitlines():
            if not line.startswith(name) or line.startswith("#"):
                continue
            head, _, value = line.rpartition(" ")
            if head.split("{", 1)[0] != name:
                continue
            if all(f'{k}="{v}"' in head for k, v in labels.items()):
                total += float(value)
        return total


class WebhookSink:
    """A stdlib receiver on a free 127.0.0.1 port that keeps every POST
    (path, headers, raw body); answers `status` (200) to webhooks and 202 to /v2/enqueue."""

    def __init__(self, status: int = 200):
        self.status = status
        self.received: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                with sink._cond:
                    sink.received.append(
                        {
                            "path": self.path,
                            "headers": dict(self.headers.items()),
                            "body": raw,
                            "at": time.time(),
                        }
                    )
                    sink._cond.notify_all()
                code = 202 if self.path.startswith("/v2/enqueue") else sink.status
                out = b'{"status":"success","message":"Event processed"}' if code == 202 else b"ok"
                self.send_response(code)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *a):
                pass

        self._srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._srv.daemon_threads = True
        self.port = self._srv.server_address[1]
        self._thread = threading.Thread(target=self._srv.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return "http://127.0.0.1:%d" % self.port

    def __enter__(self) -> WebhookSink:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._srv.shutdown()
        self._srv.server_close()

    def wait(self, count: int = 1, timeout: float = 15.0) -> list[dict[str, Any]]:
        """Block until at least `count` POSTs have arrived; returns them all."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.received) >= count, timeout):
                raise TimeoutError("%d of %d POSTs after %.0fs" % (len(self.received), count, timeout))
            return list(self.received)


def _selftest() -> int:
    token = "selftest-token"
    with (
        WebhookSink() as sink,
        Alertmanager(sink.url + "/hooks/am", token, pagerduty_url=sink.url + "/v2/enqueue") as am,
    ):
        print(
            f"alertmanager pid {am.pid} at {am.url} (binary {am.binary or find_binary()}), sink at {sink.url}"
        )
        t0 = time.monotonic()
        am.post_alerts(
            [
                make_alert(
                    "LLMContainerOOMKilled",
                    {
                        "cluster": "selftest",
                        "namespace": "llm-serving",
                        "pod": "vllm-0",
                        "model_name": "meta-llama/Llama-3.1-8B-Instruct",
                        "node": "gpu-node-1",
                        "severity": "critical",
                    },
                    {"summary": "vLLM container OOM-killed on vllm-0"},
                )
            ]
        )
        got = sink.wait(2, timeout=15)
        print("received %d POSTs %.2fs after posting" % (len(got), time.monotonic() - t0))
        ok = True
        for item in got:
            print("--- POST {}".format(item["path"]))
            print(json.dumps(item["headers"], indent=2))
            print(item["body"].decode("utf-8"))
        hook = [g for g in got if g["path"] == "/hooks/am"]
        pd = [g for g in got if g["path"] == "/v2/enqueue"]
        ok &= bool(hook) and hook[0]["headers"].get("Authorization") == "Bearer " + token
        ok &= bool(hook) and json.loads(hook[0]["body"])["version"] == "4"
        ok &= bool(pd) and json.loads(pd[0]["body"])["event_action"] == "trigger"
        pid = am.pid
        workdir = am.workdir
    gone = not os.path.exists(workdir or "/nonexistent")
    try:
        os.kill(pid, 0)
        alive = True
    except (OSError, TypeError):
        alive = False
    print(f"stopped: process {pid} gone={not alive}, temp dir removed={gone}")
    ok &= gone and not alive
    print("SELFTEST", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    import argparse
    import sys

    ap = argparse.ArgumentParser(description="Alertmanager test helper")
    ap.add_argument(
        "--selftest",
        action="store_true",
        help="start Alertmanager, deliver one alert to a local receiver, print it",
    )
    args = ap.parse_args()
    if not args.selftest:
        ap.print_help()
        sys.exit(2)
    sys.exit(_selftest())
