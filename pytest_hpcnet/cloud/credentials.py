"""Whether the Alibaba Cloud credential chain can find credentials, and scrubbing secrets.

Checked without the SDK and, off ECS, without any network call: environment variables,
credentials files, the CLI profile, then (on ECS only) a short probe for a RAM role.
"""

from __future__ import annotations

import importlib.util
import os
import re
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_hpcnet.redact import redact, register_secret

if TYPE_CHECKING:
    from pytest_hpcnet.inventory.bench_settings import CloudSettings

ROLE_PROBE_TIMEOUT_S = 1.0
METADATA = "http://100.100.100.200"
ROLE_PATH = "/latest/meta-data/ram/security-credentials/"
DMI_FILES = ("/sys/class/dmi/id/sys_vendor", "/sys/class/dmi/id/product_name")
NO_CREDENTIALS = (
    "no Alibaba Cloud credentials: set ALIBABA_CLOUD_ACCESS_KEY_ID and "
    "ALIBABA_CLOUD_ACCESS_KEY_SECRET, write ~/.alibabacloud/credentials, or attach a RAM role "
    "to this ECS instance (control-plane audit skipped)"
)
_SECRET_FIELDS = re.compile(
    r"(?i)\b(signature|accesskeysecret|access_key_secret|securitytoken|security_token|"
    r"x-acs-security-token)(\"?\s*[=:]\s*\"?)([^\s&,;\"']+)"
)
_AUTHORIZATION = re.compile(r"(?i)\b(authorization\"?\s*[=:]\s*\"?)[^\"'\n]*")


def scrub(text: str) -> str:
    """`text` without registered secrets, signatures, tokens or Authorization values."""
    text = _AUTHORIZATION.sub(lambda m: f"{m.group(1)}***", redact(text))
    return _SECRET_FIELDS.sub(lambda m: f"{m.group(1)}{m.group(2)}***", text)


def _on_ecs(dmi_files: Iterable[str] = DMI_FILES) -> bool:
    for path in dmi_files:
        try:
            if "alibaba" in Path(path).read_text().lower():
                return True
        except OSError:
            continue
    return False


def ram_role_available(timeout_s: float = ROLE_PROBE_TIMEOUT_S) -> bool:
    """Whether this host is an ECS instance with a RAM role (DMI first: no call elsewhere).

    Asks the metadata service (token first, plain GET as fallback), each call bounded
    by `timeout_s`; off ECS it returns False without any network traffic.
    """
    if not _on_ecs():
        return False
    headers: dict[str, str] = {}
    try:
        token_request = urllib.request.Request(
            f"{METADATA}/latest/api/token",
            method="PUT",
            headers={"X-aliyun-ecs-metadata-token-ttl-seconds": "60"},
        )
        with urllib.request.urlopen(token_request, timeout=timeout_s) as answer:
            token = answer.read().decode().strip()
        if token:
            register_secret(token)
            headers["X-aliyun-ecs-metadata-token"] = token
    except OSError:
        pass
    try:
        request = urllib.request.Request(f"{METADATA}{ROLE_PATH}", headers=headers)
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            return answer.status == 200 and bool(answer.read().decode().strip())
    except OSError:
        return False


def credentials_available(
    environ: Mapping[str, str] | None = None,
    home: str | Path | None = None,
    role_probe: Callable[[], bool] = ram_role_available,
) -> str | None:
    """None when the default credential chain can find credentials, else one line saying
    what to provide. Environment and files are checked first; the ECS RAM role last,
    with a short bounded probe (none off ECS)."""
    env = os.environ if environ is None else environ

    def set_(name: str) -> bool:
        return bool(env.get(name, "").strip())

    if set_("ALIBABA_CLOUD_ACCESS_KEY_ID") and set_("ALIBABA_CLOUD_ACCESS_KEY_SECRET"):
        return None
    oidc = ("ALIBABA_CLOUD_OIDC_TOKEN_FILE", "ALIBABA_CLOUD_ROLE_ARN")
    if all(set_(name) for name in (*oidc, "ALIBABA_CLOUD_OIDC_PROVIDER_ARN")):
        return None
    base = Path(home) if home is not None else Path(env.get("HOME") or Path.home())
    files = [base / ".alibabacloud" / "credentials", base / ".alibabacloud" / "credentials.ini"]
    if set_("ALIBABA_CLOUD_CREDENTIALS_FILE"):
        files.insert(0, Path(env["ALIBABA_CLOUD_CREDENTIALS_FILE"]).expanduser())
    if env.get("ALIBABA_CLOUD_CLI_PROFILE_DISABLED", "").lower() != "true":
        files.append(base / ".aliyun" / "config.json")
    if any(path.is_file() for path in files) or set_("ALIBABA_CLOUD_CREDENTIALS_URI"):
        return None
    if env.get("ALIBABA_CLOUD_ECS_METADATA_DISABLED", "").lower() == "true":
        return NO_CREDENTIALS
    if set_("ALIBABA_CLOUD_ECS_METADATA") or role_probe():
        return None
    return NO_CREDENTIALS


def credentials_file_problem(path: str) -> str | None:
    """Why the inventory's `cloud.credentials_file` cannot be read, else None."""
    file = Path(path).expanduser()
    if not file.is_file() or not os.access(file, os.R_OK):
        return (
            f"cloud.credentials_file {path}: no readable file there (control-plane audit skipped)"
        )
    return None


def skip_reason(settings: CloudSettings) -> str | None:
    """Why the audit cannot run (disabled, SDK missing, no credentials), else None."""
    if not settings.enabled:
        return "control-plane audit off (cloud.enabled: false in the inventory)"
    for module in ("alibabacloud_ecs20140526", "alibabacloud_vpc20160428"):
        if importlib.util.find_spec(module) is None:
            return (
                "control-plane audit needs the cloud SDK: "
                f"pip install 'pytest-hpcnet[cloud]' ({module} missing)"
            )
    if settings.credentials_file:
        return credentials_file_problem(settings.credentials_file)
    return credentials_available()
