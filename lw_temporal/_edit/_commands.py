"""The commands of Claude's memory tool and text editor, with their documented results.

Both tools share the commands' meaning (``view`` lists a folder two levels deep or
numbers a file's lines, ``create`` makes a new file, ``str_replace`` replaces text that
occurs exactly once, ``insert`` adds lines after a line number; the memory tool adds
``delete`` and ``rename``) and differ in wording: each answers in its own
:class:`Voice`, the strings Anthropic's reference handlers return (the SDK's memory
tool helper; the text editor's reference implementation), so the model reads what it
was trained on. Errors are results too (``is_error``), never exceptions: a refused
edit is something the model can fix.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from temporalio.exceptions import ApplicationError

from ..memory._activities import _read_only_fix
from ._files import Changed, Entry, Exists, Files, Text
from ._once import Superseded
from ._paths import Place, ToolError, resolve
from ._records import MemoryToolRequest, NativeRequest, ToolOutcome

#: Characters of one ``view``; more is cut with the reference's note.
VIEW_CHARS = 32_000
LINE_WIDTH = 6
#: Characters of ``old_str`` an error quotes back.
QUOTE_CHARS = 2000
#: Compare-and-set attempts of one edit before reporting a conflict.
_CAS_TRIES = 3


@dataclass(frozen=True)
class Voice:
    tool: str
    dir_header: str
    file_header: str
    sizes: bool
    exists: str
    replaced: Callable[[str, str], str]
    inserted: Callable[[str, str], str]
    insert_range: str
    multiple: str


MEMORY = Voice(
    tool="memory",
    dir_header=(
        "Here're the files and directories up to 2 levels deep in {path}, excluding "
        "hidden items and node_modules:"
    ),
    file_header="Here's the content of {path} with line numbers:",
    sizes=True,
    exists="File {path} already exists",
    replaced=lambda _path, snippet: (
        "The memory file has been edited. Here is the snippet showing the change (with "
        f"line numbers):\n{snippet}"
    ),
    inserted=lambda path, _snippet: f"The file {path} has been edited.",
    insert_range=(
        "Invalid `insert_line` parameter: {line}. It should be within the range [0, {count}]."
    ),
    multiple=(
        "No replacement was performed. Multiple occurrences of old_str `{old}` in lines: "
        "{lines}. Please ensure it is unique"
    ),
)
EDITOR = Voice(
    tool="str_replace_based_edit_tool",
    dir_header=(
        "Here's the files and directories up to 2 levels deep in {path}, excluding hidden items:"
    ),
    file_header="Here's the result of running `cat -n` on {path}:",
    sizes=False,
    exists="File already exists at: {path}. Cannot overwrite files using command `create`.",
    replaced=lambda path, snippet: (
        f"The file {path} has been edited. Here's the result of running `cat -n` on a "
        f"snippet of {path}:\n{snippet}\nReview the changes and make sure they are as "
        "expected. Edit the file again if necessary."
    ),
    inserted=lambda path, snippet: (
        f"The file {path} has been edited. Here's the result of running `cat -n` on a "
        f"snippet of the edited file:\n{snippet}\nReview the changes and make sure they are "
        "as expected (correct indentation, no duplicate lines, etc). Edit the file again if "
        "necessary."
    ),
    insert_range=(
        "Invalid `insert_line` parameter: {line}. It should be within the range of lines "
        "of the file: [0, {count}]"
    ),
    multiple=(
        "No replacement was performed. Multiple occurrences of old_str `{old}` in lines "
        "{lines}. Please ensure it is unique"
    ),
)


def run(files: Files, voice: Voice, request: NativeRequest) -> ToolOutcome:
    """One call's result; only an error a retry can fix (a busy store) is raised."""
    try:
        return ToolOutcome(text=_dispatch(files, voice, request))
    except ToolError as err:
        return ToolOutcome(text=str(err), is_error=True)
    except Superseded as err:
        return ToolOutcome(text=str(err))
    except ApplicationError as err:
        if not err.non_retryable:
            raise
        return ToolOutcome(text=err.message, is_error=True)


