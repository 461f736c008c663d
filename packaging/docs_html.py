#!/usr/bin/env python3
"""The repository's documentation as HTML for the package attnscope-doc (docs/packaging.md).

docs_html.py --source REPO --out DIR --project-url URL

README.md becomes DIR/index.html and every docs/NAME.md DIR/NAME.html (Python-Markdown, Debian's python3-markdown:
tables, fenced code, heading anchors). Links are rewritten so that the folder stands alone: a link to another page
goes to its .html, an image is copied beside the pages (only the images a page shows), and a link to any other file
of the repository (a script, a sample, the notebook) goes to it under URL/blob/main/. A relative link to a file that
does not exist in the repository is an error: the pages never ship a broken link.
"""
import argparse
import html
import os
import posixpath
import re
import shutil
import sys
import urllib.parse

import markdown

STYLE = """
body { font-family: sans-serif; max-width: 62em; margin: 1em auto; padding: 0 1em; line-height: 1.45; color: #222; }
pre, code { font-family: monospace; font-size: 0.92em; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; }
table { border-collapse: collapse; margin: 0.6em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; vertical-align: top; }
img { max-width: 100%; height: auto; }
nav { font-size: 0.9em; border-bottom: 1px solid #ddd; padding-bottom: 0.4em; margin-bottom: 1em; }
nav a { margin-right: 0.8em; }
"""


def fail(msg):
    print(f"error: docs_html.py: {msg}", file=sys.stderr)
    sys.exit(2)


def pages(source):
    """(repository path of the Markdown file, name of its page) for README.md and docs/*.md."""
    out = [("README.md", "index.html")]
    for name in sorted(os.listdir(os.path.join(source, "docs"))):
        if name.endswith(".md"):
            out.append(("docs/" + name, name[:-3] + ".html"))
    return out


LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d+\.)\s")


def github_lists(text):
    """The docs are written for GitHub's Markdown, which starts a list item right after a paragraph line, nests
    lists by two spaces and allows code fences inside list items; Python-Markdown wants a blank line before an item
    that follows a paragraph, four spaces per level and indented code inside items. Outside top-level code fences
    this inserts the blank line, doubles the indentation of lines inside a list, and turns a fence inside a list
    item into an indented code block of that item."""
    out, fence, in_list, prev = [], None, False, ""
    inner = None   # (indent of the fence, its marker) for a fence inside a list item
    for line in text.split("\n"):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if inner is not None:
            if stripped.startswith(inner[1]) and indent <= inner[0] + 1:
                out.append("")
                inner = None
            else:
                out.append(" " * (2 * inner[0] + 4) + line[min(indent, inner[0]):])
            prev = line
            continue
        if fence:
            out.append(line)
            if stripped.startswith(fence):
                fence = None
            prev = line
            continue
        item = LIST_ITEM.match(line)
        if item:
            if prev.strip() and not LIST_ITEM.match(prev) and not prev.startswith("|"):
                out.append("")
            in_list = True
        elif line.strip() and indent == 0 and not prev.strip():
            in_list = False
        if stripped.startswith(("```", "~~~")):
            if in_list and indent > 0:
                inner = (indent, stripped[:3])
                out.append("")
                prev = line
                continue
            fence = stripped[:3]
        if in_list and indent > 0:
            line = " " * indent + line
        out.append(line)
        prev = line
    return "\n".join(out)


def title_of(text, fallback):
    m = re.search(r"^#\s+(.+)$", text, re.M)
    return m.group(1).strip().replace("`", "") if m else fallback


class Rewriter:
    def __init__(self, source, out, url, page_of):
        self.source, self.out, self.url, self.page_of = source, out, url.rstrip("/"), page_of
        self.images = set()

    def target(self, md_path, link, image):
        """The rewritten address of `link` written in repository file `md_path`."""
        if re.match(r"^[a-z][a-z0-9+.-]*:", link, re.I) or link.startswith("#") or link.startswith("//"):
            return link
        path, _, fragment = link.partition("#")
        path = urllib.parse.unquote(path)
        repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(md_path), path))
        if repo_path.startswith("../") or repo_path == "..":
            fail(f"{md_path}: the link {link} leaves the repository")
        full = os.path.join(self.source, repo_path)
        if not os.path.exists(full):
            fail(f"{md_path}: the link {link} names {repo_path}, which does not exist")
        suffix = ("#" + fragment) if fragment else ""
        if repo_path in self.page_of:
            return self.page_of[repo_path] + suffix
        if image or re.search(r"\.(png|svg|jpe?g|gif)$", repo_path, re.I) and repo_path.startswith("docs/"):
            # Images keep their path under docs/ (docs/figures/x.png -> figures/x.png).
            rel = repo_path[len("docs/"):] if repo_path.startswith("docs/") else repo_path
            self.images.add((repo_path, rel))
            return urllib.parse.quote(rel) + suffix
        return f"{self.url}/blob/main/{urllib.parse.quote(repo_path)}{suffix}"

    def page(self, md_path, text):
        body = markdown.markdown(text, extensions=["extra", "toc", "sane_lists"], output_format="html")

        def sub(m):
            attr, quote, value = m.group(1), m.group(2), html.unescape(m.group(3))
            new = self.target(md_path, value, attr == "src")
            return f'{attr}={quote}{html.escape(new, quote=True)}{quote}'

        return re.sub(r'\b(href|src)=(["\'])(.*?)\2', sub, body)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--project-url", required=True)
    args = ap.parse_args()
    listed = pages(args.source)
    page_of = dict(listed)
    rw = Rewriter(args.source, args.out, args.project_url, page_of)
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    titles = {}
    rendered = {}
    for md_path, page in listed:
        with open(os.path.join(args.source, md_path), encoding="utf-8") as f:
            text = f.read()
        # The docs-test markers (tools/docs_test.py) are HTML comments: Markdown keeps them, the page drops them.
        text = re.sub(r"<!--\s*docs-test:.*?-->\n?", "", text, flags=re.S)
        text = github_lists(text)
        titles[page] = title_of(text, page)
        rendered[page] = rw.page(md_path, text)
    # The bar above every page: short names (the file's), each with its page's title as a tooltip.
    nav = " ".join(f'<a href="{p}" title="{html.escape(titles[p], quote=True)}">'
                   f'{"overview" if p == "index.html" else html.escape(p[:-len(".html")])}</a>' for _, p in listed)
    for _, page in listed:
        doc = (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
               f'<title>{html.escape(titles[page])} - AttnScope</title>\n<style>{STYLE}</style>\n</head>\n<body>\n'
               f'<nav>{nav}</nav>\n{rendered[page]}\n</body>\n</html>\n')
        with open(os.path.join(args.out, page), "w", encoding="utf-8") as f:
            f.write(doc)
    for repo_path, rel in sorted(rw.images):
        dest = os.path.join(args.out, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(os.path.join(args.source, repo_path), dest)
    print(f"docs_html.py: {len(listed)} pages, {len(rw.images)} images -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
