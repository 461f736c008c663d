"""Shared by the check_*.py scripts: run attnscope collecting what goes wrong, and report at the end."""
import os
import subprocess
import sys


def runner(binary, problems, label=""):
    """run(args): attnscope's stdout, or None after adding `label`, the arguments, the exit status and
    stderr to `problems` when it exits non-zero."""

    def run(args):
        p = subprocess.run([binary] + args, capture_output=True, text=True)
        if p.returncode != 0:
            problems.append(f"{label}{' '.join(args)} exited {p.returncode}: {p.stderr.strip()}")
            return None
        return p.stdout

    return run


def report(problems):
    """One FAIL line per problem; exit status 1 when there are any, else 0."""
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


def torch_or_skip():
    """PyTorch, with tools/python (the bridge and the reference layers) on the import path; exit 77 (a skip:
    the GoogleTest wrappers check before running a script, this is for direct runs) when torch is missing."""
    try:
        import torch
    except ImportError as e:
        print(f"SKIP: torch is not importable ({e}); apt-get install python3-torch")
        sys.exit(77)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "python"))
    return torch
