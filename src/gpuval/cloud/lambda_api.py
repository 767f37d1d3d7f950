"""A client for the part of Lambda's public Cloud API that gpuval uses.

Source: the Lambda Cloud API reference, https://docs-api.lambda.ai/api/cloud (OpenAPI document
"Lambda Cloud API" 1.8.3; guide: https://docs.lambda.ai/public-cloud/cloud-api/). What it says
and this client relies on:

- base URL https://cloud.lambda.ai/api/v1; the key goes in `Authorization: Bearer <key>`;
- success bodies are `{"data": ...}`, failures `{"error": {"code", "message", "suggestion"?}}`,
  and only `code` is stable ("avoid relying on the values of message or suggestion");
- GET /instance-types: `{name: {"instance_type": {..., "price_cents_per_hour", "specs":
  {"gpus", ...}}, "regions_with_capacity_available": [{"name", "description"}]}}`;
- GET /instances, GET /instances/{id}: instances with `status` (booting, active, unhealthy,
  terminating, terminated, preempted), `ip` (public) and `private_ip`;
- POST /instance-operations/launch `{region_name, instance_type_name, ssh_key_names: [one],
  name}` -> `{"instance_ids": [...]}`; 400 `instance-operations/launch/insufficient-capacity`,
  `global/quota-exceeded`, `global/invalid-parameters`; 404 `global/object-does-not-exist`
  (a resource the request names was not found);
- POST /instance-operations/terminate `{instance_ids}` -> `{"terminated_instances": [...]}`;
- GET /ssh-keys; 401 `global/invalid-api-key`, 403 `global/account-inactive` everywhere;
- "Requests to the API are generally limited to one request per second. Requests to the
  /instance-operations/launch endpoint are limited to one request per 12 seconds". The shape of
  the refusal is not documented: it is taken to be HTTP 429 (a `Retry-After` header is honoured
  when present), retried with exponential backoff.

The key is never part of a message, a repr or an exception raised here: `checked_api_key` is
the one rule for what a key may look like, `scrub_key` takes it out of any text, and the key is
sent to the API's own origin only (a redirect elsewhere is refused, never followed with it).
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.client import HTTPMessage
from typing import IO, Any
from urllib.parse import urlsplit

from gpuval.cloud.key_handover import KEY_SOCKET_ENV, KeyHandoverError, receive_key

DEFAULT_API_URL = "https://cloud.lambda.ai/api/v1"
API_KEY_ENV = "LAMBDA_API_KEY"
# Points gpuval at another endpoint (the tests' local server); the documented one otherwise.
API_URL_ENV = "GPUVAL_LAMBDA_API_URL"

HTTP_RATE_LIMITED = 429
CODE_INVALID_KEY = "global/invalid-api-key"
CODE_NOT_FOUND = "global/object-does-not-exist"
CODE_NO_CAPACITY = "instance-operations/launch/insufficient-capacity"
CODE_QUOTA = "global/quota-exceeded"
CODE_RATE_LIMITED = "gpuval/rate-limited"
CODE_UNREACHABLE = "gpuval/unreachable"
CODE_BAD_RESPONSE = "gpuval/unexpected-response"
CODE_REDIRECTED = "gpuval/redirected-elsewhere"
# Statuses of an instance that is (or will be) billed: not yet gone.
LIVE_STATUSES = frozenset({"booting", "active", "unhealthy", "terminating"})
MASK = "********"


class LambdaApiError(Exception):
    """A refused or failed API call: the API's error code, its message and what to do."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status: int | None = None,
        suggestion: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        self.message = message
        self.code = code
        self.status = status
        self.suggestion = suggestion
        self.retry_after_s = retry_after_s
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"HTTP {self.status}, " if self.status is not None else ""
        hint = f"; {self.suggestion}" if self.suggestion else ""
        return f"Lambda Cloud API: {self.message} ({where}{self.code}){hint}"

    @property
    def transient(self) -> bool:
        """Worth retrying an idempotent call: unreachable, a server error, a provider hiccup."""
        return (
            self.code == CODE_UNREACHABLE
            or self.code.startswith("provider/")
            or (self.status is not None and self.status >= 500)
        )


