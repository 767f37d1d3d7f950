"""A local stand-in for Lambda's Cloud API, for tests: 127.0.0.1 only, never the real service.

It implements the documented subset gpuval uses (https://docs-api.lambda.ai/api/cloud, OpenAPI
document 1.8.3): GET /instance-types, /instances, /instances/{id}, /ssh-keys and POST
/instance-operations/launch and /terminate, with the documented success (`{"data": ...}`) and
error (`{"error": {"code", "message", "suggestion"}}`) bodies and codes. The instances it
"launches" are machines the test hands it (simulated hosts: their address becomes the
instance's `ip` and `private_ip`), so what gpuval provisions can be benchmarked for real.

Knobs for the failure modes: per-region capacity (400 insufficient-capacity once used up), a
launch interval (429 on a launch closer to the previous one than that, as the API's one launch
per 12 seconds), `refuse_next` (the next n requests answered 429), `stuck_booting` (instances
never leave "booting"), and a key: any other key is answered 401 global/invalid-api-key. The
body of a 429 is not documented: the one sent here is illustrative, and gpuval keys on the
status alone.
"""

from __future__ import annotations

import base64
import json
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REGION_DESCRIPTIONS = {
    "us-east-1": "Virginia, USA",
    "us-west-1": "California, USA",
    "us-south-1": "Texas, USA",
}


@dataclass
class FakeType:
    name: str
    gpu_description: str
    gpus: int
    price_cents_per_hour: int
    # Instances each region can still launch.
    capacity: dict[str, int] = field(default_factory=dict)

    @property
    def description(self) -> str:
        return f"{self.gpus}x {self.gpu_description}"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "gpu_description": self.gpu_description,
            "price_cents_per_hour": self.price_cents_per_hour,
            "specs": {
                "vcpus": 26 * self.gpus,
                "memory_gib": 225 * self.gpus,
                "storage_gib": 2750 * self.gpus,
                "gpus": self.gpus,
            },
        }


@dataclass(frozen=True)
class Machine:
    """What an instance runs on: a simulated host's address (public and private alike)."""

    ip: str
    private_ip: str


@dataclass
class FakeInstance:
    id: str
    name: str
    kind: FakeType
    region: str
    ssh_key: str
    machine: Machine
    launched_at: float
    active_at: float
    terminated_at: float | None = None

    def status(self, now: float, stuck_booting: bool) -> str:
        if self.terminated_at is not None:
            return "terminated"
        return "booting" if stuck_booting or now < self.active_at else "active"

    def billed_usd(self, now: float) -> float:
        """Per started minute from launch to termination (docs.lambda.ai/public-cloud/billing)."""
        minutes = math.ceil(((self.terminated_at or now) - self.launched_at) / 60)
        return self.kind.price_cents_per_hour * minutes / 60 / 100


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, suggestion: str | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.suggestion = status, code, message, suggestion

    def body(self) -> dict[str, Any]:
        error = {"code": self.code, "message": self.message}
        if self.suggestion:
            error["suggestion"] = self.suggestion
        return {"error": error}


