"""What an :class:`~kernel_analyst.agent.Analyst` returns: the answer, its steps, token usage."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..claims import Grounding
from ..kernels.execution import Execution

StopReason = Literal["answered", "max_steps", "error"]


@dataclass
class Usage:
    """Tokens the model reported for one answer, summed over its calls."""

    input_tokens: int = 0
    """Prompt tokens, summed over model calls."""
    output_tokens: int = 0
    """Completion tokens, summed over model calls."""
    total_tokens: int = 0
    """Total tokens as the provider counts them."""
    model_calls: int = 0
    """Model calls that reported usage."""

    def add(self, usage: dict[str, Any] | None) -> None:
        """Add one call's ``usage_metadata`` (ignored when the model reported none)."""
        if not usage:
            return
        self.input_tokens += int(usage.get("input_tokens", 0) or 0)
        self.output_tokens += int(usage.get("output_tokens", 0) or 0)
        self.total_tokens += int(usage.get("total_tokens", 0) or 0)
        self.model_calls += 1

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "total_tokens": self.total_tokens, "model_calls": self.model_calls}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        """Rebuild from :meth:`to_dict` output."""
        return cls(int(data.get("input_tokens", 0)), int(data.get("output_tokens", 0)),
                   int(data.get("total_tokens", 0)), int(data.get("model_calls", 0)))


@dataclass(frozen=True)
class TableChange:
    """What a step did to a DataFrame that existed before the question (the person's table)."""

    name: str
    """The DataFrame's name."""
    rows_before: int
    """Its rows when the question began."""
    rows: int | None
    """Its rows after the step; None when it is no longer a DataFrame (or was deleted)."""
    columns_dropped: tuple[str, ...] = ()
    """Columns it lost."""
    cell: int | None = None
    """The step's cell (execution count)."""
    code: str = ""
    """The line of the step's code that changed it."""

    def describe(self, origin: int | None = None) -> str:
        """``df: 328,521 of 336,776 rows since cell [4] (df = df[df.dep_time.notna()])``;
        ``origin``: its rows when it was first loaded, if more than before the question."""
        of = origin if origin is not None else self.rows_before
        rows = f"{self.rows:,} of {of:,} rows" if self.rows is not None else "no longer a DataFrame"
        if self.rows is not None and self.rows > of:
            rows = f"{self.rows:,} rows (was {of:,})"
        columns = ", ".join(self.columns_dropped[:8])
        dropped = f", without the columns {columns}" if self.columns_dropped else ""
        where = f" since cell [{self.cell}]" if self.cell is not None else ""
        code = f" (`{self.code}`)" if self.code else ""
        return f"`{self.name}`: {rows}{dropped}{where}{code}"


