"""Chat models: ``"provider:model"`` resolved through LangChain (:mod:`.chat`), and a GGUF
file run in this process (:mod:`.llamacpp`, ``llamacpp:PATH.gguf``).

Room of ``agent/``: may import the agent's value modules (exceptions) and nothing else of it.
"""

from .chat import (
    API_KEY_VARIABLES,
    EXTRAS,
    LLAMACPP,
    LOCAL_SERVER_KEY,
    ModelEnvironment,
    ModelSpec,
    context_tokens,
    install_hint,
    load_chat_model,
)

__all__ = ["API_KEY_VARIABLES", "EXTRAS", "LLAMACPP", "LOCAL_SERVER_KEY", "ModelEnvironment", "ModelSpec",
           "context_tokens", "install_hint", "load_chat_model"]
