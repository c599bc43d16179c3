"""Include directives replaced by the text of the files they name: RST's `.. include::` and
`.. literalinclude::`, mdBook's `{{#include}}` and `{{#rustdoc_include}}`, AsciiDoc's `include::`.

Why: Sphinx manuals share text between pages through include fragments: CMake's command-line
options live in `OPTIONS_BUILD.txt`, which `cmake.1.rst` and `ccmake.1.rst` include. Sphinx renders
a fragment inside each page that includes it and never as a page of its own (its `.txt` suffix is
not a source suffix). Read alone, a page misses that text, and the fragment becomes a page with no
title and no context. So an RST page is read with its includes in place (`expand`), which also
makes its content hash change when a fragment does, and a `.txt` file that an ingested page
includes is read there only (`fragments`). A `literalinclude` (an example file shown as code,
CMake's presets/example.json) becomes a code block of the file's text: an example is often the
answer to "how do I write ...".

Only files inside the ingested folder are read, never through a symlink (the walk's rule); a
name that points elsewhere, a missing file, a file that includes itself again, and docutils'
standard includes (`<isonum.txt>`, substitution definitions only) are left out. The options
`:start-after:`, `:end-before:`, `:start-line:`, `:end-line:`, `:lines:` (literalinclude's "1,3,5-10"),
and `:literal:`, `:code:` or `:language:` (the text shown as code) are applied; the included
lines take the directive's indentation, as docutils inserts them into the block the directive
stands in.

mdBook books show their code listings through `{{#include file.rs}}` inside a code fence (the Rust
book holds 707 of them). Read as they stand, the directives put file paths where the code goes:
words no reader sees, in a third of the chunks, taking part of each chunk's tokens, and no code.
`expand_mdbook` reads them as mdBook renders them: the named file's lines, all of them, one
(`file.rs:2`), a range (`file.rs:2:10`, `file.rs::10`, `file.rs:2:`) or those between
`ANCHOR: name` and `ANCHOR_END: name` (`file.rs:name`), anchor lines left out; `rustdoc_include`
shows the same lines (mdBook hides the rest of the file, for the playground). A directive whose file
is not inside the ingested folder (a book's `src/` ingested without its `listings/`) stays as
written: its path names the chapter the listing belongs to ("listings/ch12-an-io-project/..."),
words that retrieval matches (left out, fewer of the Rust book's dev questions found the right file
first), and the listing is one file for a reader who has the book's folder.

AsciiDoc pages (Asciidoctor, Antora; Git's manual pages share their option lists so) include
partials and code the same way: `include::options.adoc[]`, `include::app.py[tag=main]` (the lines
between `tag::main[]` and `end::main[]`), `[lines=2..5;9..-1]`, and `[leveloffset=+1]` (the
partial's sections one level deeper). `expand_asciidoc` reads them in place; one whose file is not
in the ingested folder stays, and the AsciiDoc reader drops it as before. A partial (an included
file with no document title) is read in the pages that include it only (`fragments`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

_INCLUDE = re.compile(r"^([ \t]*)\.\.[ \t]+(include|literalinclude)::[ \t]*(.*?)[ \t]*$")
_OPTION = re.compile(r"^[ \t]+:([\w-]+):[ \t]*(.*?)[ \t]*$")
MAX_DEPTH = 8  # includes within includes; deeper ones are left out
# mdBook's links: {{#include file.rs:2:10}}, {{#rustdoc_include file.rs:anchor}}, {{#playground file.rs
# editable}}; "\{{#include" is mdBook's escape for the directive shown as text
_MDBOOK = re.compile(r"(?<!\\)\{\{#(include|rustdoc_include|playground|playpen)[ \t]+([^\s}]+)[^}]*\}\}")
_ANCHOR = re.compile(r"ANCHOR(?:_END)?:\s*([\w-]+)")
# AsciiDoc's: include::partial.adoc[], include::app.py[tag=main], [lines=1..5;8..-1], [leveloffset=+1]
_ASCIIDOC = re.compile(r"^include::([^\[\s][^\[]*)\[(.*)\][ \t]*$")
_ASCIIDOC_OPTION = re.compile(r"([\w-]+)\s*=\s*(\"[^\"]*\"|[^,]*)")
_ASCIIDOC_TAG = re.compile(r"\b(tag|end)::([\w-]+)\[\]")
_ASCIIDOC_SECTION = re.compile(r"^(=+)([ \t]+\S)")
_ASCIIDOC_VERBATIM = re.compile(r"^(-{4,}|\.{4,})[ \t]*$")  # a listing's or literal block's delimiter
ASCIIDOC_SUFFIXES = (".adoc", ".asciidoc")


def targets(text: str, here: Path, root: Path, asciidoc: bool = False) -> list[Path]:
    """The files the include directives of `text` (an RST file, or with `asciidoc` an AsciiDoc
    one, in folder `here`) name, that `expand` (`expand_asciidoc`) would read."""
    pattern, group = (_ASCIIDOC, 1) if asciidoc else (_INCLUDE, 3)
    found = []
    for line in text.split("\n"):
        if (m := pattern.match(line)) and (path := _resolve(m.group(group).strip(), here, root)) is not None:
            found.append(path)
    return found


def expand(text: str, path: Path, root: Path, read: Callable[[Path], str | None],
           _stack: tuple[Path, ...] = ()) -> str:
    """`text` (of the file at `path`, under the ingested folder `root`) with every include
    directive replaced by the named file's text; `read` gives a file's text, or None when it
    cannot be read (the directive is then left out)."""
    stack = _stack + (path,)
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        m = _INCLUDE.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        indent, literal, name = m.group(1), m.group(2) == "literalinclude", m.group(3)
        options: dict[str, str] = {}
        i += 1
        while i < len(lines) and (o := _OPTION.match(lines[i])) and len(_indent(lines[i])) > len(indent):
            options[o.group(1)] = o.group(2)
            i += 1
        if (found := _included(name, stack, root, read)) is None:
            continue
        target, included = found
        included = _excerpt(included, options)
        if literal or "literal" in options or "code" in options:
            language = options.get("code") or options.get("language", "")
            body = [f".. code-block:: {language}".rstrip(), ""] + ["   " + line for line in included.split("\n")]
        else:
            body = expand(included, target, root, read, stack).split("\n")
        out += ["", *(indent + line if line.strip() else "" for line in body), ""]
    return "\n".join(out)


def fragments(pages: dict[Path, str], root: Path) -> dict[Path, Path]:
    """{fragment: the first page that includes it} for the files that the given RST and AsciiDoc
    files ({path: text}) include and that their generator shows inside those pages, not as pages of
    their own: an RST page's `.txt` includes (Sphinx renders its source suffix only), and an
    AsciiDoc page's includes among `pages` that have no document title (Antora's partials, Git's
    shared option lists; a titled document is a page, included or not). A fragment included by
    another fragment maps to the page that includes that one."""
    found: dict[Path, Path] = {}
    for path, text in sorted(pages.items()):
        asciidoc = path.suffix.lower() in ASCIIDOC_SUFFIXES
        for target in targets(text, path.parent, root, asciidoc):
            if target == path:
                continue
            if asciidoc:
                fragment = target in pages and not _titled(pages[target])
            else:
                fragment = target.suffix.lower() == ".txt"
            if fragment:
                found.setdefault(target, path)
    for fragment, page in found.items():  # a fragment within a fragment: the page both are read in
        seen = {fragment}
        while page in found and page not in seen:
            seen.add(page)
            page = found[page]
        found[fragment] = page
    return found


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def _included(name: str, stack: tuple[Path, ...], root: Path,
              read: Callable[[Path], str | None]) -> tuple[Path, str] | None:
    """(path, text) of the file an include directive of stack[-1] names, or None where it is not
    under `root`, cannot be read, includes itself again, or lies deeper than MAX_DEPTH."""
    target = _resolve(name, stack[-1].parent, root)
    if target is None or target in stack or len(stack) > MAX_DEPTH:
        return None
    text = read(target)
    return None if text is None else (target, text)


def _resolve(name: str, here: Path, root: Path) -> Path | None:
    """The file `name` names, relative to `here` (or, starting with "/", to `root`, as Sphinx reads
    it relative to its source folder), if it lies under `root` with no symlink on the way."""
    if not name or name.startswith("<"):
        return None
    base = root if name.startswith("/") else here
    path = Path(os.path.normpath(base / name.lstrip("/")))
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return None
    step = root
    for part in parts:
        step = step / part
        if step.is_symlink():
            return None
    return path if path.is_file() else None


def _excerpt(text: str, options: dict[str, str]) -> str:
    """The part of an included file that the directive's options select."""
    lines = text.split("\n")
    try:
        start, end = int(options.get("start-line", 0)), options.get("end-line")
        lines = lines[start:int(end) if end is not None else None]
        if "lines" in options:
            lines = [lines[k] for k in _numbers(options["lines"], len(lines))]
    except (ValueError, IndexError):
        pass
    text = "\n".join(lines)
    if after := options.get("start-after"):
        text = text.split(after, 1)[1] if after in text else ""
    if before := options.get("end-before"):
        text = text.split(before, 1)[0]
    return text.strip("\n")


