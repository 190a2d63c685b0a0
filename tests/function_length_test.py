#!/usr/bin/env python3
"""No function in the programs' sources is longer than LIMIT lines, from the first line
of its signature to its closing brace (lambdas count in the function around them; a
lambda outside any function, as in a table's rows, is measured on its own).

The scan matches braces in clang-formatted C++ with comments, strings and characters
blanked out: a brace at namespace or class scope (or inside a table's initializer) opens
a function when what comes before it, back to the last ; { or }, ends with a parameter
list (and qualifiers: const, noexcept, override, a return type after ->).

usage: function_length_test.py LIMIT DIR...
"""
import pathlib
import re
import sys

QUALIFIERS = re.compile(r"(\s*(const|noexcept|override|final|mutable|&&?|->\s*[\w:<>,*&\s]+?))*\s*$")


def blanked(code):
    """`code` with comments, string and character literals replaced by spaces (line breaks kept)."""
    out, i = [], 0
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|R"([^(\s]*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|(?<![\w])\'(?:\\.|[^\'\\\n])*\'',
                         re.S)
    for match in pattern.finditer(code):
        out.append(code[i:match.start()])
        out.append(re.sub(r"[^\n]", " ", match.group(0)))
        i = match.end()
    out.append(code[i:])
    return "".join(out)


def opens_function(head):
    head = QUALIFIERS.sub("", head)
    return head.endswith(")") or head.endswith("]")


def opens_scope(head):
    return re.search(r"\b(namespace|class|struct|union|enum)\b|\bextern\s*$", head) and "=" not in head


def name_of(head):
    head = QUALIFIERS.sub("", head)
    if head.endswith("]"):
        return "a lambda"
    depth, i = 0, len(head) - 1
    while i >= 0:  # back to the '(' that opens the parameter list
        depth += {")": 1, "(": -1}.get(head[i], 0)
        if depth == 0:
            break
        i -= 1
    match = re.search(r"([\w:~]+(?:operator\s*\S+?)?)\s*(?:<[^<>]*>)?\s*$", head[:i])
    return match.group(1) if match else "a lambda"


def functions(code):
    """(name, first line, last line) of every function."""
    code = blanked(code)
    found, stack, head_start = [], [], 0  # stack: (kind, head start offset, head)
    for i, c in enumerate(code):
        if c in ";{}":
            inside_function = any(kind == "function" for kind, _, _ in stack)
            if c == "{":
                head = code[head_start:i].strip()
                if inside_function:
                    kind = "block"
                elif opens_function(head):
                    kind = "function"
                elif opens_scope(head) and not any(kind == "data" for kind, _, _ in stack):
                    kind = "scope"
                else:
                    kind = "data"  # an initializer (a table of rows) or a braced value
                start = head_start + len(code[head_start:i]) - len(code[head_start:i].lstrip())
                stack.append((kind, start, head))
            elif c == "}" and stack:
                kind, start, head = stack.pop()
                if kind == "function" and not any(k == "function" for k, _, _ in stack):
                    found.append((name_of(head), code.count("\n", 0, start) + 1, code.count("\n", 0, i) + 1))
            head_start = i + 1
        elif c == "," and stack and stack[-1][0] == "data":
            head_start = i + 1  # a table's next row
    return found


def main():
    limit, folders = int(sys.argv[1]), sys.argv[2:]
    measured = []
    for folder in folders:
        for path in sorted(p for p in pathlib.Path(folder).rglob("*") if p.suffix in (".cpp", ".hpp")):
            for name, first, last in functions(path.read_text()):
                measured.append((last - first + 1, f"{path}:{first}", name))
    if len(measured) < 100:
        sys.exit(f"only {len(measured)} functions found in {folders}: the scan is broken")
    measured.sort(reverse=True)
    too_long = [m for m in measured if m[0] > limit]
    lines, where, name = measured[0]
    print(f"{len(measured)} functions; the longest: {name} ({where}), {lines} lines")
    if too_long:
        sys.exit(f"functions over {limit} lines:\n" + "\n".join(f"  {w}: {n}, {l} lines" for l, w, n in too_long))


if __name__ == "__main__":
    main()
