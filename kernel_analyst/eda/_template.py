"""One playbook cell for both engines: the code they share, with holes each engine fills.

A section of the report (the overview, missing values, histograms ...) is one :class:`Cell`:
its ``shared`` template holds what the pandas and the out-of-core (DuckDB) paths have in
common (the findings, the words printed, the tables shown, the plots drawn), and each
engine fills the template's holes with the code that computes the numbers its own way
(pandas over the loaded table; DuckDB's passes over the file). The filled template is
plain code sent to the kernel, so the notebook re-runs alone.

Templates use ``$name``, so the code keeps its ordinary braces. A line holding nothing
but ``$name`` takes a block of lines, indented as the placeholder is (and disappears when
the block is empty); anywhere else ``$name`` takes a value on one line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from string import Template

ENGINES: tuple[str, ...] = ("pandas", "duckdb")
"""The engines a cell is written for: ``pandas`` loads the table, ``duckdb`` queries the file."""

_BLOCK = re.compile(r"(?P<indent>[ \t]*)\$(?P<name>[_a-z][_a-z0-9]*)")


def fill(template: str, **values: object) -> str:
    """``template`` with each ``$name`` replaced by ``values[name]``: a line that holds only
    ``$name`` takes the value's lines at its indentation (none when the value is empty);
    the blocks' own ``$name`` are filled too."""
    texts = {name: str(value) for name, value in values.items()}
    lines: list[str] = []
    for line in template.split("\n"):
        block = _BLOCK.fullmatch(line)
        if block is None or block["name"] not in texts:
            lines.append(line)
        elif texts[block["name"]]:
            lines += [block["indent"] + part if part else part for part in texts[block["name"]].split("\n")]
    return Template("\n".join(lines)).substitute(texts)


@dataclass(frozen=True)
class Cell:
    """A section's code: what both engines share, and per engine the code for each hole."""

    shared: str
    """The template both engines run (``$name``: a hole, or a value given to :meth:`code`)."""
    pandas: Mapping[str, str] = field(default_factory=dict)
    """The holes filled for pandas, the whole table loaded as ``df``."""
    duckdb: Mapping[str, str] = field(default_factory=dict)
    """The holes filled out of core, from the DuckDB passes over the file."""

    def __post_init__(self) -> None:
        if set(self.pandas) != set(self.duckdb):
            raise ValueError(f"both engines fill the same holes; only one fills "
                             f"{sorted(set(self.pandas) ^ set(self.duckdb))}")

    def code(self, engine: str, **values: object) -> str:
        """The cell for ``engine`` (one of :data:`ENGINES`), with ``values`` filled in."""
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}; got {engine!r}")
        holes = self.pandas if engine == "pandas" else self.duckdb
        return fill(self.shared, **holes, **values)
