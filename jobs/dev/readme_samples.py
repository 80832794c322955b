"""The README's sample outputs, generated from a real run of the outage drill, and checked.

    python3 jobs/dev/readme_samples.py write DIR     # DIR: a drill's DRILL_KEEP directory with drill.out
    python3 jobs/dev/readme_samples.py check DIR     # exit 1 when README.md's samples no longer match

A sample is a fenced block between `<!-- sample: NAME -->` and `<!-- /sample: NAME -->` in README.md.
`write` replaces each block with what the drill printed. `check` compares the block with it after
masking what changes from run to run (times, ids, figures) and after reducing each run of table
rows (lines indented four spaces or more) to one row, since which rows a run lists depends on its
data: every other line, its labels and their order must be the same.
"""

import pathlib
import re
import sys

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"(<!-- sample: (?P<name>[\w-]+) -->\n```text\n)(?P<body>.*?)(```\n<!-- /sample: (?P=name) -->)", re.S)


def sources(directory):
    """What each sample shows, from the drill's kept files."""
    drill = (directory / "drill.out").read_text()
    # The build line depends on whether the drill built the tools itself.
    drill = "".join(line for line in drill.splitlines(keepends=True) if not line.startswith("==> building"))
    run = (directory / "run.out").read_text()
    # The first app and environment's report, as the run printed it.
    first = run.split("\n== ")[0]
    return {"drill": drill, "run-report": first if first.endswith("\n") else first + "\n"}


def mask(text):
    lines = []
    for line in text.splitlines():
        line = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "<time>", line)
        line = re.sub(r"/tmp/[\w./-]+", "<path>", line)
        line = re.sub(r"https?://127\.0\.0\.1:\d+[\w/.-]*", "<url>", line)
        line = re.sub(r"\b\d{7,}\b", "<id>", line)
        line = re.sub(r"\d+(\.\d+)?", "<n>", line)
        line = re.sub(r" {2,}", "  ", line.rstrip())
        lines.append(line)
    reduced = []
    for line in lines:
        row = line.startswith("    ")
        if row and reduced and reduced[-1] == "    <rows>":
            continue
        reduced.append("    <rows>" if row else line)
    return reduced


def main():
    command, directory = sys.argv[1], pathlib.Path(sys.argv[2])
    readme = README.read_text()
    found = sources(directory)
    names = [match.group("name") for match in BLOCK.finditer(readme)]
    if not names:
        sys.exit("README.md has no sample blocks (<!-- sample: NAME --> ... <!-- /sample: NAME -->)")
    unknown = [name for name in names if name not in found]
    if unknown:
        sys.exit(f"README.md has samples this script cannot make: {', '.join(unknown)}")
    if command == "write":
        README.write_text(BLOCK.sub(lambda m: m.group(1) + found[m.group("name")] + m.group(4), readme))
        print(f"wrote {len(names)} samples into README.md: {', '.join(names)}")
        return
    failures = 0
    for match in BLOCK.finditer(readme):
        name = match.group("name")
        expected, actual = mask(match.group("body")), mask(found[name])
        if expected != actual:
            failures += 1
            print(f"README.md's sample '{name}' no longer matches what the code prints (masked, first difference):")
            for index in range(max(len(expected), len(actual))):
                left = expected[index] if index < len(expected) else "(nothing)"
                right = actual[index] if index < len(actual) else "(nothing)"
                if left != right:
                    print(f"  README: {left}\n  now:    {right}")
                    break
    if failures:
        print("regenerate them with jobs/dev/readme-samples")
        sys.exit(1)
    print(f"README.md's {len(names)} samples match what the code prints")


if __name__ == "__main__":
    main()
