#!/usr/bin/python3
"""Lists every function body longer than a limit (100 lines by default) in core/, app/ and widgets/.

A brace-matching scan, not a parser: comments, string and character literals are blanked first, then every
`{` whose preceding text ends like a function head (a `)` optionally followed by qualifiers such as `const`,
`noexcept`, `override`, `-> Type` or a constructor's member initialisers) opens a function body, and the
matching `}` closes it. Lambdas inside a function count towards that function; a lambda at namespace scope
counts on its own. The length is the number of lines from the line of the opening brace to the line of the
closing one, inclusive, so a body of 100 lines between two braces on their own lines is 102.

    tools/long_functions.py [--limit N] [DIR ...]     (default DIRs: core app widgets)

Prints `file:line  length  name` for each, longest first, then a count. Exit status 0 always.
"""
import argparse
import os
import re
import sys

HEAD_QUALIFIERS = re.compile(
    r"\)\s*(?:const\b|noexcept\b(?:\s*\([^()]*\))?|override\b|final\b|mutable\b|volatile\b|&&|&|"
    r"->\s*[\w:<>,\s*&]+?|\s)*$"
)
# A head still inside a constructor's initialiser list (`) : a(x), b`) or an `=`: the brace initialises.
BRACE_INIT = re.compile(r"(?:\)\s*(?:noexcept\s*)?:(?!:)[^;]*[\w>]|=)$", re.S)
CONTROL = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignof", "static_assert"}


def blank_comments_and_literals(text):
    """Replaces comments and string/char literal contents by spaces, keeping newlines (so line numbers hold)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^()\\\s]{0,16})\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + "".join(ch if ch == "\n" else " " for ch in text[i + 2:j]))
            i = j
        elif c in "\"'":
            # A digit separator (1'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * max(0, j - i - 2) + (c if j - i >= 2 else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_initialisers(head):
    """Drops a constructor's member-initialiser list (`) : a_(x), b_{y}`) so the head ends at its `)`."""
    depth = 0
    for k in range(len(head) - 1, -1, -1):
        ch = head[k]
        if ch in ")}":
            depth += 1
        elif ch in "({":
            depth -= 1
        elif ch == ":" and depth == 0:
            if k > 0 and head[k - 1] == ":" or k + 1 < len(head) and head[k + 1] == ":":
                continue
            before = head[:k].rstrip()
            if before.endswith(")") or re.search(r"\)\s*(?:noexcept|const)\s*$", before):
                return before
            return head
    return head


def function_name(head):
    """The identifier before the parameter list that closes `head`, or '' when it is not a function head."""
    head = strip_initialisers(head)
    m = HEAD_QUALIFIERS.search(head)
    if not m:
        return ""
    close = m.start()
    depth = 0
    for k in range(close, -1, -1):
        if head[k] == ")":
            depth += 1
        elif head[k] == "(":
            depth -= 1
            if depth == 0:
                if head[:k].rstrip().endswith("]"):
                    return "lambda"
                nm = re.search(r"([~\w:]+(?:<[^<>]*>)?|operator\s*[^\s(]+)\s*$", head[:k])
                if not nm:
                    return ""
                name = nm.group(1)
                last = name.split("::")[-1]
                if last in CONTROL or (last == "" and not name.startswith("operator")):
                    return ""
                return name
    return ""


def scan(path, limit):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = blank_comments_and_literals(f.read())
    found = []
    stack = []  # one entry per open brace: (is_function_body, name, line)
    inside_function = 0
    last_stop = 0
    line = 1
    for i, ch in enumerate(text):
        if ch == "\n":
            line += 1
        elif ch == "{":
            head = text[last_stop:i].rstrip()
            if not inside_function and BRACE_INIT.search(head):
                # A member initialiser `m_x{...}` or `= {...}`: part of the head, not a body.
                stack.append(("init", "", line))
                continue
            name = "" if inside_function else function_name(head)
            stack.append(("fn" if name else "block", name, line))
            if name:
                inside_function += 1
            last_stop = i + 1
        elif ch == "}":
            if stack:
                kind, name, start = stack.pop()
                if kind == "init":
                    continue
                if kind == "fn":
                    inside_function -= 1
                    if line - start + 1 > limit:
                        found.append((path, start, line - start + 1, name))
            last_stop = i + 1
        elif ch == ";":
            last_stop = i + 1
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("dirs", nargs="*", default=["core", "app", "widgets"])
    args = ap.parse_args()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    os.chdir(root)
    found = []
    for d in args.dirs:
        for dirpath, _, files in os.walk(d):
            for fn in sorted(files):
                if fn.endswith((".cpp", ".h")):
                    found += scan(os.path.join(dirpath, fn), args.limit)
    found.sort(key=lambda r: (-r[2], r[0], r[1]))
    for path, start, length, name in found:
        print(f"{path}:{start}  {length}  {name}")
    print(f"{len(found)} function(s) over {args.limit} lines in {' '.join(args.dirs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