def _dispatch(files: Files, voice: Voice, request: NativeRequest) -> str:
    command = request.command
    if command == "rename":
        assert isinstance(request, MemoryToolRequest)
        old = resolve(files.scope, request.old_path, memory_only=True)
        new = resolve(files.scope, request.new_path, memory_only=True)
        return _rename(files, old, new)
    place = resolve(files.scope, request.path, memory_only=voice is MEMORY)
    if command == "view":
        return _view(files, voice, place, request.view_range)
    if command == "create":
        return _create(files, voice, place, request.file_text or "")
    if command == "str_replace":
        return _replace(files, voice, place, request.old_str or "", request.new_str or "")
    if command == "insert":
        return _insert(files, voice, place, request.insert_line or 0, request.insert_text or "")
    if command == "delete":
        return _delete(files, place)
    raise ToolError(f"Unknown command {command!r}")


# -- the commands ---------------------------------------------------------------------
def _missing(place: Place) -> ToolError:
    return ToolError(f"The path {place.shown} does not exist. Please provide a valid path.")


def _writable(files: Files, place: Place, *, file: bool = True) -> None:
    mount = place.mount
    if mount is None or (file and not place.parts):
        raise ToolError(f"{place.shown} is a directory; name a file inside it")
    if mount.writable:
        return
    if mount.store is not None:
        fix = _read_only_fix(files.scope, mount)
    else:
        fix = "another agent's scratch is read-only; write under /mnt/scratch/own/"
    raise ToolError(f"{place.shown} is read-only ({place.show(mount.virtual)}/ is ro): {fix}")


def _view(files: Files, voice: Voice, place: Place, view_range: tuple[int, ...] | None) -> str:
    kind = files.kind(place)
    if kind is None:
        raise _missing(place)
    if kind == "dir":
        entries, cut = files.listing(place)
        return _listing(voice, place, entries, cut)
    text = files.read(place)
    if text is None:
        raise _missing(place)
    lines = _lines(text.text)
    start, end = 1, len(lines)
    if view_range is not None:
        if len(view_range) != 2:
            raise ToolError("Invalid `view_range`. It should be a list of two integers.")
        first, last = view_range
        if not 1 <= first <= max(len(lines), 1):
            raise ToolError(
                f"Invalid `view_range`: [{first}, {last}]. Its first element `{first}` should "
                f"be within the range of lines of the file: [1, {len(lines)}]"
            )
        if last != -1 and last < first:
            raise ToolError(
                f"Invalid `view_range`: [{first}, {last}]. Its second element `{last}` should "
                f"be larger or equal than its first `{first}`"
            )
        start, end = first, len(lines) if last == -1 else min(last, len(lines))
    body = _numbered(lines[start - 1 : end], start)
    shown = voice.file_header.format(path=place.shown) + "\n" + body
    if len(shown) > VIEW_CHARS:
        shown = shown[:VIEW_CHARS] + (
            "\n<response clipped><NOTE>To save on context only part of this file has been "
            "shown to you. View the rest with view_range, or find line numbers with grep -n "
            "in bash.</NOTE>"
        )
    return shown


def _listing(voice: Voice, place: Place, entries: list[Entry], cut: bool) -> str:
    rows: list[tuple[int, str]] = []
    for entry in entries:
        size = entry.size
        if entry.kind == "dir":
            size = sum(e.size for e in entries if entry.virtual in e.virtual.parents)
        shown = place.show(entry.virtual) + ("/" if entry.kind == "dir" else "")
        rows.append((size, shown))
    total = sum(e.size for e in entries if e.kind == "file")
    rows.insert(0, (total, place.shown))
    if voice.sizes:
        lines = [f"{_human(size)}\t{path}" for size, path in rows]
    else:
        lines = [path for _, path in rows]
    if cut:
        lines.append(f"(only the first {len(entries)} entries; view a subfolder to see more)")
    return voice.dir_header.format(path=place.shown) + "\n" + "\n".join(lines)


def _create(files: Files, voice: Voice, place: Place, text: str) -> str:
    _writable(files, place)
    done = f"File created successfully at: {place.shown}"
    if files.already_done(place):
        return done
    if files.kind(place) == "dir":
        raise ToolError(f"{place.shown} is a directory")
    try:
        files.create(place, text)
    except Exists:
        raise ToolError(voice.exists.format(path=place.shown)) from None
    return done


def _edit(
    files: Files,
    place: Place,
    change: Callable[[Text], tuple[str, str]],
    write: Callable[[Place, str, Text], None] | None = None,
) -> tuple[str, str] | None:
    """Read, change, write back compare-and-set (retried if another writer came in
    between); the change returns the new text and its result. ``None``: an earlier
    attempt of this activity already made the edit."""
    _writable(files, place)
    if files.already_done(place):
        return None
    for _ in range(_CAS_TRIES):
        read = files.read(place)
        if read is None:
            raise _missing(place)
        new, said = change(read)
        try:
            (write or files.write)(place, new, read)
        except Changed:
            continue
        return new, said
    raise ToolError(
        f"{place.shown} kept changing while this edit was applied (another writer); view "
        "it again and retry"
    )


