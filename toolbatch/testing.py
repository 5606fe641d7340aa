"""Test doubles for code that embeds toolbatch.

``ScriptedModel`` is a deterministic model (no network): give it a script of batches and
answers, or let it turn ``$ `` lines of a prompt into shell calls.
"""

from toolbatch.agent import ScriptedModel, ScriptStep

__all__ = ["ScriptStep", "ScriptedModel"]
