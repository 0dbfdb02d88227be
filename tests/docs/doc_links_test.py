#!/usr/bin/env python3
"""Every relative link and file path in the docs resolves (issue 46).

Checks the Markdown files a user reads (README.md, docs/**, helm/**, examples/**, bench/**,
tests/**): each `[text](target)` whose target is not a URL must name a file or directory of the
repository, and a `#anchor` must name a heading of the target (GitHub's slug rules). Inline code
spans that look like repository paths (`docs/x.md`, `libs/shard/shard_core.h`,
`tests/integration/export_test.sh`) must name something that exists too, so a moved or renamed
file cannot leave a dangling mention. Paths are resolved against the Markdown file's directory
first, then against the repository root (docs often write repository-relative paths).

Usage: doc_links_test.py REPOSITORY_ROOT
"""

import os
import re
import subprocess
import sys
import unittest

ROOT = None

# Markdown links; images too. The target stops at whitespace or ')'.
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^\s*(```|~~~)")
# A code span is checked as a path when it starts with one of the repository's top-level
# directories (or names a top-level file) and has no spaces, wildcards or placeholders.
PATH_CHARS = re.compile(r"^[A-Za-z0-9_./-]+$")
SKIPPED_DIRS = {".git", "build", "node_modules", "__pycache__"}


def markdown_files(root):
    for base, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("build"))
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(base, name)


def github_slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading keeps its text
    text = text.lower()
    text = re.sub(r"[^\w\- ]", "", text, flags=re.UNICODE)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        slugs, seen = set(), {}
        in_fence = False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if FENCE.match(line):
                    in_fence = not in_fence
                    continue
                match = None if in_fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
                if match:
                    slug = github_slug(match.group(1))
                    count = seen.get(slug, 0)
                    seen[slug] = count + 1
                    slugs.add(slug if count == 0 else f"{slug}-{count}")
                for explicit in re.findall(r'<a\s+(?:name|id)="([^"]+)"', line):
                    slugs.add(explicit)
        cache[path] = slugs
    return cache[path]


def resolve(md_path, target):
    """The existing file a relative target names, or None."""
    for base in (os.path.dirname(md_path), ROOT):
        candidate = os.path.normpath(os.path.join(base, target))
        if os.path.exists(candidate):
            return candidate
    return None


def prose_lines(path):
    """(line number, text) outside fenced code blocks."""
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            if not in_fence:
                yield number, line


def top_level_names():
    """The repository's tracked top-level names: generated directories (build/, bench-results/,
    runs/) are outputs the docs describe, not paths that must exist in a clean clone."""
    try:
        tracked = subprocess.run(["git", "-C", ROOT, "ls-files"], check=True, text=True,
                                 capture_output=True, timeout=60).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        tracked = os.listdir(ROOT)
    return {path.split("/", 1)[0] for path in tracked if path and not path.startswith(".")}


def looks_like_repository_path(span, top):
    if not PATH_CHARS.match(span) or span.startswith(("-", "/", "./", "../")):
        return False
    first = span.split("/", 1)[0]
    if first not in top:
        return False
    if "/" not in span:
        return False  # a bare top-level name (`dev`, `libs`) is a word in prose as often as a path
    return True


def problems():
    found = []
    top = top_level_names()
    for md in markdown_files(ROOT):
        rel_md = os.path.relpath(md, ROOT)
        for number, line in prose_lines(md):
            where = f"{rel_md}:{number}"
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                path, _, anchor = target.partition("#")
                resolved = resolve(md, path) if path else md
                if resolved is None:
                    found.append(f"{where}: link to {target}: no such file")
                    continue
                if anchor and resolved.endswith(".md") and os.path.isfile(resolved):
                    if anchor.lower() not in anchors(resolved):
                        found.append(f"{where}: link to {target}: no heading '#{anchor}' in "
                                     f"{os.path.relpath(resolved, ROOT)}")
            code_free = LINK.sub("", line)
            for span in CODE_SPAN.findall(code_free):
                span = span.strip().rstrip(".,:;")
                path = span.split("#", 1)[0].split(":", 1)[0]
                if looks_like_repository_path(path, top) and resolve(md, path) is None:
                    found.append(f"{where}: path `{span}` names nothing in the repository")
    return found


class DocLinksTest(unittest.TestCase):
    def test_every_relative_link_and_path_resolves(self):
        broken = problems()
        self.assertEqual(broken, [], "\n" + "\n".join(broken))

    def test_the_checker_sees_a_broken_link(self):
        # The checker itself can fail: a made-up file and anchor are reported.
        self.assertIsNone(resolve(os.path.join(ROOT, "README.md"), "docs/no-such-file.md"))
        self.assertNotIn("no-such-heading", anchors(os.path.join(ROOT, "README.md")))
        self.assertEqual(github_slug("`syncopate local` and more: a (test)"),
                         "syncopate-local-and-more-a-test")
        self.assertTrue(looks_like_repository_path("docs/nothing.md", {"docs"}))
        self.assertFalse(looks_like_repository_path("x/y", {"docs"}))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: doc_links_test.py REPOSITORY_ROOT")
    ROOT = os.path.abspath(sys.argv.pop(1))
    unittest.main()