class FakeLambdaCloud:
    """The server and the account behind it; a context manager (started on entry)."""

    def __init__(
        self,
        api_key: str,
        types: Sequence[FakeType],
        ssh_keys: Sequence[str],
        machines: Sequence[Machine],
        *,
        boot_s: float = 0.5,
        launch_interval_s: float = 0.0,
        on_terminate: Callable[[FakeInstance], None] | None = None,
    ) -> None:
        self.api_key = api_key
        self.types = {t.name: t for t in types}
        self.ssh_keys = list(ssh_keys)
        self.free_machines = list(machines)
        self.boot_s = boot_s
        self.launch_interval_s = launch_interval_s
        self.on_terminate = on_terminate
        self.stuck_booting = False
        self.refuse_next = 0
        self.instances: dict[str, FakeInstance] = {}
        # (method, path, status) of every request, in order.
        self.requests: list[tuple[str, str, int]] = []
        self._last_launch = -math.inf
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/api/v1"

    def __enter__(self) -> FakeLambdaCloud:
        handler = type("Handler", (_Handler,), {"cloud": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def live(self) -> list[FakeInstance]:
        return [i for i in self.instances.values() if i.terminated_at is None]

    def bill_usd(self) -> float:
        now = time.time()
        return round(sum(i.billed_usd(now) for i in self.instances.values()), 2)

    # --- the API -----------------------------------------------------------------------------

    def _authorised(self, header: str) -> bool:
        basic = base64.b64encode(f"{self.api_key}:".encode()).decode()
        return header in (f"Bearer {self.api_key}", f"Basic {basic}")

    def _instance_json(self, instance: FakeInstance, now: float) -> dict[str, Any]:
        status = instance.status(now, self.stuck_booting)
        document: dict[str, Any] = {
            "id": instance.id,
            "name": instance.name,
            "status": status,
            "ssh_key_names": [instance.ssh_key],
            "file_system_names": [],
            "region": {
                "name": instance.region,
                "description": REGION_DESCRIPTIONS.get(instance.region, instance.region),
            },
            "instance_type": instance.kind.to_json(),
            "actions": {},
        }
        if status != "booting":  # addresses come with the running machine
            document |= {
                "ip": instance.machine.ip,
                "private_ip": instance.machine.private_ip,
                "hostname": instance.machine.ip.replace(".", "-"),
            }
        return document

    def handle(self, method: str, path: str, authorization: str, body: Any) -> Any:
        with self._lock:
            if self.refuse_next > 0:
                self.refuse_next -= 1
                raise ApiError(429, "global/rate-limited", "Too many requests")
            if not self._authorised(authorization):
                raise ApiError(
                    401,
                    "global/invalid-api-key",
                    "API key was invalid, expired, or deleted.",
                    "Check your API key or create a new one, then try again.",
                )
            now = time.time()
            if (method, path) == ("GET", "/api/v1/instance-types"):
                return {
                    name: {
                        "instance_type": kind.to_json(),
                        "regions_with_capacity_available": [
                            {"name": r, "description": REGION_DESCRIPTIONS.get(r, r)}
                            for r, left in sorted(kind.capacity.items())
                            if left > 0
                        ],
                    }
                    for name, kind in self.types.items()
                }
            if (method, path) == ("GET", "/api/v1/instances"):
                return [self._instance_json(i, now) for i in self.live()]
            if method == "GET" and (found := re.fullmatch(r"/api/v1/instances/(\w+)", path)):
                if found.group(1) not in self.instances:
                    raise ApiError(
                        404, "global/object-does-not-exist", "Specified instance does not exist."
                    )
                return self._instance_json(self.instances[found.group(1)], now)
            if (method, path) == ("GET", "/api/v1/ssh-keys"):
                return [
                    {
                        "id": uuid.uuid5(uuid.NAMESPACE_OID, k).hex,
                        "name": k,
                        "public_key": "ssh-ed25519 AAAA... test",
                    }
                    for k in self.ssh_keys
                ]
            if (method, path) == ("POST", "/api/v1/instance-operations/launch"):
                return self._launch(body, now)
            if (method, path) == ("POST", "/api/v1/instance-operations/terminate"):
                return self._terminate(body, now)
            raise ApiError(404, "global/object-does-not-exist", f"No route {method} {path}")

    def _launch(self, body: Any, now: float) -> dict[str, Any]:
        if now - self._last_launch < self.launch_interval_s:
            raise ApiError(429, "global/rate-limited", "Too many launch requests")
        keys = body.get("ssh_key_names") if isinstance(body, Mapping) else None
        if (
            not isinstance(body, Mapping)
            or not isinstance(body.get("region_name"), str)
            or not isinstance(body.get("instance_type_name"), str)
            or not isinstance(keys, list)
            or len(keys) != 1
        ):
            raise ApiError(
                400,
                "global/invalid-parameters",
                "Invalid request data.",
                "Give region_name, instance_type_name and exactly one SSH key name.",
            )
        kind = self.types.get(body["instance_type_name"])
        if kind is None:
            raise ApiError(404, "global/object-does-not-exist", "Instance type not found.")
        if keys[0] not in self.ssh_keys:
            raise ApiError(404, "global/object-does-not-exist", f"SSH key {keys[0]!r} not found.")
        region = body["region_name"]
        if kind.capacity.get(region, 0) <= 0 or not self.free_machines:
            raise ApiError(
                400,
                "instance-operations/launch/insufficient-capacity",
                "Not enough capacity to fulfill launch request.",
                "Choose another instance type or region, or try again later.",
            )
        self._last_launch = now
        kind.capacity[region] -= 1
        instance = FakeInstance(
            id=uuid.uuid4().hex,
            name=str(body.get("name") or ""),
            kind=kind,
            region=region,
            ssh_key=keys[0],
            machine=self.free_machines.pop(0),
            launched_at=now,
            active_at=now + self.boot_s,
        )
        self.instances[instance.id] = instance
        return {"instance_ids": [instance.id]}

    def _terminate(self, body: Any, now: float) -> dict[str, Any]:
        ids = body.get("instance_ids") if isinstance(body, Mapping) else None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ApiError(400, "global/invalid-parameters", "Invalid request data.")
        targets = [self.instances.get(i) for i in ids]
        if any(t is None or t.terminated_at is not None for t in targets):
            raise ApiError(
                404, "global/object-does-not-exist", "Specified instance does not exist."
            )
        answer = []
        for target in targets:
            assert target is not None
            target.terminated_at = now
            answer.append(self._instance_json(target, now) | {"status": "terminating"})
            if self.on_terminate is not None:
                self.on_terminate(target)
        return {"terminated_instances": answer}


class _Handler(BaseHTTPRequestHandler):
    cloud: FakeLambdaCloud

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read .requests
        return

    def _answer(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
            authorization = self.headers.get("Authorization", "")
            payload = {"data": self.cloud.handle(method, self.path, authorization, body)}
            status = 200
        except ApiError as error:
            payload, status = error.body(), error.status
        except ValueError:
            payload, status = (
                ApiError(400, "global/invalid-parameters", "Body is not JSON").body(),
                400,
            )
        self.cloud.requests.append((method, self.path, status))
        encoded = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(encoded)))
        self.end_headers()
        self.wfile.write(encoded)

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")
