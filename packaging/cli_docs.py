#!/usr/bin/env python3
"""The man page and the bash completion of attnscope, generated from the command line's own help.

cli_docs.py --binary B --help2man H --include STATIC.h2m --man OUT.1.gz --completion OUT.bash

Runs `B --help` and `B SUB --help` for every subcommand the first lists (CLI11's help layout: a description,
a Usage line, then groups "Heading:" of entries "  SPEC  description" whose continuation lines are indented
further). The man page is help2man's page of `B --help` plus one section per subcommand with every option,
written as help2man include text; the completion knows every subcommand, option, the options that take a
value, and the values an option lists as "a | b | c" or "a, b, c". Nothing is written by hand, so both follow
the CLI as it changes. Outputs are written only when all of it worked (gzip without a timestamp: the package
is reproducible).
"""
import argparse
import gzip
import os
import re
import subprocess
import sys
import tempfile

VALUE_TYPES = {"TEXT", "INT", "UINT", "FLOAT", "NUMBER", "FLOAT64", "INT64"}
NUMERIC_TYPES = VALUE_TYPES - {"TEXT"}
# A listed choice: lower-case words separated by " | " (two or more) or by ", " (three or more: two could be prose).
CHOICES = re.compile(r"[a-z][\w.-]*(?:(?: \| [a-z][\w.-]*)+|(?:, [a-z][\w.-]*){2,})")
# A text option whose description names a file, folder, output or output format takes a path.
PATH_WORDS = re.compile(r"FILE|folder|\bOUT\b|\bCSV\b|\bJSON\b|\.(?:png|pdf|svg|npy|h5|json|csv|toml|attnscope)\b")
STOP_WORDS = {"or", "and", "of", "the"}


def run_help(binary, *args):
    env = dict(os.environ, LC_ALL="C.UTF-8")
    env.pop("DISPLAY", None)          # the help never needs a display; make sure it never tries one
    out = subprocess.run([binary, *args, "--help"], check=True, capture_output=True, text=True, env=env)
    return out.stdout


class Entry:
    """One help entry: an option (names, value type) or a positional, with its description."""

    def __init__(self, spec, desc):
        self.spec, self.desc = spec, desc
        words = spec.split()
        self.names = [n for n in words[0].split(",") if n.startswith("-")]
        self.positional = not self.names
        kind = words[1].split("=")[0].split(":")[0] if len(words) > 1 else ""
        self.value_type = kind if kind in VALUE_TYPES else ""

    @property
    def long_name(self):
        longs = [n for n in self.names if n.startswith("--")]
        return longs[0] if longs else (self.names or [self.spec.split()[0]])[0]

    def choices(self):
        match = CHOICES.search(re.sub(r"\([^)]*\)", "", self.desc))
        if not match:
            return []
        return [w for w in re.split(r" \| |, ", match.group(0)) if w not in STOP_WORDS]


def parse_help(text):
    """(description lines, usage line, [(heading, [Entry])], trailing paragraph) of one CLI11 help text."""
    lines = text.rstrip("\n").split("\n")
    desc, usage, groups, tail = [], "", [], []
    i = 0
    while i < len(lines) and not lines[i].startswith("Usage:"):
        desc.append(lines[i])
        i += 1
    if i == len(lines):
        raise SystemExit("error: no 'Usage:' line in the help text:\n" + text)
    usage = lines[i][len("Usage: "):]
    for line in lines[i + 1:]:
        if not line.strip():
            continue
        if re.match(r"^\S.*:$", line):
            groups.append((line[:-1], []))
        elif line.startswith("   ") and groups and groups[-1][1]:
            entry = groups[-1][1][-1]
            entry.desc = (entry.desc + " " + line.strip()).strip()
        elif line.startswith("  ") and groups:
            spec, _, rest = line.strip().partition("  ")
            groups[-1][1].append(Entry(spec.strip(), rest.strip()))
        else:
            tail.append(line)
    return desc, usage, groups, " ".join(tail)


def roff(text):
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + text if text.startswith((".", "'")) else text


def man_section(subs):
    """help2man include text: one .SS per subcommand with its description, usage and options."""
    out = ["[SUBCOMMANDS IN DETAIL]",
           "Every subcommand runs headless and never needs a display. Options of each, from its --help:"]
    for name, (desc, usage, groups, _) in subs.items():
        out += [f'.SS "{roff("attnscope " + name)}"', roff(" ".join(d for d in desc if d.strip())),
                ".PP", ".B " + roff(usage)]
        for heading, entries in groups:
            out += [".PP", f".I {roff(heading)}"]
            for e in entries:
                if e.long_name in ("--help",):
                    continue
                first, _, rest = e.spec.partition(" ")
                label = ",".join(f"\\fB{roff(n)}\\fR" for n in first.split(",")) if not e.positional \
                    else f"\\fI{roff(first)}\\fR"
                out += [".TP", f"{label} {roff(rest)}".rstrip(), roff(e.desc)]
    return "\n".join(out) + "\n"


