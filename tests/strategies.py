"""Hypothesis strategies for model-facing text, parts, tool-call responses and batches.

Shared by every test package. Text mixes ASCII, CJK, astral characters (emoji), base
characters followed by combining marks, whitespace, surrogate pairs written as two code
points and lone surrogates (Python strings may hold both), so code that cuts text meets
every boundary it could get wrong. Long texts are built by repeating a drawn chunk, which
keeps generation cheap while reaching many thousands of code points.
"""

from __future__ import annotations

import base64
import functools
import shlex
from pathlib import Path

from hypothesis import settings, strategies as st
from pydantic import JsonValue

from toolbatch import (
    FileData,
    FileDataPart,
    FunctionResponse,
    FunctionResponsePart,
    InlineData,
    InlineDataPart,
    Part,
    TextPart,
    ToolCallResponse,
)
from toolbatch.finalize import PLAN_MODE_REENTRY_REMINDER, PLAN_MODE_REMINDER


def scaled(examples: int) -> int:
    """``examples`` under the full profile (CI), a fifth of it (at least 5) in the edit loop.

    The profile is chosen by ``HYPOTHESIS_PROFILE`` (see ``tests/conftest.py``); a test that
    sets its own ``max_examples`` passes it through here so the profile still sizes it.
    """
    full = settings.get_profile("ci").max_examples
    return max(5, examples * settings.default.max_examples // full)


__all__ = [
    "CALL_IDS",
    "PNG_SIGNATURE",
    "TOOL_NAMES",
    "function_response_parts",
    "media_parts",
    "parts_lists",
    "persisted_files",
    "plain_commands",
    "response_batches",
    "substituted_commands",
    "text_parts",
    "text_units",
    "texts",
    "tool_call_responses",
    "wrapped_commands",
]

CALL_IDS = ("c1", "c2", "c3", "c1-1", "dir/c1", "dir_c1", "../c2", "", "长-id")
"""Call ids drawn for responses: a small pool, so batches hold duplicates and ids that
collide once made safe for a file name (``dir/c1`` and ``dir_c1``)."""

TOOL_NAMES = ("run_shell_command", "read_file", "mcp__files__grep", "enter_plan_mode")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
"""Media parts carry real image bytes (toolbatch checks media instead of trusting labels)."""

_high = st.integers(0xD800, 0xDBFF).map(chr)
_low = st.integers(0xDC00, 0xDFFF).map(chr)


@functools.cache
def text_units() -> st.SearchStrategy[str]:
    """One unit of text: a character, a combining sequence or a surrogate pair or half."""
    return st.one_of(
        st.characters(min_codepoint=0x20, max_codepoint=0x7E),
        st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
        st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF),
        st.tuples(
            st.characters(min_codepoint=0x61, max_codepoint=0x7A),
            st.lists(st.characters(min_codepoint=0x300, max_codepoint=0x36F), max_size=3),
        ).map(lambda base_marks: base_marks[0] + "".join(base_marks[1])),
        st.sampled_from(["\n", "\t", " ", "\n\n"]),
        st.tuples(_high, _low).map("".join),
        _high,
        _low,
    )


@functools.cache
def texts(*, max_repeat: int = 400, max_units: int = 8) -> st.SearchStrategy[str]:
    """Text from empty to thousands of code points: a repeated chunk, then a short tail.

    Few draws per text (a chunk of up to ``max_units`` units, a repeat count, a tail), so
    batches of dozens of responses stay cheap to generate. Built once per size (as are the
    other strategies here): hypothesis validates every new strategy object, and the ones
    built inside a composite's draws (and the caches keyed on them) cost more than drawing.
    """
    chunk = st.lists(text_units(), max_size=max_units).map("".join)
    return st.builds(
        lambda body, times, tail: body * times + tail,
        chunk,
        st.integers(0, max_repeat),
        chunk,
    )


