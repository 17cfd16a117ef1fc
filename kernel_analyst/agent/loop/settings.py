"""How an :class:`~kernel_analyst.agent.Analyst` runs: its settings, checked once."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from ..protocols import PROTOCOLS, ProtocolName
from ..tools.observation import DEFAULT_BUDGET
from ..tools.undo import DEFAULT_CHECKPOINTS
from .figures import ImagesMode

TIME_SHARE = 0.5
"""Attempts made because an answer is in doubt may add at most this share of the latest
questions' first-attempt seconds (and :data:`.attempts.MIN_BUDGET_S`): the average question
then takes at most about 1.5 times its single attempt. Attempts asked for every question
(``attempts=N``) are the caller's choice and not bounded so. (The front ends' own copy,
``frontend.settings.DEFAULT_ATTEMPTS_TIME_SHARE``, keeps their flags free of LangChain; a
test keeps the two equal.)"""

QUESTION_TIMEOUT_S = 1800.0
"""Seconds one answer may take by default: a small model on two busy CPU cores answers a hard
question in 10 to 30 minutes; the DABench questions seen going on past this (hard 7, 23, 142,
300: 32 to 60 minutes) all ended wrong, most at the step limit, and a person should not wait
longer for them."""


@dataclass(frozen=True)
class AnalystSettings:
    """How an :class:`Analyst` runs; set through its constructor's keywords."""

    max_steps: int = 15
    """Code runs allowed for one question."""
    observation_budget: int = DEFAULT_BUDGET
    """Characters of each step's result the model is shown."""
    send_images: bool | ImagesMode = "auto"
    """Show figures to the model as images: ``True``/``"on"`` unless its profile says it
    cannot take them, ``"auto"`` when its profile says it can, ``False``/``"off"`` never."""
    max_images: int = 4
    """Figures attached per step at most."""
    step_timeout_s: float | None = None
    """Seconds each step may run; ``None`` uses the manager's ``Limits.timeout_s``."""
    profile_files: bool = True
    """Load each table uploaded with a question into a DataFrame before the model's first
    step (a recorded cell: the EDA loader's code and a compact profile) and show the model
    its name and profile; ``False`` shows the loader's code and the columns instead, for
    the model to run (:mod:`kernel_analyst.agent.briefing.uploads`)."""
    protocol: ProtocolName = "auto"
    """How the model runs code (:mod:`kernel_analyst.agent.protocols`): ``tools`` (native
    tool calls), ``code`` (```python blocks written as text), ``auto`` (tool calls when the
    model makes them, else the text form it uses)."""
    require_work: bool = True
    """Send an answer back once when it comes before any code ran in a conversation with
    data files (see :mod:`kernel_analyst.agent.feedback.answers`)."""
    check_numbers: bool = True
    """Send an answer back once when it states numbers no cell produced, naming them (see
    :mod:`kernel_analyst.agent.feedback.answers`); the answer's grounding is in
    ``Answer.claims`` either way."""
    check_results: bool = True
    """Tell the model, after a step, of results that cannot be right (a filter on a value
    its column never holds, an empty selection, a NaN result: :mod:`kernel_analyst.agent.feedback.checks`),
    and send back once an answer that is only ``nan`` or not in the form the question asks."""
    keep_data: bool = True
    """Undo a step that shrinks, replaces or deletes a DataFrame the question began with (the
    person's tables) when the question does not ask to change the data, and tell the model
    to work under a new name (:mod:`kernel_analyst.agent.feedback.keeping`); a change the
    question asks for is kept, and later questions are told of it."""
    max_reply_tokens: int = 1024
    """Tokens one model reply may have: sent on the wire where the model takes it, and
    counted as the reply streams (a reply seen repeating itself is cut before)."""
    model_timeout_s: float = 300.0
    """Seconds a model call may wait for the reply's next piece (its first included): a
    server that never answers ends the question with what the cells show. Long enough for a
    small model on two busy CPU cores to read a first request of a few thousand tokens."""
    question_timeout_s: float | None = QUESTION_TIMEOUT_S
    """Seconds one answer may take (its model calls and steps; attempts in branches have a
    budget of their own) before it ends with what the cells show, like the step limit; the
    check comes after each reply, so a step or call under way finishes first. None: no bound."""
    attempts: int = 1
    """Attempts at every question: more than 1 tries each question that many times in forked
    branches and gives the answer most attempts agree on (:mod:`.attempts`)."""
    attempts_on_doubt: int = 3
    """Attempts at a question whose first answer is in doubt (it still fails a check, or the
    steps ran out): the question is tried again in forked branches, up to this many attempts
    in all; 1 never tries again."""
    parallel_attempts: int = 2
    """Branches whose model calls run at once (a model server's slots, an API's concurrency)."""
    attempts_time_share: float | None = TIME_SHARE
    """Attempts made because an answer is in doubt may add at most this share of the latest
    questions' first attempts' seconds (and a minute), so the average question takes at most
    about 1.5 times its single attempt; a question the account cannot pay for keeps its first
    answer, with a note. None: no such bound. Attempts asked for every question are not
    bounded so."""
    warm_prefix: bool | Literal["auto"] = "auto"
    """Send the prefix every conversation shares (system prompt and tools) to the model once,
    beside the first question's briefing, so a server that caches prompts has it ready:
    ``auto`` for a model served on this machine (a loopback base URL), True always."""
    context_tokens: int | None = None
    """The model's context window, in tokens: how much of each uploaded table's profile the
    question's note holds (about 5%; names and dtypes always, statistics from about 14k on).
    None: the model's LangChain profile says, else 8,192."""
    offer_undo: bool = False
    """Offer the model the undo step (the ``undo`` tool, or the ``# kernel-analyst: undo``
    block) and tell it when to use it. Off by default: the agent already undoes for the model
    what must not stay (a step that shrank the person's table, a failing streak), and a small
    model copies an undo it was shown into steps that only read."""
    checkpoints: int = DEFAULT_CHECKPOINTS
    """Cells the model can undo (:mod:`kernel_analyst.agent.tools.undo`): the agent's sessions take
    a checkpoint before every cell and keep this many, where the kernel can be checkpointed
    and the manager's ``Limits.checkpoints`` sets none; 0 offers no undo."""

    def __post_init__(self) -> None:
        for name in ("attempts", "attempts_on_doubt", "parallel_attempts"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1; got {getattr(self, name)}")
        if self.attempts_time_share is not None and self.attempts_time_share < 0:
            raise ValueError(f"attempts_time_share must be 0 or more, or None; "
                             f"got {self.attempts_time_share}")
        if self.max_reply_tokens < 16:
            raise ValueError(f"max_reply_tokens must be at least 16; got {self.max_reply_tokens}")
        if self.question_timeout_s is not None and self.question_timeout_s <= 0:
            raise ValueError(f"question_timeout_s must be positive, or None; got {self.question_timeout_s}")
        if self.model_timeout_s <= 0:
            raise ValueError(f"model_timeout_s must be positive; got {self.model_timeout_s}")
        if self.checkpoints < 0:
            raise ValueError(f"checkpoints must be 0 or more; got {self.checkpoints}")
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be at least 1; got {self.max_steps}")
        if self.observation_budget < 500:
            raise ValueError("observation_budget must be at least 500 characters; "
                             f"got {self.observation_budget}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}; got {self.protocol!r}")

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return asdict(self)


__all__ = ["AnalystSettings"]