def desktop_options(tail):
    """The desktop app's options from the top-level help's "Desktop app:" paragraph: {option: takes a value}."""
    found = {}
    for m in re.finditer(r"(--[a-z][\w-]*)( [A-Z][\w.]*)?", tail):
        found[m.group(1)] = bool(m.group(2))
    return found


def completion(top, subs):
    """A self-contained bash completion function (no bash-completion helpers needed)."""
    _, _, top_groups, top_tail = top
    top_opts = {e.long_name: False for _, es in top_groups for e in es if not e.positional}
    top_opts.update(desktop_options(top_tail))
    figure_views = []
    for _, es in subs.get("figure", (None, None, [], None))[2]:
        figure_views += [c for e in es if e.long_name == "--view" for c in e.choices()]
    cases, value_cases = [], []
    for name, (_, _, groups, _) in subs.items():
        entries = [e for _, es in groups for e in es if not e.positional]
        cases.append(f'        {name}) opts="{" ".join(sorted(n for e in entries for n in e.names))}" ;;')
        for e in entries:
            if not e.value_type:
                continue
            pattern = "|".join(f"{name}:{n}" for n in e.names)
            value_cases.append(f"        {pattern}) {value_action(e)} ;;")
    for opt, takes in top_opts.items():
        if takes:
            words = " ".join(figure_views) if opt == "--view" else ""
            value_cases.append(f'        :{opt}) {words_action(words, files=not words)} ;;')
    return COMPLETION_TEMPLATE.format(
        subcommands=" ".join(subs), top_opts=" ".join(sorted(top_opts)),
        cases="\n".join(cases), value_cases="\n".join(value_cases))


def value_action(entry):
    if entry.value_type in NUMERIC_TYPES:
        return "return"                              # a number: nothing to offer
    words = " ".join(entry.choices())
    return words_action(words, files=bool(PATH_WORDS.search(entry.desc)))


def words_action(words, files):
    if not words and not files:
        return "return"
    parts = []
    if words:
        parts.append(f'COMPREPLY+=($(compgen -W "{words}" -- "$cur"))')
    if files:
        parts.append('_attnscope_files "$cur"')
    return "; ".join(parts + ["return"])


COMPLETION_TEMPLATE = r"""# bash completion for attnscope. Generated from `attnscope --help` and every subcommand's --help by
# packaging/cli_docs.py; do not edit. Self-contained: it needs no helpers from the bash-completion package.

_attnscope_files()
{{
    local IFS=$'\n'
    compopt -o filenames 2>/dev/null
    COMPREPLY+=($(compgen -f -- "$1"))
}}

_attnscope()
{{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}}
    local subcommands="{subcommands}"
    local sub="" opts i
    COMPREPLY=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [[ " $subcommands " == *" ${{COMP_WORDS[i]}} "* ]]; then
            sub=${{COMP_WORDS[i]}}
            break
        fi
    done
    # The value of the option just typed
    case "$sub:$prev" in
{value_cases}
    esac
    case "$sub" in
{cases}
        *) opts="{top_opts}" ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    elif [[ -z $sub ]]; then
        COMPREPLY=($(compgen -W "$subcommands" -- "$cur"))
        _attnscope_files "$cur"
    else
        _attnscope_files "$cur"
    fi
}}
complete -F _attnscope attnscope
"""


def write_atomic(path, data, gz=False):
    folder = os.path.dirname(os.path.abspath(path))
    with tempfile.NamedTemporaryFile("wb", dir=folder, delete=False) as tmp:
        if gz:
            with gzip.GzipFile(filename="", mode="wb", fileobj=tmp, mtime=0, compresslevel=9) as z:
                z.write(data)
        else:
            tmp.write(data)
    os.chmod(tmp.name, 0o644)
    os.replace(tmp.name, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--help2man", required=True)
    ap.add_argument("--include", required=True, help="hand-written help2man sections")
    ap.add_argument("--man", required=True, help="output: the gzipped man page")
    ap.add_argument("--completion", required=True, help="output: the bash completion script")
    args = ap.parse_args()

    top = parse_help(run_help(args.binary))
    sub_group = [es for heading, es in top[2] if heading == "Subcommands"]
    if not sub_group:
        raise SystemExit("error: `attnscope --help` lists no Subcommands group")
    subs = {e.spec: parse_help(run_help(args.binary, e.spec)) for e in sub_group[0]}

    with tempfile.TemporaryDirectory() as tmp:
        include = os.path.join(tmp, "subcommands.h2m")
        with open(include, "w") as f:
            f.write(man_section(subs))
        page = os.path.join(tmp, "attnscope.1")
        subprocess.run([args.help2man, "--no-info", "--section=1",
                        "--name=measure softmax, linear and MHLA attention on model activations",
                        f"--include={args.include}", f"--include={include}", f"--output={page}",
                        args.binary], check=True, env=dict(os.environ, LC_ALL="C.UTF-8"))
        with open(page, "rb") as f:
            man = f.read()
    write_atomic(args.man, man, gz=True)
    write_atomic(args.completion, completion(top, subs).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
