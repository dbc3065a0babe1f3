"""The checks the profiler's test scripts share: each failed check is
printed and remembered, and the script's exit status says whether any
failed."""

import os
import tempfile

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


def scenarios(names):
    """{name: function} of a script's scenario_* functions (from its globals());
    the name with '-' for '_'."""
    return {k[len('scenario_'):].replace('_', '-'): v for k, v in names.items() if k.startswith('scenario_')}


def run_scenario(scenario, a, prefix):
    """Run scenario(a) in a temporary directory of its own; the exit status."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        os.chdir(tmp)
        scenario(a)
        os.chdir('/')
    return status()