def _replace(files: Files, voice: Voice, place: Place, old: str, new: str) -> str:
    if not old:
        raise ToolError("old_str must not be empty; to add text, use insert")

    def change(read: Text) -> tuple[str, str]:
        content = read.text
        count = content.count(old)
        if count == 0:
            raise ToolError(
                f"No replacement was performed, old_str `{_quoted(old)}` did not appear "
                f"verbatim in {place.shown}."
            )
        if count > 1:
            lines, at = [], content.find(old)
            while at != -1:
                lines.append(content.count("\n", 0, at) + 1)
                at = content.find(old, at + 1)
            shown = ", ".join(map(str, lines))
            raise ToolError(voice.multiple.format(old=_quoted(old), lines=shown))
        line = content.count("\n", 0, content.find(old))
        edited = content.replace(old, new, 1)
        before, after = (2, 3) if voice is MEMORY else (4, 5 + new.count("\n"))
        return edited, voice.replaced(place.shown, _snippet(edited, line, before, after))

    def write(target: Place, text: str, read: Text) -> None:
        files.replace(target, text, read, old, new)

    done = _edit(files, place, change, write)
    if done is None:
        return f"The file {place.shown} has been edited (by an earlier attempt of this call)."
    return done[1]


def _insert(files: Files, voice: Voice, place: Place, line: int, text: str) -> str:
    def change(read: Text) -> tuple[str, str]:
        lines = _lines(read.text)
        if not 0 <= line <= len(lines):
            raise ToolError(voice.insert_range.format(line=line, count=len(lines)))
        added = text.rstrip("\n").split("\n")
        edited_lines = lines[:line] + added + lines[line:]
        edited = "\n".join(edited_lines) + "\n"
        snippet = _snippet(edited, line, 4, 4 + len(added))
        return edited, voice.inserted(place.shown, snippet)

    done = _edit(files, place, change)
    if done is None:
        return f"The file {place.shown} has been edited (by an earlier attempt of this call)."
    return done[1]


def _delete(files: Files, place: Place) -> str:
    if place.mount is None or not place.parts:
        raise ToolError(f"Cannot delete the {place.shown} directory itself")
    _writable(files, place)
    if not files.already_done(place):
        if files.kind(place) is None:
            raise ToolError(f"The path {place.shown} does not exist")
        files.delete(place)
    return f"Successfully deleted {place.shown}"


def _rename(files: Files, old: Place, new: Place) -> str:
    if old.mount is None or not old.parts:
        raise ToolError(f"Cannot rename the {old.shown} directory itself")
    if new.mount is None or not new.parts:
        raise ToolError(f"The destination {new.shown} already exists")
    _writable(files, old)
    _writable(files, new)
    if old.mount.store != new.mount.store:
        raise ToolError(
            f"{old.shown} and {new.shown} are in different memory folders; rename moves "
            "within one (create the file in the other folder, then delete this one)"
        )
    if not files.already_done(old):
        if files.kind(old) is None:
            raise ToolError(f"The path {old.shown} does not exist")
        if files.kind(new) is not None:
            raise ToolError(f"The destination {new.shown} already exists")
        files.rename(old, new)
    return f"Successfully renamed {old.shown} to {new.shown}"


# -- text -----------------------------------------------------------------------------
def _lines(text: str) -> list[str]:
    """Lines split at LF (a CR stays), without the empty tail a final newline leaves."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _numbered(lines: list[str], start: int) -> str:
    return "\n".join(f"{n:>{LINE_WIDTH}}\t{line}" for n, line in enumerate(lines, start))


def _snippet(text: str, line: int, before: int, after: int) -> str:
    """Numbered lines around the 0-based ``line``."""
    lines = _lines(text)
    first = max(0, line - before)
    return _numbered(lines[first : min(len(lines), line + after)], first + 1)


def _quoted(text: str) -> str:
    """``old_str`` as an error quotes it back: a long one is cut."""
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + "..."


def _human(size: int) -> str:
    """Sizes the way the memory tool's reference listing writes them (1.5K, 4M)."""
    if size < 1024:
        return f"{size}B"
    for unit, scale in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
        value = size / scale
        if value < 1024 or unit == "G":
            return f"{int(value)}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return f"{size}B"
