"""tools/docs_test.py fails when a block fails or a shown output differs, refuses untagged blocks, and
--regenerate rewrites only the shown outputs (issue 36). Runs the harness on small repositories made here."""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "tools" / "docs_test.py"
BUILD = os.environ["ATTNSCOPE_BUILD_DIR"]


def repo(readme, docs=None):
    root = Path(tempfile.mkdtemp(prefix="docs-harness-"))
    (root / "docs").mkdir()
    (root / "README.md").write_text(textwrap.dedent(readme))
    for name, text in (docs or {}).items():
        (root / "docs" / name).write_text(textwrap.dedent(text))
    return root


def run(root, *extra):
    return subprocess.run([sys.executable, str(HARNESS), "--root", str(root), "--build", BUILD, *extra],
                          capture_output=True, text=True, timeout=300)


class Harness(unittest.TestCase):
    def test_passing_blocks_and_outputs(self):
        root = repo("""\
            ```sh
            export GREETING=hello
            echo "$GREETING world"
            attnscope --version > /dev/null
            ```

            <!-- docs-test: output -->
            ```text
            hello world
            ```

            ```python
            value = 6 * 7
            ```

            ```python
            print(value)
            ```

            <!-- docs-test: output -->
            ```text
            42
            ```

            ```console
            $ echo "$GREETING again"
            hello again
            ```
            """)
        r = run(root)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("4 blocks run, 0 skipped (marked, with reasons), 3 outputs compared, 0 failed", r.stdout)

    def test_a_failing_command_fails(self):
        root = repo("```sh\ntrue\nfalse\necho never\n```\n")
        r = run(root)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("README.md:1: the sh block failed (status 1)", r.stderr)

    def test_a_python_exception_fails(self):
        root = repo("```python\nraise ValueError('broken example')\n```\n")
        r = run(root)
        self.assertEqual(r.returncode, 1)
        self.assertIn("broken example", r.stderr)

    def test_a_different_output_fails_and_regenerate_rewrites_it(self):
        text = "Before.\n\n```sh\necho new line\n```\n\n<!-- docs-test: output -->\n```text\nold line\n```\n\nAfter.\n"
        root = repo(text)
        r = run(root)
        self.assertEqual(r.returncode, 1)
        self.assertIn("-old line", r.stderr)
        self.assertIn("+new line", r.stderr)
        r = run(root, "--regenerate")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual((root / "README.md").read_text(), text.replace("old line", "new line"))
        self.assertEqual(run(root).returncode, 0)

    def test_console_lines_are_compared(self):
        root = repo("```console\n$ echo one\none\n$ echo two\nthree\n```\n")
        r = run(root)
        self.assertEqual(r.returncode, 1)
        self.assertIn("`$ echo two` prints other lines than shown", r.stderr)

    def test_sudo_is_not_there(self):
        r = run(repo("```sh\nsudo true\n```\n"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("a block used sudo", r.stderr)

    def test_untagged_blocks_are_refused(self):
        r = run(repo("```\nattnscope info x.h5\n```\n"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("README.md:1: a code block without a language", r.stderr)

    def test_a_skip_needs_its_reason_and_is_not_run(self):
        r = run(repo("<!-- docs-test: skip -->\n```sh\nfalse\n```\n"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("needs its reason", r.stdout + r.stderr)
        r = run(repo("<!-- docs-test: skip it needs a cluster; really -->\n```sh\nfalse\n```\n"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("0 blocks run, 1 skipped", r.stdout)

    def test_a_block_runs_in_a_copy(self):
        root = repo("```sh\necho written > README.md\nrm -rf docs\n```\n", {"x.md": "Nothing to run.\n"})
        before = (root / "README.md").read_text()
        r = run(root)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual((root / "README.md").read_text(), before)
        self.assertTrue((root / "docs" / "x.md").exists())

    def test_a_time_out_fails(self):
        r = run(repo("<!-- docs-test: timeout 2 -->\n```sh\nsleep 30\n```\n"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("timed out after 2 s", r.stderr)


if __name__ == "__main__":
    unittest.main()
