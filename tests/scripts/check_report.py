"""The ending the script tests share: each failure on its own FAIL line, then the test's verdict."""


def report(name, failures, *context):
    """Prints the failures (and `context`, e.g. the checked program's output, when there are any)
    and NAME: ok or FAIL; returns the exit status (1 on any failure)."""
    for f in failures:
        print("FAIL:", f)
    if failures:
        for c in context:
            print(c)
    print(f"{name}:", "FAIL" if failures else "ok")
    return 1 if failures else 0
