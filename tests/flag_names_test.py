#!/usr/bin/env python3
"""Each flag of the programs is declared once: its name appears as a string literal in
exactly one place under tools/ (its row in a settings table, or CLI11's --version), and
messages, texts and checkpoint keys name it through that row (flag(&Config::warmup)).

A literal names flag NAME when it is exactly "NAME", or holds "--NAME", "config.NAME" or
"run.NAME" as a whole word. The flags are those the programs' --help list.

usage: flag_names_test.py TOOLS_DIR PROGRAM...
"""
import pathlib
import re
import subprocess
import sys

# Literals that happen to spell a flag's name without naming the flag, each allowed in one
# file's exact code, with why. The JSON lines' keys are the PyTorch reference trainers'
# (../shared/bench/torch_reference.py, torch_lm_reference.py): the comparison with them
# needs those keys, and "steps", "lr", "batch", ... are also flags' names.
ALLOWED = [
    ("train/trainer.cpp", '{"task", c_.task}', "the final metrics line's key"),
    ("train/trainer.cpp", '{"steps", step}', "the final metrics line's key"),
    ("train/report.cpp", 'line["lr"]', "the metrics line's key"),
    ("bench/main.cpp", '{"config", name}', "the benchmark line's key"),
    ("bench/main.cpp", '{"batch", c.batch}', "the benchmark line's key"),
    ("bench/main.cpp", '{"heads", c.heads}', "the benchmark line's key"),
    ("bench/main.cpp", '{"layers", c.layers}', "the benchmark line's key"),
    ("bench/main.cpp", '{"vocab", c.vocab}', "the benchmark line's key"),
    ("bench/main.cpp", '{"threads", threads}', "the benchmark lines' key"),
    ("bench/main.cpp", '{"steps", steps}', "the benchmark lines' key"),
    ("bench/main.cpp", 'line["precision"]', "the benchmark line's key"),
    ("bench/main.cpp", '{"config", "allreduce"}', "the benchmark line's key"),
    ("bench/main.cpp", '{"config", "allreduce_overlap"}', "the benchmark line's key"),
    ("bench/main.cpp", '{"config", "sgemm"}', "the benchmark line's key"),
    ("bench/main.cpp", '{"config", "overhead"}', "the benchmark line's key"),
    ("bench/main.cpp", '{"config", "optimizers"}', "the benchmark line's key"),
    ("bench/main.cpp", '{"model", "lm"}', "the overlap benchmark line's key"),
    # The profiler's kind of span (xgrad::ProfileSpan::kind), coloured and named in the timeline.
    ("common/timeline.cpp", '{"optimizer", {214, 39, 40}}', "a span kind's colour"),
    ("common/timeline.cpp", '"engine", "optimizer", "pool wait"', "the legend's span kinds"),
    # A checkpoint's lm.tokenizer.special: JSON objects {"text": ..., "id": ...}.
    ("common/tokenizer_files.cpp", '{"text", token.text}', "a special token's key in lm.tokenizer.special"),
    ("common/tokenizer_files.cpp", 'token.at("text")', "a special token's key in lm.tokenizer.special"),
    # What a language model's counts count, in reports ("300 tokens").
    ("common/language_data.cpp", 'return "tokens";', "the unit of a sample's length"),
    ("common/trained_model.hpp", 'tokenizer ? "tokens" : "bytes"', "the unit of xgrad-generate's speed line"),
]
# Declared by CLI11 itself (no literal in tools/).
BUILT_IN = {"help"}


