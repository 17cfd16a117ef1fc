"""What the model is told of the data before a question: the uploads as the EDA loader reads
them (:mod:`.uploads`), the files and variables (:mod:`.note`), a person's cells since the
last answer (:mod:`.handoff`), all put together by :func:`.brief.brief`.

Room of ``agent/``: may import the agent's value modules, ``tools/`` (a background run's
note), ``kernel_analyst.kernels`` and ``kernel_analyst.eda``. Its face also keeps the names
of the earlier module ``agent/briefing.py``.
"""

from .brief import Briefing, brief
from .note import (
    describe_files,
    describe_variables,
    question_markdown,
    refresh_variables,
    track_variables,
)

__all__ = ["Briefing", "brief", "describe_files", "describe_variables", "question_markdown",
           "refresh_variables", "track_variables"]
