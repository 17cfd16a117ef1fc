"""One answer in the order it happens: brief, call the model, read the reply, ask the judge,
act, end (:class:`~.answer.AnswerLoop`).

Room of ``agent/``: may import every other room and the value modules; nothing imports it
but the face (:mod:`kernel_analyst.agent.analyst`). It holds no policy: what a reply means
and what the model is told are the judge's (``feedback/``).
"""

from .answer import AnswerLoop
from .settings import AnalystSettings
from .state import Conversation, EventCallback, Turn

__all__ = ["AnalystSettings", "AnswerLoop", "Conversation", "EventCallback", "Turn"]
