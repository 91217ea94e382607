# SPDX-License-Identifier: MIT
# Errors of the plan DSL: every refusal names the line of the algorithm that made the bad op, so
# that a user reads "allreduce.py:12: ..." instead of a traceback into the compiler.
import contextlib
import os
import sys

_PKG = os.path.dirname(os.path.abspath(__file__))
_SKIP = (_PKG, os.path.dirname(os.path.abspath(contextlib.__file__)))


class DslError(Exception):
    """A program the DSL refuses. `where` is "file.py:line" of the offending DSL call."""

    def __init__(self, where, text):
        self.where = where
        self.text = text
        super().__init__("%s: %s" % (where, text) if where else text)


def caller():
    """file:line of the innermost frame outside this package and the standard library's
    contextlib (which runs `with p.pipeline(...)`): the algorithm's line."""
    f = sys._getframe(1)
    while f is not None and (os.path.dirname(os.path.abspath(f.f_code.co_filename)) in _SKIP):
        f = f.f_back
    if f is None:
        return "?"
    return "%s:%d" % (os.path.basename(f.f_code.co_filename), f.f_lineno)


def line_of(where):
    """The line number of a "file.py:line" location (tests assert it)."""
    return int(where.rsplit(":", 1)[1])