def _numbers(spec: str, count: int) -> list[int]:
    """The 0-based line indices a `:lines:` option names ("1,3,5-10", "5-": to the end)."""
    out: list[int] = []
    for part in spec.replace(" ", "").split(","):
        first, dash, last = part.partition("-")
        lo = int(first) if first else 1
        hi = (int(last) if last else count) if dash else lo
        out += range(lo - 1, min(hi, count))
    return out


def expand_mdbook(text: str, path: Path, root: Path, read: Callable[[Path], str | None],
                  _stack: tuple[Path, ...] = ()) -> str:
    """`text` (a Markdown file at `path`, under the ingested folder `root`) with mdBook's include
    directives replaced by the lines they select of the files they name, as mdBook renders them;
    `read` gives a file's text, or None when it cannot be read. A directive whose file is not
    there (or that names an anchor the file lacks) stays as written."""
    stack = _stack + (path,)

    def included(m: re.Match) -> str:
        kind, spec = m.group(1), m.group(2)
        name, _, selector = spec.partition(":")
        if (found := _included(name, stack, root, read)) is None:
            return m.group(0)
        target, body = found
        lines = _selected(body.replace("\r\n", "\n"), selector)
        if lines is None:
            return m.group(0)
        body = expand_mdbook("\n".join(lines), target, root, read, stack)
        return f"```rust\n{body}\n```" if kind in ("playground", "playpen") else body

    return _MDBOOK.sub(included, text)


