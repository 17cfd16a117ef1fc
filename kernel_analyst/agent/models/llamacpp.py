"""A GGUF model run in this process by llama.cpp: ``--model llamacpp:PATH.gguf``.

No server, no API key: ``pip install "kernel-analyst[llamacpp]"`` builds llama-cpp-python
(llama.cpp's own Python binding; about 15 minutes of compiling on 2 cores, once) and the
model file is read from disk. The model writes its code as text (the agent's ``code``
protocol): it does not bind tools, so an ``auto`` analyst falls back to ``code`` by itself.

Why a small wrapper rather than langchain-community's ``ChatLlamaCpp``: that class needs
the whole of langchain-community (and its dependencies) for one call,
``Llama.create_chat_completion``, which already applies the chat template stored in the
GGUF; this module is that call, typed, with LangChain's message conversion.

Generation is blocking C code: the async path runs it in a worker thread, one call at a
time per model (llama.cpp's context is not shared between threads).
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field, PrivateAttr

from ..exceptions import ModelConfigError, ProviderNotInstalledError

INSTALL_HINT = 'pip install "kernel-analyst[llamacpp]"'
"""What to install for ``llamacpp:`` models."""


class LlamaCppChatModel(BaseChatModel):
    """A chat model over ``llama_cpp.Llama``; the model is loaded at the first call."""

    model_path: str
    """The GGUF file."""
    n_ctx: int = 8192
    """Context window in tokens (prompt and reply)."""
    n_threads: int | None = None
    """CPU threads; None uses every core."""
    temperature: float = 0.0
    """Sampling temperature (0: greedy, repeatable)."""
    max_tokens: int = 1024
    """Tokens per reply at most."""
    seed: int = 0
    """Sampling seed."""
    llama_options: dict[str, Any] = Field(default_factory=dict)
    """More keywords for ``llama_cpp.Llama`` (``n_gpu_layers`` ...)."""

    _llama: Any = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "llamacpp"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_path": self.model_path, "n_ctx": self.n_ctx, "temperature": self.temperature}

    def _load(self) -> Any:
        if self._llama is None:
            try:
                from llama_cpp import Llama
            except ImportError as exc:
                raise ProviderNotInstalledError(
                    f"llamacpp models need llama-cpp-python: {INSTALL_HINT} ({exc})") from exc
            self._llama = Llama(model_path=self.model_path, n_ctx=self.n_ctx, n_threads=self.n_threads,
                                seed=self.seed, verbose=False, **self.llama_options)
        return self._llama

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        with self._lock:
            llama = self._load()
            result = llama.create_chat_completion(
                messages=[_as_chat_message(m) for m in messages],
                temperature=float(kwargs.get("temperature", self.temperature)),  # a call's own wins
                max_tokens=self.max_tokens, stop=stop or [], seed=self.seed)
        choice = result["choices"][0]
        usage = result.get("usage") or {}
        message = AIMessage(content=choice["message"].get("content") or "", usage_metadata={
            "input_tokens": int(usage.get("prompt_tokens", 0)),
            "output_tokens": int(usage.get("completion_tokens", 0)),
            "total_tokens": int(usage.get("total_tokens", 0))},
            response_metadata={"finish_reason": choice.get("finish_reason"), "model_name": self.model_path})
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None,
                         **kwargs: Any) -> ChatResult:
        return await asyncio.to_thread(self._generate, messages, stop, None, **kwargs)


def _as_chat_message(message: BaseMessage) -> dict[str, str]:
    """A LangChain message as llama.cpp's chat dict (text only: images become a note)."""
    if isinstance(message, SystemMessage):
        role = "system"
    elif isinstance(message, AIMessage):
        role = "assistant"
    elif isinstance(message, ToolMessage):
        role = "user"  # no tools are bound; a tool message can only come from history
    else:
        role = "user"
    if isinstance(message.content, str):
        return {"role": role, "content": message.content}
    parts = [p if isinstance(p, str) else str(p.get("text", "[image]")) if isinstance(p, dict) else ""
             for p in message.content]
    return {"role": role, "content": "\n".join(p for p in parts if p)}


def load_llamacpp(path: str, **options: Any) -> LlamaCppChatModel:
    """The chat model for ``llamacpp:PATH``: checks the file and the package now, loads the
    weights at the first call."""
    gguf = Path(os.path.expanduser(path))
    if not gguf.is_file():
        raise ModelConfigError(f"llamacpp: no model file at {path!r}; give the path of a .gguf file")
    try:
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        raise ProviderNotInstalledError(f"llamacpp models need llama-cpp-python: {INSTALL_HINT}") from exc
    return LlamaCppChatModel(model_path=str(gguf), **options)


__all__ = ["INSTALL_HINT", "LlamaCppChatModel", "load_llamacpp"]
