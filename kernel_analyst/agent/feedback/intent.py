"""Does a question ask to change the person's data? Read from its words.

The person's tables stay as the person left them unless a question asks for a change: a
step that shrinks or replaces one of them for a question that does not ask is undone
(:func:`~kernel_analyst.agent.feedback.outcomes.kept_as_asked`). What asks is decided from
the question's words: a change for the rest of the conversation ("from now on", "going
forward"), or a verb that changes a table (drop, remove, filter out, keep only, clean,
fill, replace, convert, rename, add or create a column, encode, normalize ...).

Why words, and not the model's own declaration or a second model call: measured on the
questions of DSEval's Kaggle sets, whose authors' code shows which questions change an
existing variable (``python benchmarks/intent.py``), the words agree with the authors'
code on most questions, cost nothing, and cannot be talked out of the guard by the model
whose step it guards; a small model asked to declare its intent (a marker in its code)
rarely does, and a classification call costs a model call per question.
"""

from __future__ import annotations

import re

_FOR_GOOD = re.compile(
    r"\b(?:from now on|going forward|from here on|henceforth|for the rest of|for all (?:later|following|"
    r"subsequent)|in (?:all )?(?:later|following|subsequent) (?:questions|steps|analys[ie]s)|permanently|"
    r"in[ -]place|inplace)\b", re.I)
_VERBS = (r"drop(?:s|ped|ping)?|remov(?:e|es|ed|ing)|delet(?:e|es|ed|ing)|exclud(?:e|es|ed|ing)|"
          r"discard(?:s|ed|ing)?|filter(?:s|ed|ing)? out|leav(?:e|es|ing) out|get(?:ting)? rid of|"
          r"keep(?:ing)? only|clean(?:s|ed|ing)?|fill(?:s|ed|ing)?|imput(?:e|es|ed|ing)|"
          r"replac(?:e|es|ed|ing)|convert(?:s|ed|ing)?|cast(?:s|ing)?|renam(?:e|es|ed|ing)|encod(?:e|es|ed|ing)|"
          r"normali[sz](?:e|es|ed|ing)|standardi[sz](?:e|es|ed|ing)|scal(?:e|es|ed|ing)|"
          r"deduplicat(?:e|es|ed|ing)|overwrit(?:e|es|ing)|updat(?:e|es|ed|ing)|set(?:ting)? the index|"
          r"reset(?:ting)? the index|transform(?:s|ed|ing)?|strip(?:s|ped|ping)?|trim(?:s|med|ming)?|"
          r"chang(?:e|es|ed|ing) the (?:type|dtype|column|values?)")
_CHANGE = re.compile(rf"\b(?:{_VERBS})\b", re.I)
_NEW_COLUMN = re.compile(r"\b(?:add|adds|added|adding|create|creates|created|creating|insert|inserting|"
                         r"append|derive|split|apply|save)\b[^.;]{0,60}\b(?:new )?(?:columns?|features?|"
                         r"fields?|the (?:original )?(?:dataset|data ?frame|table|data))\b", re.I)


def asks_to_change(question: str) -> bool:
    """True when the question asks to change the data: for good, or with a verb that
    changes a table (see the module docstring)."""
    return bool(_FOR_GOOD.search(question) or _CHANGE.search(question) or _NEW_COLUMN.search(question))


__all__ = ["asks_to_change"]