@dataclass(frozen=True)
class InstanceType:
    name: str
    description: str
    gpu_description: str
    price_cents_per_hour: int
    gpus: int


# Lambda's instance type names start with the GPU count: gpu_8x_h100_sxm5, gpu_1x_a10 (the API
# reference's examples and its GET /instance-types answer).
_TYPE_NAME_GPUS = re.compile(r"gpu_([0-9]+)x_.*")


def gpus_of_type_name(name: str) -> int:
    """GPUs per instance as the type's name says (gpu_8x_h100_sxm5: 8), before the API is asked
    (the type's own `specs.gpus` is `InstanceType.gpus`); 0 for a name of another form."""
    match = _TYPE_NAME_GPUS.fullmatch(name)
    return int(match.group(1)) if match else 0


@dataclass(frozen=True)
class Offer:
    """An instance type as offered now: its price and the regions with capacity for it."""

    instance_type: InstanceType
    regions_with_capacity: tuple[str, ...]


@dataclass(frozen=True)
class Instance:
    id: str
    name: str
    status: str
    ip: str | None
    private_ip: str | None
    region: str | None
    instance_type: InstanceType | None

    @property
    def live(self) -> bool:
        return self.status in LIVE_STATUSES


def _bad_response(what: str) -> LambdaApiError:
    return LambdaApiError(f"unexpected response: {what}", code=CODE_BAD_RESPONSE)


