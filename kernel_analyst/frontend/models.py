"""The one model loader and analyst builder of the front ends (CLI, ``serve``, MCP).

LangChain is imported only when a model is asked for, so ``eda``, ``verify`` and a chat
without a model start without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .settings import ModelSettings

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from ..agent.analyst import Analyst
    from ..kernels import SessionManager


def load_model(settings: ModelSettings) -> BaseChatModel | None:
    """The chat model ``settings.spec`` names, or None without one. Raises the agent's
    ModelConfigError family (what to install or set) before anything starts."""
    if not settings.spec:
        return None
    from ..agent.models import load_chat_model

    return load_chat_model(settings.spec, base_url=settings.base_url, **settings.extra)


def build_analyst(model: BaseChatModel, manager: SessionManager, settings: ModelSettings,
                  **options: Any) -> Analyst:
    """An :class:`~kernel_analyst.agent.Analyst` on ``model`` with the front end's settings
    (step limit, images); ``options`` go to the Analyst as they are."""
    from ..agent.analyst import Analyst

    return Analyst(model, manager, max_steps=settings.max_steps, send_images=settings.images,
                   protocol=settings.protocol,  # type: ignore[arg-type]
                   profile_files=settings.preload, attempts=settings.attempts,
                   attempts_time_share=settings.attempts_time_share,
                   max_reply_tokens=settings.max_tokens, model_timeout=settings.model_timeout_s,
                   question_timeout=settings.question_timeout_s, **options)


def describe_model_failure(error: str, settings: ModelSettings) -> str:
    """An answer's model error as one line, with where the model was asked (no secrets)."""
    text = " ".join(error.split())
    where = f" at {settings.base_url}" if settings.base_url else ""
    if "connect" in text.lower() or "timed out" in text.lower() or "timeout" in text.lower():
        return f"the model {settings.spec}{where} could not be reached: {text}"
    return f"the model {settings.spec}{where} failed: {text}"


__all__ = ["build_analyst", "describe_model_failure", "load_model"]
