"""The checks the profiler's test scripts share: each failed check is
printed and remembered, and the script's exit status says whether any
failed."""

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print('FAIL:', what)


def eq(actual, expected, what):
    check(actual == expected, f'{what}: got {actual!r}, expected {expected!r}')


def status():
    """Print the verdict; the exit status for sys.exit (0: every check passed)."""
    if failures:
        print(f'{len(failures)} check(s) failed')
        return 1
    print('all checks passed')
    return 0