@functools.cache
def text_parts(text: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[TextPart]:
    """A top-level text part."""
    return st.builds(TextPart, text=text if text is not None else texts())


def _small_png(width: int, height: int) -> bytes:
    from tests.providers._samples import png

    return png(width, height)


@functools.cache
def media_parts() -> st.SearchStrategy[Part]:
    """An ``inlineData`` or ``fileData`` part (never counted by any text budget)."""
    inline = st.builds(
        lambda data: InlineDataPart(
            inline_data=InlineData(mime_type="image/png", data=base64.b64encode(data).decode())
        ),
        st.builds(_small_png, st.integers(1, 4), st.integers(1, 4)),
    )
    file = st.builds(
        lambda name: FileDataPart(
            file_data=FileData(mime_type="application/pdf", file_uri=f"gs://bucket/{name}.pdf")
        ),
        st.text(alphabet="abcdef", min_size=1, max_size=8),
    )
    return st.one_of(inline, file)


def _plan_mode_output(text: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    reminder = st.sampled_from([PLAN_MODE_REMINDER, PLAN_MODE_REENTRY_REMINDER])
    return st.one_of(
        reminder,
        st.builds(lambda r, extra: r + "\n\n" + extra, reminder, text),
        st.builds(lambda r, extra: r + extra, reminder, text),
        text,
    )


@functools.cache
def _bodies(
    text: st.SearchStrategy[str] | None, plan_mode: bool
) -> st.SearchStrategy[dict[str, JsonValue]]:
    # Built once per (text, plan_mode): hypothesis validates each new strategy object, and
    # building them per draw made generation the slowest part of the property tests.
    string = text if text is not None else texts()
    output = _plan_mode_output(string) if plan_mode and text is None else string
    return st.one_of(
        st.builds(lambda o: {"output": o}, output),
        st.builds(lambda e: {"error": e}, string),
        st.builds(lambda e, o: {"error": e, "output": o}, string, string),
        st.builds(lambda o: {"output": o, "exit_code": 1}, output),
        # Fresh objects per draw, so no two parts ever share a mutable body.
        st.builds(lambda: {"output": {"rows": [1, 2.5, None, True, "x"]}}),
        st.builds(dict),
    )


def _function_response(call_id: str, name: str, body: dict[str, JsonValue]) -> Part:
    return FunctionResponsePart(
        function_response=FunctionResponse(id=call_id, name=name, response=body)
    )


def function_response_parts(
    call_id: str, name: str, *, text: st.SearchStrategy[str] | None = None
) -> st.SearchStrategy[Part]:
    """A function response for ``call_id``/``name`` with any mix of output and error.

    Output is a string (for ``enter_plan_mode`` often a lifecycle reminder, with or
    without hook context after it), a JSON object or absent; error is a string or absent;
    sometimes another key rides along.
    """
    return _bodies(text, name == "enter_plan_mode").map(
        lambda body: _function_response(call_id, name, body)
    )


@functools.cache
def _extra_parts(
    text: st.SearchStrategy[str] | None, plan_mode: bool
) -> st.SearchStrategy[list[Part | dict[str, JsonValue]]]:
    # A dict stands for a further function response body; the caller adds id and name.
    item: st.SearchStrategy[Part | dict[str, JsonValue]] = st.one_of(
        text_parts(text), media_parts(), _bodies(text, plan_mode)
    )
    return st.lists(item, max_size=3)


def _draw_parts(
    draw: st.DrawFn, call_id: str, name: str, text: st.SearchStrategy[str] | None
) -> list[Part]:
    plan_mode = name == "enter_plan_mode"
    first = _function_response(call_id, name, draw(_bodies(text, plan_mode)))
    rest = [
        _function_response(call_id, name, item) if isinstance(item, dict) else item
        for item in draw(_extra_parts(text, plan_mode))
    ]
    return [first, *rest]


def parts_lists(
    call_id: str, name: str, *, text: st.SearchStrategy[str] | None = None
) -> st.SearchStrategy[list[Part]]:
    """A response's parts: its function response first, then up to three more parts."""
    return st.composite(lambda draw: _draw_parts(draw, call_id, name, text))()


@functools.cache
def persisted_files() -> st.SearchStrategy[tuple[Path, ...] | None]:
    """``None`` (undecided), ``()`` (decided, no file) or one or two producer paths."""
    path = st.sampled_from(["a", "b", "日本", "long-" + "x" * 60]).map(
        lambda stem: Path(f"/artifacts/{stem}.output")
    )
    return st.one_of(
        st.none(), st.just(()), st.lists(path, min_size=1, max_size=2, unique=True).map(tuple)
    )


_call_ids = st.sampled_from(CALL_IDS)
_tool_names = st.sampled_from(TOOL_NAMES)
_statuses = st.sampled_from(["success", "error", "cancelled", "duplicate"])


@st.composite
def tool_call_responses(
    draw: st.DrawFn,
    *,
    text: st.SearchStrategy[str] | None = None,
    files: st.SearchStrategy[tuple[Path, ...] | None] | None = None,
) -> ToolCallResponse:
    """One response with mixed parts, any status and any persistence decision."""
    call_id = draw(_call_ids)
    name = draw(_tool_names)
    parts = _draw_parts(draw, call_id, name, text)
    status = draw(_statuses)
    return ToolCallResponse(
        call_id=call_id,
        name=name,
        parts=parts,
        status=status,
        error=None if status == "success" else f"call ended: {status}",
        persisted_output_files=draw(files if files is not None else persisted_files()),
    )


def response_batches(
    *,
    min_size: int = 0,
    max_size: int = 50,
    text: st.SearchStrategy[str] | None = None,
    files: st.SearchStrategy[tuple[Path, ...] | None] | None = None,
) -> st.SearchStrategy[list[ToolCallResponse]]:
    """A batch of responses in call order (call ids repeat and collide on purpose)."""
    return st.lists(
        tool_call_responses(text=text, files=files), min_size=min_size, max_size=max_size
    )


# -- shell commands, for the permission rules ------------------------------------------------

_SPELLINGS = ("{}", "'{}'", '"{}"', "\\{}", "$'{}'", "/usr/bin/{}", "/bin/{}")
_PREFIXES = (
    "",
    "env ",
    "env -i A=1 ",
    "exec ",
    "command ",
    "nice -n 5 ",
    "nohup ",
    "timeout 5 ",
    "time ",
    "sudo -u root ",
    "xargs ",
    "xargs -n1 ",
    "FOO=bar ",
    "LD_PRELOAD=x.so ",
)
_STATEMENT_WRAPPERS = (
    "({})",
    "{{ {}; }}",
    "if true; then {}; fi",
    "if false; then :; else {}; fi",
    "! {}",
    "for i in 1; do {}; done",
    "while {}; do break; done",
    "case a in a) {};; esac",
    "f() {{ {}; }}",
    "echo $({})",
    "cat <({})",
    "tee >({})",
    "x=$({})",
    "[[ -n $({}) ]]",
    "echo ${{x:-$({})}}",
    "true && {}",
    "false || {}",
    "echo a | {}",
    "{}; echo done",
    "{} &",
    "echo {{a,b}}; {}",
)
_SHELLS = ("bash -c {}", "sh -c {}", "eval {}", "bash -lc {}")


@st.composite
def _simple_spelled(draw: st.DrawFn, name: str, argument: str) -> str:
    spelling = draw(st.sampled_from(_SPELLINGS)).format(name)
    return draw(st.sampled_from(_PREFIXES)) + spelling + " " + argument


def _wrap(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    statement = st.tuples(st.sampled_from(_STATEMENT_WRAPPERS), inner).map(
        lambda pair: pair[0].format(pair[1])
    )
    shell = st.tuples(st.sampled_from(_SHELLS), inner).map(
        lambda pair: pair[0].format(shlex.quote(pair[1]))
    )
    return statement | shell


def wrapped_commands(name: str = "touch", argument: str = "x") -> st.SearchStrategy[str]:
    """``name argument`` spelled any way bash accepts (quoted, escaped, ANSI-C, by path,
    after wrappers), nested in any syntax that runs it (subshells, groups, control flow,
    functions, substitutions, ``bash -c`` strings, lists and pipelines)."""
    return st.recursive(_simple_spelled(name, argument), _wrap, max_leaves=4)


_PLAIN_WORDS = st.sampled_from(["-la", "src", "a.txt", "'two words'", '"quoted"', "--stat"])


def plain_commands(names: tuple[str, ...] = ("git status", "ls", "echo")) -> st.SearchStrategy[str]:
    """Plain sequences: simple commands of literal words joined by ``&& || ; |``."""
    simple = st.tuples(st.sampled_from(names), st.lists(_PLAIN_WORDS, max_size=3)).map(
        lambda pair: " ".join([pair[0], *pair[1]])
    )
    separators = st.sampled_from([" && ", " || ", "; ", " | ", "\n"])
    return st.tuples(st.lists(simple, min_size=1, max_size=4), separators).map(
        lambda pair: pair[1].join(pair[0])
    )


_SUBSTITUTIONS = ("$(touch M)", "`touch M`", "<(touch M)", ">(touch M)", '"$(touch M)"')


@st.composite
def substituted_commands(draw: st.DrawFn) -> str:
    """A plain sequence with a command or process substitution spliced in anywhere."""
    plain = draw(plain_commands())
    cut = draw(st.integers(0, len(plain)))
    substitution = draw(st.sampled_from(_SUBSTITUTIONS))
    space = draw(st.sampled_from(["", " "]))
    return plain[:cut] + space + substitution + space + plain[cut:]
