#!/usr/bin/env python3
"""Names that two files of one batched target declare in their anonymous
namespaces.

The library and the benchmarks are compiled a few files per translation
unit (MCPRT_BATCH, cmake/MCPRTBatch.cmake). Two files that declare the same
name at the top of an anonymous namespace then share it: the same signature
fails to compile, but an overload with another signature can be picked
silently by the other file's calls (shown(std::string_view) in one file lost
to shown(const std::string&) in another). This check fails on any such
name, whichever files a batch happens to group.

  scripts/check-anonymous-names.py [CHECKOUT]

Aliases (`using x = ...;`, `namespace x = ...;`) are left out: declaring
one twice is allowed only when both name the same thing, and otherwise
the batch does not compile.

The reading is lexical, not a C++ parser: comments, string and character
literals are blanked, braces are counted, and a declaration is what ends
in ';' or opens a '{' directly inside `namespace {`.
"""

import collections
import pathlib
import re
import sys

# The batched targets: each group is compiled together in some grouping.
GROUPS = {
    "mcprt_core": ["core/*.cpp"],
    "mcprt_io": ["io/*.cpp"],
    "mcprt_actors": ["messages/*.cpp", "actors/*.cpp", "pool/*.cpp"],
    "mcprt_runtime": ["mcprt/*.cpp"],
    "mcprt_daemon and mcprt": ["cli/*.cpp"],
    "mcprt-bench": ["bench/*.cpp"],
}

LITERAL = re.compile(r'"(?:\\.|[^"\\\n])*"' + r"|'(?:\\.|[^'\\\n])*'")


def blank(text):
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r'R"([^(\s]*)\(.*?\)\1"', '""', text, flags=re.S)
    text = LITERAL.sub('""', text)
    return "\n".join(line for line in text.split("\n") if not line.lstrip().startswith("#"))


def declared_name(statement):
    s = " ".join(statement.split())
    s = re.sub(r"^template\s*<[^{;]*?>\s*", "", s)
    if not s or s.startswith("using ") or s.startswith("namespace ") or s.startswith("static_assert"):
        return None
    m = re.match(r"(?:struct|class|union|enum(?:\s+class)?)\s+(\w+)", s)
    if m:
        return m.group(1)
    head = s.split("=")[0]
    if "(" in head:
        # A function: the name right before its parameter list.
        m = re.search(r"(operator\s*[^\s(]+|~?\w+)\s*$", head.split("(")[0])
        return m.group(1).replace(" ", "") if m else None
    m = re.search(r"(\w+)\s*(?:\[[^\]]*\])?\s*$", head)
    return m.group(1) if m else None


def anonymous_names(path):
    names = set()
    depth = 0
    anonymous = []  # depths of the open anonymous namespaces' bodies
    statement = ""
    for token in re.split(r"([{};])", blank(path.read_text())):
        at_top = bool(anonymous) and depth == anonymous[-1]
        if token == "{":
            if re.search(r"\bnamespace\s*$", statement):
                anonymous.append(depth + 1)
            elif at_top:
                name = declared_name(statement)
                if name:
                    names.add(name)
            depth += 1
            statement = ""
        elif token == "}":
            if at_top:
                anonymous.pop()
            depth -= 1
            statement = ""
        elif token == ";":
            if at_top:
                name = declared_name(statement)
                if name:
                    names.add(name)
            statement = ""
        else:
            statement += token
    return names


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    clashes = 0
    for target, patterns in GROUPS.items():
        files = sorted(p for pattern in patterns for p in root.glob(pattern))
        owners = collections.defaultdict(list)
        for f in files:
            for name in anonymous_names(f):
                owners[name].append(str(f.relative_to(root)))
        for name, where in sorted(owners.items()):
            if len(where) > 1:
                clashes += 1
                print(f"{target}: '{name}' is declared in the anonymous namespaces of {', '.join(where)}")
    if clashes:
        print(f"{clashes} name(s) shared between files that are compiled together; "
              "name each helper for its file (CONTRIBUTING.md)")
        return 1
    print("no name is shared between the anonymous namespaces of files compiled together")
    return 0


if __name__ == "__main__":
    sys.exit(main())
