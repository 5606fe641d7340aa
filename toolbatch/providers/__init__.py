"""Mappings between toolbatch turns and model APIs, one module per API.

``openai_chat``, ``openai_responses``, ``anthropic`` and ``gemini`` each offer
``tool_calls(reply)`` (the calls of a model reply, malformed ones marked ``invalid``, none
dropped), ``tool_results(turn)`` (a finalized turn as that API's input, in call order,
media the API cannot take replaced by a reference to the saved file) and
``tool_definitions(registry)``. Pure and synchronous: they read a turn's parts and never
change what was finalized or recorded. ``README.md`` here lists what each API receives for
each kind of part, and its limits with their sources.
"""

from toolbatch.providers import anthropic, gemini, openai_chat, openai_responses

__all__ = ["anthropic", "gemini", "openai_chat", "openai_responses"]
