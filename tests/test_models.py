"""Model strings -> chat models; clear errors for what is missing (nothing is called)."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from langchain_openai import ChatOpenAI

from kernel_analyst.agent import (
    MissingAPIKeyError,
    ModelConfigError,
    ModelEnvironment,
    ModelSpec,
    ProviderNotInstalledError,
    load_chat_model,
)
from kernel_analyst.agent.models import LOCAL_SERVER_KEY

NO_ENV = ModelEnvironment()


def test_spec_parsing() -> None:
    assert ModelSpec.parse("openai:gpt-4o-mini") == ModelSpec("openai", "gpt-4o-mini")
    assert ModelSpec.parse("ollama:qwen2.5-coder:7b") == ModelSpec("ollama", "qwen2.5-coder:7b")
    assert ModelSpec.parse("Google-GenAI:gemini-2.0") == ModelSpec("google_genai", "gemini-2.0")
    assert ModelSpec.parse("gpt-4o") == ModelSpec(None, "gpt-4o")
    for bad in ("", "openai:", ":gpt-4o"):
        with pytest.raises(ModelConfigError, match="provider:model"):
            ModelSpec.parse(bad)


def test_environment_is_read_in_one_place() -> None:
    env = ModelEnvironment.from_environ({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "k",
                                         "ANTHROPIC_API_KEY": "", "UNRELATED": "x"})
    assert env.openai_base_url == "http://127.0.0.1:9/v1"
    assert dict(env.api_keys) == {"openai": "k"}


def test_openai_with_key() -> None:
    model = load_chat_model("openai:gpt-4o-mini", api_key="sk-test", environment=NO_ENV, temperature=0)
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "gpt-4o-mini" and model.temperature == 0
    assert model.openai_api_key is not None and model.openai_api_key.get_secret_value() == "sk-test"


def test_openai_compatible_server_needs_no_key() -> None:
    env = ModelEnvironment(openai_base_url="http://127.0.0.1:8000/v1")
    model = load_chat_model("openai:qwen2.5-coder", environment=env)
    assert isinstance(model, ChatOpenAI)
    assert model.openai_api_base == "http://127.0.0.1:8000/v1"
    assert model.openai_api_key is not None and model.openai_api_key.get_secret_value() == LOCAL_SERVER_KEY
    explicit = load_chat_model("openai:m", base_url="http://127.0.0.1:1234/v1", environment=env)
    assert isinstance(explicit, ChatOpenAI) and explicit.openai_api_base == "http://127.0.0.1:1234/v1"


def test_missing_key_names_the_variable() -> None:
    with pytest.raises(MissingAPIKeyError, match="set OPENAI_API_KEY"):
        load_chat_model("openai:gpt-4o-mini", environment=NO_ENV)


def test_missing_provider_package_says_what_to_install() -> None:
    if importlib.util.find_spec("langchain_anthropic") is not None:
        pytest.skip("langchain-anthropic is installed here")
    with pytest.raises(ProviderNotInstalledError, match=r'pip install "kernel-analyst\[anthropic\]"'):
        load_chat_model("anthropic:claude-sonnet-4-5", api_key="k", environment=NO_ENV)


def test_missing_langchain_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain.chat_models", None)  # import fails
    expected = r'init_chat_model: pip install "kernel-analyst\[openai\]"'
    with pytest.raises(ProviderNotInstalledError, match=expected):
        load_chat_model("openai:gpt-4o-mini", api_key="k", environment=NO_ENV)


def test_unknown_provider_is_a_config_error() -> None:
    with pytest.raises(ModelConfigError, match=r"no_such_provider"):
        load_chat_model("no-such-provider:m", environment=NO_ENV)
