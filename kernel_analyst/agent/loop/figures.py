"""Figures for the model: whether it takes images, attaching them, and dropping them from
the history it keeps (figures are shown for the answer they belong to)."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage

from ..prompting import message
from ..tools.observation import Observation
from .context_window import observation_id

ImagesMode = Literal["auto", "on", "off"]
"""Whether figures go to the model as images: ``auto`` when the model's LangChain profile
says it takes image input, ``on`` unless the profile says it does not, ``off`` never."""


def accepts_images(model: BaseChatModel) -> bool:
    """False only when the model's profile says it takes no image input."""
    return takes_images(model) is not False


def takes_images(model: BaseChatModel) -> bool | None:
    """What the model's LangChain profile says about image input; None when it says nothing."""
    profile = getattr(model, "profile", None)
    value = profile.get("image_inputs") if isinstance(profile, dict) else None
    return value if isinstance(value, bool) else None


def images_enabled(mode: bool | ImagesMode, model: BaseChatModel) -> bool:
    """Whether figures go to ``model`` as images under ``mode`` (see :data:`ImagesMode`);
    never when the model's profile says it takes no images."""
    if mode is True or mode == "on":
        return accepts_images(model)
    if mode is False or mode == "off":
        return False
    if mode == "auto":
        return takes_images(model) is True
    raise ValueError(f"send_images must be True, False, 'auto', 'on' or 'off'; got {mode!r}")


def figures_message(figures: list[tuple[int, Observation]]) -> HumanMessage:
    content: list[str | dict[str, Any]] = []
    for step, observation in figures:
        content.append({"type": "text", "text": message("figures_message", step=step)})
        content.extend(observation.image_blocks())
    return HumanMessage(content=content, id=observation_id())


def without_images(messages: list[BaseMessage]) -> list[BaseMessage]:
    """The messages with image blocks replaced by a short note (figures are per answer)."""
    kept: list[BaseMessage] = []
    for msg in messages:
        if isinstance(msg.content, list) and any(_is_image(b) for b in msg.content):
            content = [{"type": "text", "text": message("earlier_figure")} if _is_image(b) else b
                       for b in msg.content]
            msg = msg.model_copy(update={"content": content})
        kept.append(msg)
    return kept


def _is_image(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") in ("image", "image_url")


__all__ = ["ImagesMode", "accepts_images", "figures_message", "images_enabled", "takes_images",
           "without_images"]
