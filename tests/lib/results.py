"""Test result lines for the Python tests, in the format of
tests/lib/test.sh: 'PASS  NAME', 'FAIL  NAME (REASON)',
'SKIP  NAME (REASON)'."""


def result(verdict, name, why=None):
    """Print one result line; @verdict is 'pass', 'fail' or 'skip'."""
    print("%s  %s%s" % (verdict.upper(), name, " (%s)" % why if why else ""),
          flush=True)
