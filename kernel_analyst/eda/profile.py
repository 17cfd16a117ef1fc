"""A compact overview of a table for a model: size, missing values, one line per column.

A model that gets this first does not spend steps on ``df.info()`` and ``df.head()``.
:func:`profile` works on the host (a DataFrame, or a file read the way the playbook
reads it); :func:`profile_file` loads an uploaded file in a kernel session as a visible,
re-runnable cell and returns the same text. Both run one implementation
(``_profile_impl``), whose source is what the kernel cell defines.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import keyword
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..kernels import Execution, KernelSession
from . import _profile_impl
from ._outofcore import over_pandas_share, text_bytes
from .loader import Plan, detect

__all__ = ["DEFAULT_PROFILE_BUDGET", "ProfiledFile", "profile", "profile_file", "variable_name"]

DEFAULT_PROFILE_BUDGET = 2000
"""Characters of profile text per table, by default."""


def profile(data: Any, *, name: str = "df", budget: int = DEFAULT_PROFILE_BUDGET) -> str:
    """The compact profile of ``data``: a DataFrame, or the path of a file to read first."""
    if isinstance(data, (str, Path)):
        import pandas as pd

        namespace: dict[str, Any] = {"pd": pd}
        exec(detect(data).code(var="df", path=str(data)), namespace)  # the loading cell's own code
        data = namespace["df"]
    return _profile_impl.profile_frame(data, name, budget)


def variable_name(file: str) -> str:
    """A Python name for the table in ``file`` (``sales-2024.csv.gz`` -> ``sales_2024``)."""
    stem = Path(file).name.split(".")[0]
    name = re.sub(r"\W+", "_", stem).strip("_").lower() or "df"
    if name[0].isdigit() or keyword.iskeyword(name):
        name = f"df_{name}"
    return name


@dataclass(frozen=True)
class ProfiledFile:
    """An uploaded file loaded in a session, with its profile."""

    file: str
    """The file's name in the session."""
    variable: str
    """The DataFrame's name in the kernel."""
    text: str
    """The profile (or why the file could not be read)."""
    execution: Execution | None
    """The loading cell (None when the file was not a readable table)."""

    @property
    def ok(self) -> bool:
        """True when the table was loaded and profiled."""
        return self.execution is not None and self.execution.ok


async def profile_file(session: KernelSession, source: str | Path, *, name: str | None = None,
                       variable: str | None = None, budget: int = DEFAULT_PROFILE_BUDGET,
                       plan: Plan | None = None, annotations: dict[str, Any] | None = None,
                       stats: bool = True) -> ProfiledFile:
    """Load an uploaded file as a DataFrame in ``session`` and profile it.

    ``source`` is the file on the host (read to decide how to load it, unless ``plan``
    says already); ``name`` its name in the session (default: the same name). The cell that
    does it lands in the audit trail (with ``annotations`` beside its ``role: profile``):
    the loading code the playbook would write, then the profile function and its call. An
    unreadable file is reported in ``text``; nothing runs for it. ``stats``: numeric
    columns' min, median and max in the profile.
    """
    from .exceptions import UnreadableFileError

    file = name or Path(source).name
    var = variable or variable_name(file)
    if plan is None:
        try:
            plan = await asyncio.to_thread(detect, source, name=file)
        except UnreadableFileError as exc:
            return ProfiledFile(file, var, f"{file}: not loaded ({exc})", None)
    memory_mb = session.limits.memory_mb
    size = text_bytes(Path(source), plan)
    if over_pandas_share(size, memory_mb):
        return ProfiledFile(file, var, f"{file}: not loaded into pandas: {size / 2**20:,.0f} MiB of table is "
                                       f"too much for the kernel's {memory_mb:,} MiB; query it with DuckDB "
                                       f"(duckdb.sql(\"SELECT ... FROM '{file}'\"))", None)
    code = "\n".join(["from typing import Any as _Any", "", "import numpy as np", "import pandas as pd", "",
                      plan.code(var=var), "",
                      _function_source(), "",
                      f"print(profile_frame({var}, {var!r}, {int(budget)}, stats={bool(stats)}))",
                      f"del {', '.join(_helper_names())}  # the profile's helpers leave the namespace"])
    ex = await session.execute(code, annotations={**(annotations or {}), "role": "profile"})
    text = ex.text.strip() if ex.ok else f"{file}: loading failed ({ex.error or ex.status})"
    return ProfiledFile(file, var, text, ex)


def _helper_names() -> list[str]:
    """The functions the profile's code defines, deleted after it ran (its ``Any`` is
    ``_Any``, a name the variable listing hides)."""
    tree = ast.parse(inspect.getsource(_profile_impl))
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]


def _function_source() -> str:
    source = inspect.getsource(_profile_impl)
    body = source.split("import pandas as pd\n", 1)[1]  # the module's imports are in the cell already
    body = re.sub(r"\bAny\b", "_Any", body)
    return f"# The compact profile (kernel_analyst.eda.profile), here so the cell re-runs alone.{body}"