def _selected(text: str, selector: str) -> list[str] | None:
    """The lines of an included file that an mdBook selector names ("": all, "2": line 2, "2:10",
    "::10" as ":10", "2:", or an anchor's name), anchor lines left out; None for an anchor the file
    lacks."""
    lines = text.rstrip("\n").split("\n")
    first, colon, last = selector.partition(":")
    if not all(part.isdigit() or not part for part in (first, last)):  # an anchor's name
        inside, found = [], False
        for line in lines:
            anchor = _ANCHOR.search(line)
            if anchor and anchor.group(1) == selector:
                if "ANCHOR_END" in anchor.group(0):
                    break
                found = True
            elif found:
                inside.append(line)
        lines = inside if found else None
    elif first or last:
        lo = int(first) - 1 if first else 0
        hi = lo + 1 if first and not colon else (int(last) if last else len(lines))
        lines = lines[max(lo, 0):hi]
    return None if lines is None else [line for line in lines if not _ANCHOR.search(line)]


def expand_asciidoc(text: str, path: Path, root: Path, read: Callable[[Path], str | None],
                    _stack: tuple[Path, ...] = ()) -> str:
    """`text` (an AsciiDoc file at `path`, under the ingested folder `root`) with its include
    directives replaced by the lines they select of the files they name (tag markers left out),
    their sections moved by a `leveloffset`; `read` gives a file's text, or None when it cannot be
    read. A directive whose file is not there (or that names a tag the file lacks) stays."""
    stack = _stack + (path,)
    out: list[str] = []
    for line in text.split("\n"):
        out.append(line)
        if not (m := _ASCIIDOC.match(line)):
            continue
        if (found := _included(m.group(1).strip(), stack, root, read)) is None:
            continue
        target, body = found
        options = {name: value.strip('"') for name, value in _ASCIIDOC_OPTION.findall(m.group(2))}
        if (lines := _tagged_lines(body.replace("\r\n", "\n"), options)) is not None:
            included = expand_asciidoc("\n".join(lines), target, root, read, stack)
            out[-1] = _level_offset(included, options.get("leveloffset", ""))
    return "\n".join(out)


