"""scripts/module-cycles on tiny fake crates and packages: a circle fails,
no circle passes, a known circle passes only while it is there.

Run: python3 -m unittest discover -s tests/scripts (stdlib only; pytest
finds it too)."""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "module-cycles")


def write(root, files):
    for name, text in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(text))


def allow_file(text):
    """An allow-list holding `text`: its path."""
    path = os.path.join(tempfile.mkdtemp(), "allow")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def run(*args):
    p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


CRATE = {
    "Cargo.toml": '[package]\nname = "fake"\nversion = "0.0.0"\n',
    "src/lib.rs": """
        mod a;
        mod b;
        mod deep;
        pub use a::A;
    """,
    "src/a.rs": """
        use crate::b::B;
        /// Holds a B.
        pub struct A(B);
    """,
    "src/deep/mod.rs": """
        mod inner;
        pub(crate) use inner::Inner;
        pub(crate) struct Shared;
    """,
    # a child leaning on its parent is not a circle
    "src/deep/inner.rs": """
        use super::Shared;
        pub(crate) struct Inner(Shared);
    """,
}

# b.rs names A only in a comment and a string, and an outside crate's path
B_FREE = """
    // use crate::A;
    /** crate::a::A */
    pub struct B;
    pub fn name() -> &'static str { "crate::A" }
    pub fn other(_: std::fmt::Error, c: char) -> char { let _ = '"'; c }
"""
# b.rs leans on A through the crate root's re-export: a -> b -> a
B_CIRCLE = """
    pub struct B;
    pub fn f(_: &crate::A) {}
"""


class RustCrate(unittest.TestCase):
    def crate(self, b):
        tmp = tempfile.mkdtemp()
        write(tmp, dict(CRATE, **{"src/b.rs": b}))
        return tmp

    def test_no_circle_passes(self):
        code, out = run("--allow", "", self.crate(B_FREE))
        self.assertEqual(code, 0, out)
        self.assertIn("a.rs -> b.rs", out)
        self.assertIn("deep/inner.rs -> deep/mod.rs", out)
        self.assertIn("0 circles", out)

    def test_circle_fails_and_is_listed(self):
        code, out = run("--allow", "", self.crate(B_CIRCLE))
        self.assertEqual(code, 1, out)
        self.assertIn("CIRCLE in fake: a.rs -> b.rs -> a.rs", out)

    def test_known_circle_passes_and_a_gone_one_fails(self):
        allow = allow_file("fake: a.rs b.rs  # issue 1, item 2\n")
        code, out = run("--allow", allow, self.crate(B_CIRCLE))
        self.assertEqual(code, 0, out)
        self.assertIn("known circle in fake, issue 1, item 2: a.rs -> b.rs -> a.rs", out)
        code, out = run("--allow", allow, self.crate(B_FREE))
        self.assertEqual(code, 1, out)
        self.assertIn("not there any more: remove its line", out)

    def test_a_line_for_a_crate_not_read_is_not_judged(self):
        allow = allow_file("other: a.rs b.rs  # issue 1, item 2\n")
        code, out = run("--allow", allow, self.crate(B_FREE))
        self.assertEqual(code, 0, out)

    def test_allow_line_needs_its_issue(self):
        allow = allow_file("fake: a.rs b.rs\n")
        code, out = run("--allow", allow, self.crate(B_CIRCLE))
        self.assertNotEqual(code, 0, out)
        self.assertIn("which issue item opens it", out)


class PythonPackage(unittest.TestCase):
    def package(self, late_import):
        tmp = tempfile.mkdtemp()
        pkg = os.path.join(tmp, "pkg")
        write(
            pkg,
            {
                "__init__.py": "from .x import X\n",
                "x.py": "from . import y\nX = 1\n",
                "y.py": "def f():\n    " + late_import + "\n    return X\n",
            },
        )
        return pkg

    def test_no_circle_passes(self):
        code, out = run("--allow", "", self.package("import os"))
        self.assertEqual(code, 0, out)
        self.assertIn("x.py -> y.py", out)

    def test_import_inside_a_function_makes_a_circle(self):
        code, out = run("--allow", "", self.package("from .x import X"))
        self.assertEqual(code, 1, out)
        self.assertIn("CIRCLE in pkg (python): x.py -> y.py -> x.py", out)


if __name__ == "__main__":
    unittest.main()
