"""What the pre-check knows of commands: which take files, which write them, which
list folders recursively, which only run another command, and which of their words
are patterns rather than paths."""

from __future__ import annotations

import os
from dataclasses import dataclass

from .._mode import Mode
from ._words import Word

WRITE_ALL = frozenset(
    {
        "rm",
        "rmdir",
        "mkdir",
        "touch",
        "truncate",
        "shred",
        "chmod",
        "chown",
        "chgrp",
        "unlink",
        "tee",
        "mkfifo",
        "mknod",
        "mv",
    }
)
WRITE_LAST = frozenset({"cp", "install", "ln", "rsync"})
PATTERN_FIRST = frozenset({"grep", "egrep", "fgrep", "rg", "sed", "awk", "mawk", "gawk"})
FILE_COMMANDS = (
    WRITE_ALL
    | WRITE_LAST
    | PATTERN_FIRST
    | frozenset(
        {
            "cat",
            "ls",
            "head",
            "tail",
            "less",
            "more",
            "wc",
            "stat",
            "file",
            "du",
            "find",
            "tree",
            "diff",
            "cmp",
            "sort",
            "uniq",
            "cut",
            "tac",
            "nl",
            "od",
            "xxd",
            "hexdump",
            "md5sum",
            "sha256sum",
            "sha1sum",
            "readlink",
            "realpath",
            "source",
            ".",
            "tar",
            "zip",
            "unzip",
            "gzip",
            "gunzip",
            "zcat",
        }
    )
)
#: Commands that change the working folder (handled on their own).
CHDIR = frozenset({"cd", "pushd", "popd"})
#: Commands that run the next word as a command (their own options skipped).
WRAPPERS = frozenset(
    {"env", "nice", "nohup", "time", "command", "exec", "builtin", "stdbuf", "xargs", "timeout"}
)
#: Commands whose ``-C DIR``/``--directory=DIR`` runs them in DIR.
DIRECTORY_OPTION = frozenset({"git", "make"})
#: The options whose value is a file the command writes, by command.
_OUTPUT_OPTIONS: dict[str, frozenset[str]] = {
    **dict.fromkeys(("gcc", "cc", "g++", "c++", "clang", "clang++", "ld"), frozenset({"-o"})),
    "sort": frozenset({"-o", "--output"}),
    "curl": frozenset({"-o", "--output"}),
    "wget": frozenset({"-O", "--output-document"}),
}
_LISTING_COMMANDS = frozenset({"find", "tree", "du"})
#: ``find`` predicates whose argument is a pattern or a value, never a path.
_FIND_VALUES = frozenset(
    {
        "-name",
        "-iname",
        "-path",
        "-ipath",
        "-wholename",
        "-iwholename",
        "-regex",
        "-iregex",
        "-lname",
        "-ilname",
        "-printf",
        "-fstype",
        "-user",
        "-group",
        "-perm",
        "-type",
        "-xtype",
        "-size",
        "-context",
    }
)


@dataclass(frozen=True, slots=True)
class Command:
    """One simple command, unwrapped (``env X=1 nice cmd`` is ``cmd``)."""

    base: str | None
    options: tuple[str, ...]
    #: Option values that look like paths (``--file=/x``), read-only.
    option_paths: tuple[Word, ...]
    #: Operands with the access each would need (patterns and link targets left out).
    operands: tuple[tuple[Word, Mode], ...]
    #: Whether its operands are files even when they do not look like paths.
    takes_files: bool
    lists_recursively: bool
    #: ``-C DIR`` of a :data:`DIRECTORY_OPTION` command.
    directory: Word | None = None


def _unwrap(name: str | None, words: list[Word]) -> tuple[str | None, list[Word]]:
    while name is not None and os.path.basename(name) in WRAPPERS and words:
        skip = 0
        while skip < len(words) and (
            (text := words[skip].text).startswith("-") or "=" in text or text.isdigit()
        ):
            skip += 1
        if skip >= len(words):
            break
        name = words[skip].text if words[skip].complete and words[skip].tilde is None else None
        words = words[skip + 1 :]
    return name, words


def _recursive(base: str | None, options: list[str]) -> bool:
    if base == "ls":
        return any(o == "--recursive" or (o[:2] != "--" and "R" in o) for o in options)
    if base in ("grep", "egrep", "fgrep"):
        return any(
            o in ("--recursive", "--dereference-recursive")
            or (o[:2] != "--" and ("r" in o or "R" in o))
            for o in options
        )
    return base == "rg" or base in _LISTING_COMMANDS


def read_command(name: str | None, words: list[Word]) -> Command:
    """The paths a command names and how it uses them, from its name and arguments."""
    name, words = _unwrap(name, words)
    base = os.path.basename(name) if name else None
    options = [w.text for w in words if w.complete and w.tilde is None and w.text[:1] == "-"]
    option_paths: list[Word] = []
    operands: list[Word] = []
    directory: Word | None = None
    outputs = _OUTPUT_OPTIONS.get(base or "", frozenset())
    written: list[Word] = []
    end_of_options = False
    take_directory = skip_value = take_output = False
    for word in words:
        text = word.text if word.tilde is None and word.complete else None
        if take_directory:
            directory, take_directory = word, False
            continue
        if take_output:
            written.append(word)
            take_output = False
            continue
        if skip_value:  # the pattern or value of a find predicate
            skip_value = False
            continue
        if text == "--" and not end_of_options:
            end_of_options = True
            continue
        if text is not None and text[:1] == "-" and text != "-" and not end_of_options:
            if base in DIRECTORY_OPTION and text in ("-C", "--directory"):
                take_directory = True
            elif base in DIRECTORY_OPTION and text.startswith("--directory="):
                directory = Word(text.split("=", 1)[1], True)
            elif text in outputs:
                take_output = True
            elif text.startswith("--") and text.split("=", 1)[0] in outputs:
                written.append(Word(text.split("=", 1)[1], True))
            elif text.startswith("--") and "=" in text:
                value = text.split("=", 1)[1]
                if value.startswith(("/", "./", "../")):
                    option_paths.append(Word(value, True))
            elif base == "find" and text in _FIND_VALUES:
                skip_value = True
            continue
        operands.append(word)
    if base == "dd":
        pairs = []
        for word in operands:
            key, _, target = word.text.partition("=")
            if key in ("if", "of") and word.tilde is None:
                pairs.append((Word(target, word.complete), Mode.RW if key == "of" else Mode.RO))
        return Command(base, tuple(options), tuple(option_paths), tuple(pairs), True, False)
    if (
        base in PATTERN_FIRST
        and operands
        and not any(
            o in ("-e", "-f") or o.startswith(("--regexp", "--file", "--expression"))
            for o in options
        )
    ):
        operands = operands[1:]
    in_place = base == "sed" and any(o.startswith(("-i", "--in-place")) for o in options)
    symbolic = base == "ln" and "-s" in "".join(options)
    used: list[tuple[Word, Mode]] = []
    last = len(operands) - 1
    for index, word in enumerate(operands):
        if base in WRITE_ALL or in_place:
            access = Mode.RW
        elif base in WRITE_LAST:
            access = Mode.RW if index == last else Mode.RO
        else:
            access = Mode.RO
        if symbolic and index < last:
            continue  # a symlink's target text is not opened by ln
        used.append((word, access))
    used += [(word, Mode.RW) for word in written]
    return Command(
        base,
        tuple(options),
        tuple(option_paths),
        tuple(used),
        base in FILE_COMMANDS,
        _recursive(base, options),
        directory,
    )
