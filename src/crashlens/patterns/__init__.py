"""Pattern matching over lines, shared by line selection (text.select) and rule evaluation
(engine.match): one translation of `regex` patterns to Hyperscan, one way of compiling,
caching and finding the patterns Hyperscan refuses, one `regex` fallback per use.

- ``translate``: a `regex` pattern -> a byte-level Hyperscan prefilter expression that
  matches at least every line the pattern matches;
- ``hsdb``: the optional hyperscan binding, compiling databases, finding the culprits of a
  set that does not compile;
- ``hscache``: compiled databases kept on disk, keyed by what they were compiled from;
- ``blocks``: ``AnchorMatcher``, which lines of a byte buffer any anchor may match
  (line selection; candidates are not confirmed);
- ``lines``: ``LineScanner``, which lines each pattern may match (rule evaluation; the
  caller confirms each candidate with the exact pattern).

This package imports neither ``engine`` nor ``text``, ``report`` or ``analyze``.
"""

from .blocks import AnchorMatcher, check_anchors
from .lines import LineScanner
from .translate import Untranslatable, translate

__all__ = ["AnchorMatcher", "LineScanner", "Untranslatable", "check_anchors", "translate"]