def _tagged_lines(text: str, options: dict[str, str]) -> list[str] | None:
    """The lines of an included AsciiDoc file that `tag`/`tags` and `lines` select, tag marker lines
    left out; None when a named tag is not in the file."""
    lines = text.rstrip("\n").split("\n")
    if spec := options.get("lines"):
        picked: list[str] = []
        for part in re.split(r"[;,]", spec):
            first, dots, last = part.strip().partition("..")
            try:
                lo = int(first) - 1
                hi = (len(lines) if last.strip() == "-1" else int(last)) if dots else lo + 1
            except ValueError:
                continue
            picked += lines[max(lo, 0):hi]
        lines = picked
    names = [n for n in re.split(r"[;,]", options.get("tags", options.get("tag", ""))) if n and n[0] not in "!*"]
    if names:
        inside: list[str] = []
        found: set[str] = set()  # every tag the file marks
        open_: set[str] = set()  # the tags the current line is inside
        for line in lines:
            if marker := _ASCIIDOC_TAG.search(line):
                kind, name = marker.groups()
                (open_.add if kind == "tag" else open_.discard)(name)
                found.add(name)
            elif open_ & set(names):
                inside.append(line)
        if not set(names) & found:
            return None
        lines = inside
    return [line for line in lines if not _ASCIIDOC_TAG.search(line)]


def _level_offset(text: str, offset: str) -> str:
    """AsciiDoc `text` with its section titles moved by a relative `leveloffset` ("+1", "-1")."""
    shift = int(offset) if re.fullmatch(r"[+-]\d+", offset.strip()) else 0
    if not shift:
        return text
    out, verbatim = [], None
    for line in text.split("\n"):
        if (d := _ASCIIDOC_VERBATIM.match(line)) and (verbatim is None or d.group(1) == verbatim):
            verbatim = None if verbatim else d.group(1)
        elif verbatim is None and (m := _ASCIIDOC_SECTION.match(line)):
            line = "=" * min(max(len(m.group(1)) + shift, 1), 6) + line[len(m.group(1)):]
        out.append(line)
    return "\n".join(out)


def _titled(text: str) -> bool:
    """Whether an AsciiDoc file opens with a document title ("= Guide", or a title over a line of
    "=" as long as it), comments, attribute entries and blank lines aside."""
    lines = [line.strip() for line in text.split("\n")
             if line.strip() and not line.startswith("//") and not re.match(r":!?[\w-]+!?:", line)]
    if not lines:
        return False
    if re.match(r"=[ \t]+\S", lines[0]):
        return True
    return len(lines) > 1 and re.fullmatch(r"=+", lines[1]) is not None and abs(len(lines[1]) - len(lines[0])) <= 2
