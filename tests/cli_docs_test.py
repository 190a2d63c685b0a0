#!/usr/bin/env python3
"""docs/cli.md shows each program's --help exactly as the program prints it: the fenced
block after the line "<!-- PROGRAM --help -->". A difference fails, shown as a diff;
--write puts the programs' --help into the file instead.

usage: cli_docs_test.py DOCS_CLI_MD PROGRAM... [--write]
"""
import difflib
import pathlib
import re
import subprocess
import sys


def main():
    write = "--write" in sys.argv
    docs, programs = pathlib.Path(sys.argv[1]), [a for a in sys.argv[2:] if a != "--write"]
    text = docs.read_text()
    failed = False
    for program in programs:
        name = pathlib.Path(program).name
        printed = subprocess.run([program, "--help"], capture_output=True, text=True, check=True).stdout
        block = re.compile(r"(<!-- " + re.escape(name) + r" --help -->\n```\n)(.*?)(```\n)", re.S)
        found = block.search(text)
        if not found:
            print(f"{docs} has no block of {name} --help (a line <!-- {name} --help --> before a fenced block)")
            failed = True
            continue
        if write:
            text = text[:found.start(2)] + printed + text[found.end(2):]
        elif found.group(2) != printed:
            print(f"{docs}: the block of {name} --help differs from what it prints (run with --write to update):")
            sys.stdout.writelines(difflib.unified_diff(found.group(2).splitlines(True), printed.splitlines(True),
                                                       f"{docs}", f"{name} --help"))
            failed = True
    if write:
        docs.write_text(text)
    elif not failed:
        print(f"{docs} shows the --help of {', '.join(pathlib.Path(p).name for p in programs)} as printed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
