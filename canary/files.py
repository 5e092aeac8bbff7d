"""Reading the files a person hands us, within bounds: a small file must not cost unbounded memory or time.

- `read_spec_file(path)`: a spec-like YAML/JSON file (rollout, client and migration specs, judge and sweep
  configs): a regular file of at most MAX_SPEC_BYTES (at most that many bytes are read, so /dev/zero or a 50 MB
  file is refused at once), parsed by `SpecLoader`: no aliases (a "billion laughs" alias bomb cannot expand), no
  duplicate keys (the last one used to win in silence), and JSON numbers with an exponent (`1e2`) read as numbers.
- `regular_file(path, what)`: refuses a device, pipe or directory where a file is read to its end.
- `bounded_lines(file, limit)`: the lines of a binary file, none held longer than `limit` bytes (a file without
  line breaks is read in pieces, never whole).

Read problems are `InputFileError` (a ValueError: callers name the file); parse problems are yaml.YAMLError with
a line and column, as PyYAML's own.
"""

from __future__ import annotations

import os
import re
import reprlib
import stat
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import IO, Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

MAX_SPEC_BYTES = 1 << 20   # a spec is a few kilobytes; a megabyte is a mistake (or an attack)
MAX_SHOWN = 200            # characters of a person's input an error message may echo


class InputFileError(ValueError):
    """A file that cannot be read as asked: not a regular file, or too large."""


def shown(value: object, limit: int = MAX_SHOWN) -> str:
    """`repr(value)` for an error message, at most `limit` characters (then `…`); a container is shown only as
    deep and as long as it takes, so a huge or self-sharing value costs no more than its first items."""
    bounded = reprlib.Repr()
    bounded.maxlevel, bounded.maxdict, bounded.maxlist, bounded.maxtuple, bounded.maxset = 3, 8, 8, 8, 8
    bounded.maxstring = bounded.maxother = bounded.maxlong = limit
    text = bounded.repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def shown_path(path: str | Path, limit: int = MAX_SHOWN) -> str:
    """A path as an error message names it: as given, at most `limit` characters (then `…`)."""
    text = str(path)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _size(size: int) -> str:
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB" if size >= 1 << 10 else f"{size} bytes"


def _open_regular(path: Path, what: str) -> int:
    """A read-only descriptor of `path`, refused unless it is a regular file (never blocks on a FIFO)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a device, pipe or socket"
            raise InputFileError(f"is {kind}, not a regular file; give {what}")
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def regular_file(path: str | Path, what: str = "a file") -> None:
    """Raises InputFileError unless `path` is a regular file (OSError when it cannot be opened)."""
    os.close(_open_regular(Path(path), what))


def read_limited(path: str | Path, limit: int = MAX_SPEC_BYTES, what: str = "a YAML or JSON file") -> str:
    """The text of a regular file of at most `limit` bytes; reads at most limit + 1 bytes whatever the file is.
    Raises OSError (missing, unreadable), InputFileError (not a regular file, too large), UnicodeDecodeError."""
    with os.fdopen(_open_regular(Path(path), what), "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise InputFileError(f"is larger than {_size(limit)}; {what} is a few kilobytes")
    return data.decode("utf-8")


class SpecLoader(yaml.SafeLoader):
    """YAML (and JSON) for specs: aliases refused, duplicate keys refused, `1e2` a number as in JSON."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"an alias (*{event.anchor[:40]}) is not allowed in a spec; write the value "
                            f"out", event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, Hashable) and key in seen:
                raise ConstructorError(None, None, f"duplicate key {shown(key, 60)} (first on line {seen[key] + 1}); "
                                                   f"give each key once", key_node.start_mark)
            if isinstance(key, Hashable):
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


# YAML 1.1 reads a float only with a dot (`1e2` is text); JSON and YAML 1.2 read `1e2` and `-1.5E-3` as numbers.
SpecLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def parse_spec(text: str) -> Any:
    """The YAML/JSON document in `text`, by SpecLoader; raises yaml.YAMLError."""
    try:
        return yaml.load(text, Loader=SpecLoader)  # noqa: S506 - SpecLoader is a SafeLoader
    except RecursionError:  # PyYAML composes recursively: `[[[[…` thousands deep
        raise yaml.YAMLError("nested too deeply; a spec is a few levels of mappings and lists") from None


def read_spec_file(path: str | Path, what: str = "a YAML or JSON spec") -> Any:
    """The document of a spec-like file, read within MAX_SPEC_BYTES and parsed by SpecLoader. Raises OSError or
    ValueError (InputFileError, UnicodeDecodeError) when it cannot be read, yaml.YAMLError when it cannot be parsed."""
    return parse_spec(read_limited(path, MAX_SPEC_BYTES, what))


def bounded_lines(file: IO[bytes], limit: int) -> Iterator[bytes]:
    """The lines of `file`; a line longer than `limit` bytes comes as its first limit + 1 bytes (the rest is skipped
    in pieces), so no line held is longer than that, whatever the file holds."""
    while line := file.readline(limit + 1):
        if len(line) > limit and not line.endswith(b"\n"):
            while (rest := file.readline(limit + 1)) and not rest.endswith(b"\n"):
                pass
        yield line
