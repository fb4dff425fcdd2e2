#!/usr/bin/env python3
"""Checks the grader's files for one graded run: results.json has the fields
Gradescope reads, junit.xml and results.tap are well formed, and all three
agree with each other on every test. Prints one line; exit 0 when right.

usage: tests/check_formats.py GRADE_FOLDER"""
import json
import re
import sys
import xml.etree.ElementTree as ElementTree


def main(folder):
    results = json.load(open(f"{folder}/results.json"))
    for key in ("score", "execution_time", "tests"):
        assert key in results, f"results.json has no '{key}'"
    tests = results["tests"]
    assert tests, "results.json lists no test"
    for test in tests:
        for key in ("name", "number", "score", "max_score", "output",
                    "visibility", "tags"):
            assert key in test, f"test {test.get('name')} has no '{key}'"
        # Gradescope knows "passed" and "failed" only: a skipped test has
        # one too, and says why once.
        assert test.get("status") in ("passed", "failed"), test
        assert (test["status"] == "passed") == (
            test["score"] == test["max_score"]), test
        assert not test["output"].startswith("skipped: skipped:"), test
    total = sum(test["score"] for test in tests)
    assert abs(total - results["score"]) < 1e-9, "score is not the tests' sum"

    junit = ElementTree.parse(f"{folder}/junit.xml").getroot()
    cases = junit.findall("./testsuite/testcase")
    assert len(cases) == len(tests), "junit.xml and results.json differ"
    failed_junit = sum(1 for case in cases if case.find("failure") is not None)
    # A skipped test that costs points says "failed" to Gradescope, and is
    # skipped, not failed, in JUnit and TAP.
    failed_json = sum(1 for test in tests if test.get("status") == "failed"
                      and "[skipped]" not in test["name"])
    assert failed_junit == failed_json == int(junit.get("failures")), \
        "failure counts differ between junit.xml and results.json"

    tap = open(f"{folder}/results.tap").read().splitlines()
    assert tap[0] == "TAP version 13" and tap[1] == f"1..{len(tests)}"
    verdicts = [line for line in tap if re.match(r"(not )?ok \d+ ", line)]
    assert len(verdicts) == len(tests), "TAP lists another number of tests"
    assert sum(1 for v in verdicts if v.startswith("not ok")) == failed_json
    print(f"  [pass] results.json, junit.xml, results.tap: {len(tests)} tests,"
          f" {failed_json} failed, score {results['score']}, all three agree")


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except (AssertionError, OSError, ValueError, KeyError) as problem:
        print(f"  [FAIL] grader's files in {sys.argv[1]}: {problem}")
        sys.exit(1)
