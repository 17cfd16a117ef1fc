"""Ask the analyst about a data file with any OpenAI-compatible chat model, watching each step.

Needs: `pip install "kernel-analyst[openai]"` and a model that calls tools: OpenAI (set
OPENAI_API_KEY), or a local OpenAI-compatible server such as Ollama, vLLM, llama.cpp or
LM Studio (set OPENAI_BASE_URL, e.g. http://localhost:11434/v1 for Ollama, or pass --base-url;
no key needed). Example:

    python examples/agent_openai_compatible.py titanic.csv "Which class survived most?" \
        --model openai:qwen2.5-coder --base-url http://localhost:11434/v1
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from kernel_analyst import Analyst, Limits, SessionManager
from kernel_analyst.agent import FinalAnswer, ModelText, StepCode, StepFinished, StepOutput, load_chat_model


def show(event: object) -> None:
    """Print one event of the answer as it happens."""
    if isinstance(event, ModelText):
        print(f"\n# {event.text.strip()}")
    elif isinstance(event, StepCode):
        print(f"\n--- step {event.step} ---\n{event.code.rstrip()}\n--- output ---")
    elif isinstance(event, StepOutput):
        text = event.output.get("text") or event.output.get("data", {}).get("text/plain", "")
        print("".join(text) if isinstance(text, list) else text, end="" if event.output.get("text") else "\n")
    elif isinstance(event, StepFinished) and event.execution.status != "ok":
        print(f"[{event.execution.status}]")
    elif isinstance(event, FinalAnswer):
        answer = event.answer
        print(f"\n=== answer ({answer.stop_reason}, {len(answer.steps)} steps) ===")
        print(answer.text or answer.error)
        print(f"\naudit notebook: {answer.notebook_path}")


async def main(args: argparse.Namespace) -> int:
    model = load_chat_model(args.model, base_url=args.base_url)
    async with SessionManager(args.workdir, limits=Limits(timeout_s=120)) as manager:
        analyst = Analyst(model, manager, max_steps=args.max_steps, send_images=args.images)
        async for event in analyst.stream("example", args.question, files=[Path(args.data)]):
            show(event)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="CSV (or any file) to analyse")
    parser.add_argument("question")
    parser.add_argument("--model", default="openai:gpt-4o-mini",
                        help='"provider:model" (default: %(default)s)')
    parser.add_argument("--base-url", help="OpenAI-compatible server (default: $OPENAI_BASE_URL)")
    parser.add_argument("--max-steps", type=int, default=15)
    parser.add_argument("--images", action="store_true", help="show figures to the model (vision models)")
    parser.add_argument("--workdir", default="runs", help="sessions and notebooks (default: %(default)s)")
    sys.exit(asyncio.run(main(parser.parse_args())))
