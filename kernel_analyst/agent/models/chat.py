"""``"provider:model"`` -> a LangChain chat model, through LangChain's ``init_chat_model``.

Provider packages are extras: ``pip install "kernel-analyst[openai]"`` (or ``[anthropic]``,
``[ollama]``) installs LangChain and the provider's integration. Any OpenAI-compatible server
(vLLM, llama.cpp, Ollama, LM Studio) works through ``openai:MODEL`` with a base URL, given
as ``base_url=`` or in ``OPENAI_BASE_URL``; such servers usually need no key.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel

from ..exceptions import MissingAPIKeyError, ModelConfigError, ProviderNotInstalledError

log = logging.getLogger(__name__)

API_KEY_VARIABLES: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistralai": "MISTRAL_API_KEY",
    "google_genai": "GOOGLE_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "xai": "XAI_API_KEY",
    "fireworks": "FIREWORKS_API_KEY",
    "together": "TOGETHER_API_KEY",
}
"""Providers whose key is checked before the model is built, and the variable to set."""

LLAMACPP = "llamacpp"
"""The provider name of a GGUF file run in this process (``llamacpp:PATH.gguf``)."""

EXTRAS: dict[str, str] = {"openai": "openai", "anthropic": "anthropic", "ollama": "ollama",
                          LLAMACPP: LLAMACPP}
"""Providers with an extra of this package that installs everything they need."""

LOCAL_SERVER_KEY = "not-needed"
"""Key sent to an OpenAI-compatible server when none is set (local servers ignore it)."""


@dataclass(frozen=True)
class ModelEnvironment:
    """The environment variables model resolution reads (read in one place)."""

    openai_base_url: str | None = None
    """``OPENAI_BASE_URL``: an OpenAI-compatible server for the ``openai`` provider."""
    api_keys: Mapping[str, str] = field(default_factory=dict)
    """Provider -> API key, for the providers in :data:`API_KEY_VARIABLES` that have one set."""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> ModelEnvironment:
        """Read the variables from ``environ`` (``os.environ`` by default)."""
        env = os.environ if environ is None else environ
        keys = {p: env[v] for p, v in API_KEY_VARIABLES.items() if env.get(v)}
        return cls(openai_base_url=env.get("OPENAI_BASE_URL") or None, api_keys=keys)


@dataclass(frozen=True)
class ModelSpec:
    """A parsed ``"provider:model"`` string."""

    provider: str | None
    """LangChain provider name (``openai``, ``anthropic``, ``ollama`` ...), or None to infer."""
    model: str
    """The model name as the provider knows it (may contain ``:``, e.g. ``qwen2.5-coder:7b``)."""

    @classmethod
    def parse(cls, spec: str) -> ModelSpec:
        """Split at the first ``:``; a bare name leaves the provider to LangChain's inference."""
        text = spec.strip()
        if not text:
            raise ModelConfigError('empty model name; give "provider:model", e.g. "openai:gpt-4o-mini"')
        provider, sep, model = text.partition(":")
        if not sep:
            return cls(None, text)
        if not provider or not model:
            raise ModelConfigError(
                f'model {spec!r} should look like "provider:model", e.g. "openai:gpt-4o-mini"')
        return cls(provider.strip().lower().replace("-", "_"), model.strip())

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}" if self.provider else self.model


def context_tokens(model: BaseChatModel) -> int | None:
    """The model's context window in tokens, as its LangChain profile says (None: it does not)."""
    profile = getattr(model, "profile", None)
    value = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    return int(value) if isinstance(value, int) and value > 0 else None


def install_hint(provider: str | None) -> str:
    """What to install for ``provider``."""
    if provider in EXTRAS:
        return f'pip install "kernel-analyst[{EXTRAS[provider]}]"'
    package = f"langchain-{provider.replace('_', '-')}" if provider else "the provider's langchain package"
    return f"pip install langchain {package}"


def load_chat_model(
    spec: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    environment: ModelEnvironment | None = None,
    **kwargs: Any,
) -> BaseChatModel:
    """Build the chat model named by ``spec`` (``"openai:gpt-4o-mini"``, ``"ollama:qwen2.5-coder"``,
    ``"llamacpp:PATH.gguf"`` for a GGUF file run in this process).

    ``base_url`` points the provider at another server (for ``openai``, default from
    ``OPENAI_BASE_URL``). Other keywords go to the model class (``temperature=0`` ...).
    Raises ProviderNotInstalledError or MissingAPIKeyError naming what to install or set.
    """
    parsed = ModelSpec.parse(spec)
    if parsed.provider == LLAMACPP:
        if base_url:
            raise ModelConfigError("llamacpp: models run in this process; --base-url is for servers")
        from .llamacpp import load_llamacpp

        return load_llamacpp(parsed.model, **kwargs)
    env = environment or ModelEnvironment.from_environ()
    init_chat_model = _init_chat_model(parsed)
    options = _options(parsed, env, base_url=base_url, api_key=api_key, extra=kwargs)
    try:
        model = init_chat_model(parsed.model, model_provider=parsed.provider, **options)
    except ImportError as exc:
        raise ProviderNotInstalledError(
            f"model {str(parsed)!r} needs the {parsed.provider or 'provider'} integration: "
            f"{install_hint(parsed.provider)} ({exc})") from exc
    except Exception as exc:
        raise _construction_error(parsed, exc) from exc
    if not isinstance(model, BaseChatModel):
        raise ModelConfigError(f"{str(parsed)!r} did not give a chat model (got {type(model).__name__})")
    return model


def _init_chat_model(parsed: ModelSpec) -> Any:
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:
        raise ProviderNotInstalledError(
            f"resolving {str(parsed)!r} needs LangChain's init_chat_model: {install_hint(parsed.provider)}"
        ) from exc
    return init_chat_model


def _options(parsed: ModelSpec, env: ModelEnvironment, *, base_url: str | None, api_key: str | None,
             extra: dict[str, Any]) -> dict[str, Any]:
    options = dict(extra)
    if parsed.provider == "openai":
        base_url = base_url or env.openai_base_url
    if base_url:
        options["base_url"] = base_url
    key = api_key or (env.api_keys.get(parsed.provider) if parsed.provider else None)
    if key:
        options["api_key"] = key
    elif parsed.provider == "openai" and base_url:
        options["api_key"] = LOCAL_SERVER_KEY
        log.info("no OPENAI_API_KEY set; sending a placeholder key to %s", base_url)
    elif parsed.provider in API_KEY_VARIABLES:
        variable = API_KEY_VARIABLES[parsed.provider]
        hint = " (or give a base URL of an OpenAI-compatible server)" if parsed.provider == "openai" else ""
        raise MissingAPIKeyError(
            f"model {str(parsed)!r} needs an API key: set {variable} or pass api_key={hint}")
    return options


def _construction_error(parsed: ModelSpec, exc: Exception) -> ModelConfigError:
    text = str(exc)
    if "api_key" in text.lower() or "api key" in text.lower():
        variable = API_KEY_VARIABLES.get(parsed.provider or "", "the provider's API key variable")
        return MissingAPIKeyError(f"model {str(parsed)!r} needs an API key: set {variable} ({text})")
    return ModelConfigError(f"could not create model {str(parsed)!r}: {type(exc).__name__}: {text}")


__all__ = ["API_KEY_VARIABLES", "EXTRAS", "LLAMACPP", "LOCAL_SERVER_KEY", "ModelEnvironment", "ModelSpec",
           "context_tokens", "install_hint", "load_chat_model"]