def _mapping(value: object, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad_response(f"{what} is not an object")
    return value


def _text(document: Mapping[str, Any], key: str) -> str | None:
    value = document.get(key)
    return value if isinstance(value, str) and value else None


def _instance_type(document: object) -> InstanceType:
    fields = _mapping(document, "instance_type")
    specs = fields.get("specs")
    gpus = specs.get("gpus") if isinstance(specs, Mapping) else None
    price = fields.get("price_cents_per_hour")
    name = _text(fields, "name")
    # Older API versions printed the price as a string ("80"): accepted when it is a whole number.
    if isinstance(price, str) and price.isdigit():
        price = int(price)
    if name is None or not isinstance(price, int) or isinstance(price, bool):
        raise _bad_response("an instance type without a name or a price in cents")
    return InstanceType(
        name=name,
        description=_text(fields, "description") or name,
        gpu_description=_text(fields, "gpu_description") or "",
        price_cents_per_hour=price,
        gpus=gpus if isinstance(gpus, int) and not isinstance(gpus, bool) else 0,
    )


def _region_name(document: object) -> str | None:
    return _text(document, "name") if isinstance(document, Mapping) else None


def parse_instance(document: object) -> Instance:
    fields = _mapping(document, "instance")
    identifier, status = _text(fields, "id"), _text(fields, "status")
    if identifier is None or status is None:
        raise _bad_response("an instance without an id or a status")
    kind = fields.get("instance_type")
    return Instance(
        id=identifier,
        name=_text(fields, "name") or "",
        status=status,
        ip=_text(fields, "ip"),
        private_ip=_text(fields, "private_ip"),
        region=_region_name(fields.get("region")),
        instance_type=_instance_type(kind) if kind is not None else None,
    )


def parse_offers(document: object) -> dict[str, Offer]:
    offers = {}
    for name, entry in _mapping(document, "instance types").items():
        fields = _mapping(entry, f"instance type {name}")
        regions = fields.get("regions_with_capacity_available") or []
        if not isinstance(regions, list):
            raise _bad_response(f"regions of {name} are not a list")
        available = tuple(r for r in map(_region_name, regions) if r)
        offers[str(name)] = Offer(_instance_type(fields.get("instance_type")), available)
    return offers


# A Bearer token is printable ASCII without spaces (RFC 6750 section 2.1 allows a subset).
KEY_CHARACTERS = frozenset(chr(code) for code in range(0x21, 0x7F))


def checked_api_key(raw: str) -> str:
    """The key as sent: surrounding whitespace dropped (`echo KEY | ansible-vault
    encrypt_string` stores a newline), anything else that is not printable ASCII refused, with
    a message that says where and what, never the key."""
    key = raw.strip()
    if not key:
        raise LambdaApiError(
            f"no API key: set {API_KEY_ENV}, or give it from Ansible Vault (api_key of the "
            "inventory plugin, lambda_cloud_api_key of role lambda_cloud)",
            code=CODE_INVALID_KEY,
            suggestion="create one at https://cloud.lambda.ai/api-keys",
        )
    for position, character in enumerate(key, start=1):
        if character not in KEY_CHARACTERS:
            kind = (
                "whitespace" if character.isspace()
                else "a control character" if character.isascii()
                else "a non-ASCII character"
            )  # fmt: skip
            raise LambdaApiError(
                f"the API key has {kind} (U+{ord(character):04X}) at position {position} "
                "(the key is not shown)",
                code=CODE_INVALID_KEY,
                suggestion="copy the key again from https://cloud.lambda.ai/api-keys",
            )
    return key


def scrub_key(text: str, key: str) -> str:
    """`text` with the key masked, also where a repr or an escape spelled it."""
    spellings = {key, repr(key)[1:-1], key.encode("unicode_escape").decode("ascii")}
    for spelling in sorted(spellings, key=len, reverse=True):
        text = text.replace(spelling, MASK)
    return text


def api_key_from_environment(environment: Mapping[str, str] = os.environ) -> str:
    """$LAMBDA_API_KEY, else the key `gpuval run` hands its Ansible over a socket (never in
    the environment that ansible-runner records)."""
    key = environment.get(API_KEY_ENV, "")
    socket_path = environment.get(KEY_SOCKET_ENV, "")
    if not key.strip() and socket_path:
        try:
            key = receive_key(socket_path)
        except KeyHandoverError as problem:
            raise LambdaApiError(str(problem), code=CODE_INVALID_KEY) from None
    return checked_api_key(key)


def api_url_from_environment(environment: Mapping[str, str] = os.environ) -> str:
    return environment.get(API_URL_ENV, "").strip() or DEFAULT_API_URL


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def _origin_text(url: str) -> str:
    scheme, host, port = _origin(url)
    return f"{scheme}://{host}" + (f":{port}" if port else "")


class _RedirectsWithinTheApi(urllib.request.HTTPRedirectHandler):
    """Follows a redirect within the API's own origin (scheme, host, port), with the key; one to
    anywhere else is refused: the key goes to no other host."""

    def redirect_request(
        self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
        headers: HTTPMessage, newurl: str,
    ) -> urllib.request.Request | None:  # fmt: skip
        if _origin(newurl) == _origin(req.full_url):
            return super().redirect_request(req, fp, code, msg, headers, newurl)
        fp.close()
        raise LambdaApiError(
            f"{req.get_method()} {urlsplit(req.full_url).path} was redirected to another host "
            f"({_origin_text(newurl)}); the key is sent to {_origin_text(req.full_url)} only",
            code=CODE_REDIRECTED,
            status=code,
            suggestion=f"if that is the API now, set {API_URL_ENV} to its address",
        )


class LambdaCloud:
    """Calls to the API, retried with exponential backoff when rate-limited (any call) or on a
    transient failure (calls that are safe to repeat: everything but launch)."""

    def __init__(
        self,
        api_key: str,
        base_url: str = DEFAULT_API_URL,
        *,
        timeout_s: float = 30.0,
        attempts: int = 6,
        backoff_s: float = 2.0,
        max_backoff_s: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._api_key = checked_api_key(api_key)
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.attempts = max(1, attempts)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._sleep = sleep
        self._opener = urllib.request.build_opener(_RedirectsWithinTheApi)

    def __repr__(self) -> str:
        return f"LambdaCloud({self.base_url!r})"

    def _scrub(self, text: str) -> str:
        return scrub_key(text, self._api_key)

    def _send(self, method: str, path: str, body: object | None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self._api_key}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as refused:
            raise self._error_of(refused) from None
        except LambdaApiError:
            raise  # a redirect elsewhere, refused: its text names addresses only
        except (urllib.error.URLError, OSError) as problem:
            reason = getattr(problem, "reason", problem)
            raise LambdaApiError(
                self._scrub(f"cannot reach {self.base_url}: {reason}"), code=CODE_UNREACHABLE
            ) from None
        except Exception as problem:  # whatever urllib and http.client say may quote the key
            raise LambdaApiError(
                self._scrub(f"cannot call {self.base_url}: {type(problem).__name__}: {problem}"),
                code=CODE_UNREACHABLE,
            ) from None
        try:
            document = json.loads(raw)
        except ValueError:
            raise _bad_response(f"{method} {path} did not answer JSON") from None
        return _mapping(document, "response").get("data")

    def _error_of(self, refused: urllib.error.HTTPError) -> LambdaApiError:
        try:
            document = json.loads(refused.read() or b"{}")
        except ValueError:
            document = {}
        error = document.get("error") if isinstance(document, dict) else None
        error = error if isinstance(error, dict) else {}
        retry_after = refused.headers.get("Retry-After", "") if refused.headers else ""
        return LambdaApiError(
            self._scrub(str(error.get("message") or refused.reason or "request refused")),
            code=str(error.get("code") or f"http/{refused.code}"),
            status=refused.code,
            suggestion=self._scrub(str(error["suggestion"])) if error.get("suggestion") else None,
            retry_after_s=float(retry_after) if retry_after.isdigit() else None,
        )

    def _call(self, method: str, path: str, body: object | None = None, *, repeatable: bool) -> Any:
        waited = 0.0
        for attempt in range(1, self.attempts + 1):
            try:
                return self._send(method, path, body)
            except LambdaApiError as problem:
                limited = problem.status == HTTP_RATE_LIMITED
                if not (limited or (repeatable and problem.transient)):
                    raise
                if attempt == self.attempts:
                    if limited:
                        raise LambdaApiError(
                            f"rate limited: {method} {path} still refused after {attempt} "
                            f"tries over {waited:.0f} s",
                            code=CODE_RATE_LIMITED,
                            status=problem.status,
                            suggestion="the API allows about one request per second and one "
                            "launch per 12 seconds; wait a minute and run again",
                        ) from None
                    raise
                delay = problem.retry_after_s or min(
                    self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s
                )
                self._sleep(delay)
                waited += delay
        raise AssertionError("unreachable: the loop returns or raises")

    def instance_types(self) -> dict[str, Offer]:
        return parse_offers(self._call("GET", "/instance-types", repeatable=True))

    def instances(self) -> list[Instance]:
        listed = self._call("GET", "/instances", repeatable=True)
        if not isinstance(listed, list):
            raise _bad_response("the instance list is not a list")
        return [parse_instance(entry) for entry in listed]

    def instance(self, instance_id: str) -> Instance:
        return parse_instance(self._call("GET", f"/instances/{instance_id}", repeatable=True))

    def ssh_key_names(self) -> list[str]:
        keys = self._call("GET", "/ssh-keys", repeatable=True)
        if not isinstance(keys, list):
            raise _bad_response("the SSH key list is not a list")
        return [name for key in keys if (name := _text(_mapping(key, "SSH key"), "name"))]

    def launch(self, *, region: str, instance_type: str, ssh_key_name: str, name: str) -> list[str]:
        """One instance (the API launches one per request); its id. Never retried on a server
        error, which may have launched it: the caller looks for it by name."""
        body = {
            "region_name": region,
            "instance_type_name": instance_type,
            "ssh_key_names": [ssh_key_name],
            "name": name,
        }
        launched = _mapping(
            self._call("POST", "/instance-operations/launch", body, repeatable=False), "launch"
        ).get("instance_ids")
        if not isinstance(launched, list) or not all(isinstance(i, str) for i in launched):
            raise _bad_response("launch did not return instance ids")
        return list(launched)

    def terminate(self, instance_ids: Sequence[str]) -> list[Instance]:
        body = {"instance_ids": list(instance_ids)}
        answer = _mapping(
            self._call("POST", "/instance-operations/terminate", body, repeatable=True),
            "terminate",
        )
        terminated = answer.get("terminated_instances") or []
        if not isinstance(terminated, list):
            raise _bad_response("terminated_instances is not a list")
        return [parse_instance(entry) for entry in terminated]