def string_literals(code):
    """(offset, line, text) of every string literal; adjacent literals ("a" "b") are one."""
    found, i, line, joinable = [], 0, 1, False
    while i < len(code):
        c = code[i]
        if code.startswith("//", i):
            i = code.find("\n", i)
            i = len(code) if i < 0 else i
        elif code.startswith("/*", i):
            end = code.index("*/", i + 2) + 2
            line += code.count("\n", i, end)
            i = end
        elif c == "\n":
            line, i = line + 1, i + 1
        elif c.isspace():
            i += 1
        elif c == '"' or (c == "R" and code.startswith('R"', i) and not (i and (code[i - 1].isalnum() or code[i - 1] == "_"))):
            start, start_line = i, line
            if c == "R":  # R"delimiter(...)delimiter"
                open_paren = code.index("(", i)
                close = ")" + code[i + 2:open_paren] + '"'
                end = code.index(close, open_paren) + len(close)
                text = code[open_paren + 1:end - len(close)]
            else:
                j, text = i + 1, []
                while code[j] != '"':
                    if code[j] == "\\":
                        text.append({"n": "\n", "t": "\t"}.get(code[j + 1], code[j + 1]))
                        j += 2
                    else:
                        text.append(code[j])
                        j += 1
                end, text = j + 1, "".join(text)
            line += code.count("\n", i, end)
            if joinable:
                offset, first_line, before = found.pop()
                found.append((offset, first_line, before + text))
            else:
                found.append((start, start_line, text))
            i, joinable = end, True
        elif c == "'" and not (i and code[i - 1].isalnum()):  # a character, not a digit separator
            j = i + 1
            while code[j] != "'":
                j += 2 if code[j] == "\\" else 1
            i, joinable = j + 1, False
        else:
            i, joinable = i + 1, False
    return found


def names_in(text, flags):
    """The flags a literal names."""
    named = {text} & flags
    for match in re.finditer(r"(?:--|(?<![\w.-])(?:config|run)\.)([a-z0-9][a-z0-9-]*)(?![\w-])", text):
        if match.group(1) in flags:
            named.add(match.group(1))
    return named


def check_the_check():
    """The scan finds what it must, and only that (a fixture, not the tree)."""
    flags = {"warmup", "seq-len", "steps", "lr", "eval-every"}
    code = ('throw Error("--warmup must be below " "--steps");  // "--lr" in a comment\n'
            'm["config.lr"] = x; given.count("seq-len"); c = \'"\'; n = 1\'000;\n'
            'ok("--seq-lenx", "steps per epoch", "lr2", "--eval-every=5", R"x(run.seq-len)x");\n')
    named = [sorted(names_in(text, flags)) for _, _, text in string_literals(code)]
    expected = [["steps", "warmup"], ["lr"], ["seq-len"], [], [], [], ["eval-every"], ["seq-len"]]
    if named != expected:
        sys.exit(f"the scan is broken: found {named}, expected {expected}")


def main():
    check_the_check()
    tools, programs = pathlib.Path(sys.argv[1]), sys.argv[2:]
    flags = set()
    for program in programs:
        help_text = subprocess.run([program, "--help"], capture_output=True, text=True, check=True).stdout
        flags |= set(re.findall(r"^  (?:-\w,)?--([a-z0-9-]+)", help_text, re.M))
    if len(flags) < 40:
        sys.exit(f"only {len(flags)} flags found in the --help of {programs}")
    places, problems = {name: [] for name in flags}, []
    used_allowances = set()
    for path in sorted(p for p in tools.rglob("*") if p.suffix in (".cpp", ".hpp")):
        code, relative = path.read_text(), str(path.relative_to(tools))
        allowed = []
        for file, snippet, _ in ALLOWED:
            if file != relative:
                continue
            for match in re.finditer(re.escape(snippet), code):
                allowed.append((match.start(), match.end()))
                used_allowances.add((file, snippet))
        for offset, line, text in string_literals(code):
            if any(start <= offset < end for start, end in allowed):
                continue
            for name in names_in(text, flags):
                places[name].append(f"{relative}:{line}: {text[:70]!r}")
    for file, snippet, _ in ALLOWED:
        if (file, snippet) not in used_allowances:
            problems.append(f"the allowance for {snippet} in tools/{file} matches nothing: remove it")
    for name in sorted(flags):
        expected = 0 if name in BUILT_IN else 1
        if len(places[name]) != expected:
            problems.append(f"--{name} is written in {len(places[name])} places, not {expected}:\n    " +
                            "\n    ".join(places[name] or ["(nowhere: where is it declared?)"]))
    print(f"{len(flags)} flags of {len(programs)} programs, each declared once" if not problems else "")
    if problems:
        sys.exit("\n".join(problems))


if __name__ == "__main__":
    main()
