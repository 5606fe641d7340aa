"""toolbatch as the tool runtime of Python agent frameworks, one module each.

``toolbatch.integrations.langgraph`` (``ToolbatchNode``), ``.pydantic_ai``
(``ToolbatchToolset``), ``.openai_agents`` (``ToolbatchTools``) and ``.mini_swe_agent``
(``ToolbatchEnvironment``) each stand where the framework's own tool execution stands, so a
turn's tool output is bounded as a whole, its complete output is persisted once, and the
framework's cancellation stops the running commands. Each needs its framework
(``pip install 'toolbatch[langgraph]'``, ``[pydantic-ai]``, ``[openai-agents]``,
``[mini-swe-agent]``), so nothing is imported here: import the module you use. Where each
framework's batch boundary is, and what it cannot do, is in ``README.md`` here.
"""

__all__: list[str] = []
