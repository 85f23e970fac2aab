#!/usr/bin/env python3
"""Production functions longer than the style limit (120 lines), for CI.

The project caps a production function at 120 lines, so that each one reads as a few named steps (a
longer one is cut into functions that name them). This script measures every `fn` under `src/` of every
workspace crate (`*/src/**/*.rs`; the fuzz workspace included), counting a function's lines from the line
of its `fn` keyword to the line of its closing brace. Test code is skipped: items under `#[cfg(test)]`
(inline `mod tests { … }` blocks and functions) and files a `#[cfg(test)] mod name;` declaration pulls
in. Comments, string, raw-string and char literals are blanked before the braces are matched, so a `{`
inside a string or a doc comment does not count.

Usage: python3 scripts/long-functions.py [--limit N] [--all] [ROOT]
  (ROOT defaults to the repository root; --all lists every function over the limit AND the ten longest;
  exit 1 when some production function is over the limit, printing `path:line name lines` for each)
"""
import os
import re
import sys

LIMIT = 120


def blank_literals(text):
    """The source with comments and string/char literals replaced by spaces (newlines kept), so braces
    and `fn` keywords found afterwards are code."""
    out = []
    i, n = 0, len(text)

    def blank(segment):
        out.append("".join("\n" if c == "\n" else " " for c in segment))

    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(text[i:end])
            i = end
        elif c == "/" and nxt == "*":
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(text[i:j])
            i = j
        elif raw := re.match(r'b?r(#*)"', text[i:i + 260]) if c in "rb" and not _ident_before(text, i) else None:
            closing = '"' + raw.group(1)
            end = text.find(closing, i + raw.end())
            end = n if end < 0 else end + len(closing)
            blank(text[i:end])
            i = end
        elif c == '"' or (c == "b" and nxt == '"' and not _ident_before(text, i)):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            blank(text[i:j + 1])
            i = j + 1
        elif c == "'":
            char = re.match(r"'(\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])'", text[i:i + 16], re.S)
            if char:
                blank(char.group(0))
                i += char.end()
            else:  # a lifetime or label
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _ident_before(text, i):
    """Whether the character before `i` continues an identifier (so `r"` there is not a raw string)."""
    return i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")


def matching_brace(code, open_at):
    """The index of the `}` closing the `{` at `open_at` (or the end of the text)."""
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


CFG_TEST = re.compile(r"#\[cfg\(test\)\]")
ITEM_AFTER_ATTRS = re.compile(r"(\s*#\[[^\]]*\])*\s*(pub(\([^)]*\))?\s+)?(?P<kind>mod|fn|impl|async|const|unsafe)\b")
MOD_DECL = re.compile(r"(\s*#\[[^\]]*\])*\s*(pub(\([^)]*\))?\s+)?mod\s+(?P<name>\w+)\s*(?P<end>[;{])")
FN = re.compile(r"\bfn\s+(?P<name>\w+)")


def test_ranges_and_files(code, path):
    """Character ranges of `#[cfg(test)]` items in `code`, and the paths of files that `#[cfg(test)] mod
    name;` declarations in it pull in."""
    ranges, files = [], []
    for attr in CFG_TEST.finditer(code):
        decl = MOD_DECL.match(code, attr.end())
        if decl and decl.group("end") == ";":
            files.extend(module_files(path, decl.group("name")))
            continue
        if not ITEM_AFTER_ATTRS.match(code, attr.end()):
            continue
        open_at = code.find("{", attr.end())
        semi = code.find(";", attr.end())
        if open_at < 0 or (0 <= semi < open_at and not decl):
            continue
        ranges.append((attr.start(), matching_brace(code, open_at)))
    return ranges, files


def module_files(path, name):
    """Where `mod name;` declared in `path` lives: `name.rs` or `name/mod.rs` next to a `lib.rs`,
    `main.rs` or `mod.rs`, else in the folder named after the declaring file."""
    folder = os.path.dirname(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem not in ("lib", "main", "mod"):
        folder = os.path.join(folder, stem)
    return [os.path.normpath(os.path.join(folder, name + ".rs")),
            os.path.normpath(os.path.join(folder, name, "mod.rs"))]


def function_lengths(path, text):
    """(line, name, lines) of every function with a body outside test code, and the test-only files
    this file declares."""
    code = blank_literals(text)
    ranges, test_files = test_ranges_and_files(code, path)
    found = []
    for fn in FN.finditer(code):
        if any(start <= fn.start() <= end for start, end in ranges):
            continue
        open_at = code.find("{", fn.end())
        semi = code.find(";", fn.end())
        if open_at < 0 or 0 <= semi < open_at:
            continue  # a declaration without a body (trait method, extern fn)
        close = matching_brace(code, open_at)
        first = code.count("\n", 0, fn.start()) + 1
        last = code.count("\n", 0, close) + 1
        found.append((first, fn.group("name"), last - first + 1))
    return found, test_files


def source_files(root):
    """Every `.rs` file under a `src/` folder of a crate below `root` (target folders skipped)."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ("target", ".git", "node_modules") and not d.startswith("target")]
        rel = os.path.relpath(dirpath, root).split(os.sep)
        if "src" not in rel:
            continue
        for name in filenames:
            if name.endswith(".rs"):
                yield os.path.normpath(os.path.join(dirpath, name))


def main():
    args = sys.argv[1:]
    if any(a in ("-h", "--help") for a in args):
        print(__doc__)
        return 0
    limit = LIMIT
    if "--limit" in args:
        at = args.index("--limit")
        limit = int(args[at + 1])
        del args[at:at + 2]
    show_all = "--all" in args
    args = [a for a in args if a != "--all"]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    files = sorted(source_files(root))
    test_only, measured = set(), []
    for path in files:
        with open(path, encoding="utf-8") as source:
            found, test_files = function_lengths(path, source.read())
        test_only.update(test_files)
        measured.extend((path, line, name, lines) for line, name, lines in found)
    measured = [m for m in measured if m[0] not in test_only]
    offenders = sorted((m for m in measured if m[3] > limit), key=lambda m: -m[3])
    for path, line, name, lines in offenders:
        print(f"{os.path.relpath(path, root)}:{line} {name} {lines}")
    if show_all:
        print("-- longest --")
        for path, line, name, lines in sorted(measured, key=lambda m: -m[3])[:10]:
            print(f"{os.path.relpath(path, root)}:{line} {name} {lines}")
    if offenders:
        print(f"{len(offenders)} function(s) over {limit} lines (the project's limit: {LIMIT})",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
