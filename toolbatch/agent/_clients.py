"""What the model clients share: their configuration, the optional SDKs, errors with a fix."""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Final

from toolbatch.errors import ConfigError, ModelError

__all__ = [
    "REQUEST_TIMEOUT_S",
    "RETRIES",
    "SDK_REQUEST_TIMEOUT_S",
    "http_error",
    "import_sdk",
    "model_name",
    "unreachable",
]

REQUEST_TIMEOUT_S: Final = 120.0
SDK_REQUEST_TIMEOUT_S: Final = 600.0
"""The SDKs' own default: a long reply without streaming can take minutes."""
RETRIES: Final = 2
"""Retries of a request that failed with 408, 409, 429, 5xx or a connection error."""

_DETAIL_CHARS: Final = 500


def import_sdk(package: str, client: str) -> ModuleType:
    """The official SDK ``package``, or a ConfigError naming the extra that installs it."""
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise ConfigError(
            f"{client} needs the {package} SDK, which is not installed: "
            f"pip install 'toolbatch[{package}]'"
        ) from exc


def model_name(explicit: str | None, variable: str, client: str) -> str:
    """The model name given, else ``$variable``; a ConfigError naming both when neither."""
    name = explicit or os.environ.get(variable, "")
    if not name:
        raise ConfigError(f"no model name: pass {client}(model=...) or set {variable}")
    return name


def _fix(status: int, *, key_variable: str, model_variable: str) -> str:
    if status == 401:
        return f"check the API key ({key_variable})"
    if status == 403:
        return f"the key ({key_variable}) may not use this model or endpoint"
    if status == 404:
        return f"check the model name ({model_variable}) and the base URL"
    if status == 413:
        return "the request is too large: start a new session or lower the tool-output budget"
    if status in (408, 409, 429) or status >= 500:
        return f"the API is busy or failing (retried {RETRIES} times); try again later"
    return "the API refused the request; its message says why"


def http_error(
    where: str, status: int, detail: str, *, key_variable: str, model_variable: str
) -> ModelError:
    """A ModelError for an HTTP error answer, with the status and what to do."""
    fix = _fix(status, key_variable=key_variable, model_variable=model_variable)
    return ModelError(
        f"{where} answered HTTP {status}: {detail[:_DETAIL_CHARS]}; {fix}", status=status
    )


def unreachable(where: str, problem: str, *, url_variable: str) -> ModelError:
    """A ModelError for a request that never got an answer."""
    return ModelError(
        f"could not reach {where} ({problem}) after {RETRIES + 1} attempts; "
        f"check {url_variable} and the network"
    )