@dataclass
class Step:
    """One piece of code the model ran, and what came of it."""

    index: int
    """1-based number of the step within its answer."""
    code: str
    """The code the model sent."""
    execution: Execution
    """The kernel's result."""
    observation: str
    """The text the model was shown."""
    tool_call_id: str = ""
    """The id of the model's tool call ("" for code written as text)."""
    via: str = "tool_call"
    """How the code arrived (:class:`~kernel_analyst.agent.protocols.Via`): a native
    ``tool_call``, a ``python_fence``, a ``json_fence``, a ``tool_call_tag`` or an
    ``execute_python_tag``."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {"index": self.index, "code": self.code, "execution": self.execution.to_dict(),
                "observation": self.observation, "tool_call_id": self.tool_call_id, "via": self.via}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Step:
        """Rebuild from :meth:`to_dict` output."""
        return cls(int(data["index"]), str(data["code"]), Execution.from_dict(data["execution"]),
                   str(data.get("observation", "")), str(data.get("tool_call_id", "")),
                   str(data.get("via", "tool_call")))


@dataclass(frozen=True)
class Timing:
    """Where one answer's seconds and tokens went."""

    seconds: float = 0.0
    """The whole answer, from the question to the answer."""
    briefing_s: float = 0.0
    """Before the first model call: uploads, reading and loading the tables, the note."""
    model_s: float = 0.0
    """In model calls (streamed, from request to the reply's end)."""
    kernel_s: float = 0.0
    """In the kernel, running the steps."""
    first_token_s: float | None = None
    """From the question to the first visible piece of the first reply."""
    calls: int = 0
    """Model calls."""
    prompt_tokens: int = 0
    """Prompt tokens the server processed (new), over the calls."""
    cached_tokens: int = 0
    """Prompt tokens it had cached (not processed again), over the calls."""
    output_tokens: int = 0
    """Tokens generated, over the calls."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Timing:
        """Rebuild from :meth:`to_dict` output."""
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass(frozen=True)
class Agreement:
    """How the attempts at one question agreed (:mod:`kernel_analyst.agent.loop.attempts`)."""

    chosen: int
    """The attempt whose answer was given (1: the conversation's own; 2...: branches)."""
    agree: list[int]
    """The attempts whose values agree with it, it included."""
    total: int
    """Attempts that ended with an answer to compare."""
    values: dict[int, list[str]] = field(default_factory=dict)
    """Each attempt's values, as compared (``name=value`` for a form's items)."""
    texts: dict[int, str] = field(default_factory=dict)
    """Each attempt's answer."""
    method: str = "forked"
    """How the branches were made: ``forked`` (copy-on-write kernels) or ``copied``."""
    seconds: dict[int, float] = field(default_factory=dict)
    """Each attempt's seconds (the first one's is what the question took without attempts)."""

    def summary(self) -> str:
        """``3 of 3 attempts agree`` (or which gave what else); ``no other attempt answered``
        when there was nothing to compare (the others stopped, or gave no values)."""
        text = (f"{len(self.agree)} of {self.total} attempts agree" if self.total > 1 else
                "no other attempt answered: nothing to compare")
        others = [f"attempt {k} gave {', '.join(v) or 'no answer'}" for k, v in sorted(self.values.items())
                  if k not in self.agree]
        return text + (f"; {'; '.join(others)}" if others else "")

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {"chosen": self.chosen, "agree": list(self.agree), "total": self.total,
                "values": {str(k): list(v) for k, v in self.values.items()},
                "texts": {str(k): v for k, v in self.texts.items()}, "method": self.method,
                "seconds": {str(k): v for k, v in self.seconds.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Agreement:
        """Rebuild from :meth:`to_dict` output."""
        values = {int(k): list(v) for k, v in (data.get("values") or {}).items()}
        texts = {int(k): str(v) for k, v in (data.get("texts") or {}).items()}
        seconds = {int(k): float(v) for k, v in (data.get("seconds") or {}).items()}
        return cls(int(data["chosen"]), [int(k) for k in data.get("agree", [])], int(data.get("total", 0)),
                   values, texts, str(data.get("method", "forked")), seconds)


@dataclass
class Answer:
    """The outcome of :meth:`Analyst.ask`."""

    text: str
    """The model's final answer ("" if it stopped before answering)."""
    steps: list[Step]
    """The code runs of this answer, in order."""
    notebook_path: Path
    """The conversation's audit notebook (every step, the question and the answer)."""
    stop_reason: StopReason
    """``answered``; ``max_steps`` (the step limit was reached first, or the model's
    replies ran nothing several times in a row: see :attr:`partial`); ``error`` (the model
    call or the kernel failed; see :attr:`error`)."""
    conversation_id: str = ""
    """The conversation this answer belongs to."""
    question: str = ""
    """The question as asked."""
    usage: Usage | None = None
    """Token usage summed over the model calls, or None if the model reported none."""
    error: str | None = None
    """What went wrong when ``stop_reason == "error"``."""
    duration_s: float = 0.0
    """Wall-clock seconds the answer took."""
    files: list[str] = field(default_factory=list)
    """Names of the files uploaded with the question."""
    protocol: str = "tools"
    """The action protocol the conversation followed for this answer (``tools``: native
    tool calls; ``code``: code written as text; see :mod:`kernel_analyst.agent.protocols`)."""
    notes: list[str] = field(default_factory=list)
    """What the loop did that the user should know (the protocol switched, an answer sent
    back, earlier outputs trimmed to fit the model's context)."""
    claims: Grounding | None = None
    """Every number of the answer, grounded in the cell that produced it, derived from two
    such numbers, or unsupported (:mod:`kernel_analyst.claims`); ``claims.summary()`` is
    the one line to show beside the answer. None when there was no answer."""
    partial: bool = False
    """True when the steps ran out (``stop_reason == "max_steps"``) and :attr:`text` is the
    best partial answer the cells support: what the model said when asked to answer without
    more code, or the last result a cell printed; its text says it is partial."""
    agreement: Agreement | None = None
    """When the question was tried again in forked branches (its first answer was in doubt,
    or ``Analyst(attempts=N)``): how the attempts agreed; None when it was tried once."""
    timing: Timing | None = None
    """Where the answer's seconds and tokens went (model calls, kernel, briefing)."""

    @property
    def ok(self) -> bool:
        """True when the model answered."""
        return self.stop_reason == "answered"

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return {
            "text": self.text,
            "steps": [s.to_dict() for s in self.steps],
            "notebook_path": str(self.notebook_path),
            "stop_reason": self.stop_reason,
            "conversation_id": self.conversation_id,
            "question": self.question,
            "usage": self.usage.to_dict() if self.usage else None,
            "error": self.error,
            "duration_s": self.duration_s,
            "files": list(self.files),
            "protocol": self.protocol,
            "notes": list(self.notes),
            "claims": self.claims.to_dict() if self.claims else None,
            "partial": self.partial,
            "agreement": self.agreement.to_dict() if self.agreement else None,
            "timing": self.timing.to_dict() if self.timing else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Answer:
        """Rebuild from :meth:`to_dict` output."""
        usage = data.get("usage")
        return cls(
            text=str(data["text"]),
            steps=[Step.from_dict(s) for s in data.get("steps", [])],
            notebook_path=Path(data["notebook_path"]),
            stop_reason=data["stop_reason"],
            conversation_id=str(data.get("conversation_id", "")),
            question=str(data.get("question", "")),
            usage=Usage.from_dict(usage) if usage else None,
            error=data.get("error"),
            duration_s=float(data.get("duration_s", 0.0)),
            files=list(data.get("files", [])),
            protocol=str(data.get("protocol", "tools")),
            notes=list(data.get("notes", [])),
            claims=Grounding.from_dict(data["claims"]) if data.get("claims") else None,
            partial=bool(data.get("partial", False)),
            agreement=Agreement.from_dict(data["agreement"]) if data.get("agreement") else None,
            timing=Timing.from_dict(data["timing"]) if data.get("timing") else None,
        )
