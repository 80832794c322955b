"""The documentation's sample outputs, generated from a real run of the outage drill, and checked.

    python3 jobs/dev/readme_samples.py write DIR     # DIR: the drill's files (DRILL_FILES) with drill.out
    python3 jobs/dev/readme_samples.py check DIR     # exit 1 when a sample no longer matches

A sample is a fenced block (```text or ```json) between `<!-- sample: NAME -->` and
`<!-- /sample: NAME -->` in README.md or docs/*.md. `write` replaces each block with what the drill
printed or recorded. `check` compares the block with it after masking what changes from run to
run, and fails when they differ, or when a sample the drill makes is shown in no document (a
section moved without its sample):

- times, UUIDs, order IDs, ids, durations (`3h 12m`), figures, paths and local URLs are masked;
- a table row is reduced: each run of rows becomes one `<rows>` line, since which rows a run lists
  depends on its data. A row is a line indented four spaces or more whose columns are aligned (two
  spaces inside it) and that holds something masked, or a line that starts with a masked value
  followed by two spaces (the rows of `status` and `consumption list`);
- `forwarded    earlier runs' deliveries` lines are left out (with several apps sharing one
  handler, whether a drain finds another app's deliveries waiting depends on timing);
- a JSON line keeps its keys, its `true`, `false` and `null`, and its strings without digits (kinds,
  types, bundle ids) but product ids; other values are masked.

Every other line, its labels and their order must be the same.
"""

import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Where samples are shown: the README and the documents beside it.
DOCUMENTS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
BLOCK = re.compile(
    r"(<!-- sample: (?P<name>[\w-]+) -->\n```(?P<language>text|json)\n)(?P<body>.*?)(?P<end>```\n<!-- /sample: (?P=name) -->)", re.S
)


def lines_of(text):
    return text if text.endswith("\n") else text + "\n"


def first_report(run_output):
    """The first app and environment's report, as `reconciler run` printed it."""
    return lines_of(run_output.split("\n== ")[0])


def consumption_excerpt(report):
    """The lines of a report about consumption requests, with its title, window and forwarding."""
    keep, inside = [], False
    for line in report.splitlines():
        if line.startswith("  consumption"):
            keep.append("  ...")
            inside = True
        elif inside and not line.startswith("    "):
            inside = False
        if inside or line.startswith(("reconcile run", "  window", "forwarded")):
            keep.append(line)
    return lines_of("\n".join(keep))


def export_lines(path):
    """Two purchases as `export` prints them: an active subscription of a known user, and a consumable refunded by half."""
    purchases = [(line, json.loads(line)) for line in path.read_text().splitlines() if line]
    subscription = next(
        line
        for line, purchase in purchases
        if purchase["bundleId"] == "com.example.one"
        and purchase["environment"] == "Production"
        and purchase["status"] == 1
        and purchase["entitled"] is True
        and purchase["appAccountToken"] is not None
        and purchase["offerType"] is None
    )
    refunded = next(
        line
        for line, purchase in purchases
        if purchase["bundleId"] == "com.example.one"
        and purchase["environment"] == "Production"
        and purchase["revocationType"] == "REFUND_PRORATED"
    )
    return subscription + "\n" + refunded + "\n"


def change_lines(path):
    """Two rows of the change feed: a purchase a run changed (an expiry replayed), and a consumption request.

    Which rows a run writes first depends on timing (the replay and the gap fill run side by side),
    so each is the one with the smallest originalTransactionId among rows of the same shape (a
    known user, no offer), not the first in feed order.
    """
    rows = [(line, json.loads(line)) for line in path.read_text().splitlines() if line]
    changed = min(
        (
            (row["originalTransactionId"], line)
            for line, row in rows
            if row["kind"] == "purchase"
            and row["source"] == "history"
            and row["before"] is not None
            and row["before"]["status"] == 1
            and row["after"]["status"] == 2
            and row["appAccountToken"] is not None
            and row["before"]["offerType"] is None
            and row["after"]["offerType"] is None
            and row["bundleId"] == "com.example.one"
            and row["environment"] == "Production"
        )
    )[1]
    request = min(
        (
            (row["originalTransactionId"], line)
            for line, row in rows
            if row["kind"] == "notification"
            and row["notificationType"] == "CONSUMPTION_REQUEST"
            and row["source"] == "history"
            and row["appAccountToken"] is None
            and row["bundleId"] == "com.example.one"
            and row["environment"] == "Production"
        )
    )[1]
    return changed + "\n" + request + "\n"


def sources(directory):
    """What each sample shows, from the drill's files."""
    drill = (directory / "drill.out").read_text()
    # The build line depends on whether the drill built the tools itself.
    drill = "".join(line for line in drill.splitlines(keepends=True) if not line.startswith("==> building"))
    report = first_report((directory / "run.out").read_text())
    return {
        "drill": drill,
        "run-report": report,
        "run-consumption": consumption_excerpt(report),
        "repair": lines_of((directory / "repair.out").read_text()),
        "repair-unknown-order": (directory / "repair-unknown-order.txt").read_text(),
        "status": (directory / "status.txt").read_text(),
        "consumption-list": (directory / "consumption-list.txt").read_text(),
        "consumption-send": (directory / "consumption-send.txt").read_text(),
        "consumption-ack": (directory / "consumption-ack.txt").read_text(),
        "forward-redeliver": (directory / "redeliver.txt").read_text(),
        "import": (directory / "import.txt").read_text(),
        "app-api-refresh": lines_of((directory / "app-api-refresh.json").read_text()),
        "export": export_lines(directory / "after.jsonl"),
        "changes": change_lines(directory / "changes.jsonl"),
    }


MASKS = [
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"), "<time>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<uuid>"),
    (re.compile(r"/tmp/[\w./-]+"), "<path>"),
    (re.compile(r"https?://127\.0\.0\.1:\d+[\w/.-]*"), "<url>"),
    # Apple's order IDs: ten capitals and digits, both.
    (re.compile(r"\b(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{10}\b"), "<order>"),
    (re.compile(r"\b\d+[dhms]\b(?: \d+[dhms]\b)*"), "<duration>"),
    (re.compile(r"\b\d{7,}\b"), "<id>"),
    (re.compile(r"\d+(\.\d+)?"), "<n>"),
]
MASKED = re.compile(r"<(time|uuid|path|url|order|duration|id|n)>")


def skeleton(value):
    """A JSON value with what varies from run to run masked."""
    if isinstance(value, dict):
        return {key: "<product>" if key == "productId" else skeleton(item) for key, item in value.items()}
    if isinstance(value, list):
        return [skeleton(item) for item in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return "<n>"
    return "<s>" if re.search(r"\d", value) else value


def is_row(line):
    if MASKED.match(line.lstrip()) and re.match(r"\s*<\w+>\s{2}", line):
        return True
    return line.startswith("    ") and "  " in line.strip() and MASKED.search(line) is not None


def mask(text, language="text"):
    lines = []
    for line in text.splitlines():
        # With several apps forwarding to one handler, whether one app's drain still finds another's
        # deliveries waiting depends on which run finishes first: the line comes and goes.
        if line.startswith("forwarded    earlier runs' deliveries"):
            continue
        if language == "json" and line.startswith("{"):
            lines.append(json.dumps(skeleton(json.loads(line)), sort_keys=False))
            continue
        for pattern, replacement in MASKS:
            line = pattern.sub(replacement, line)
        line = line.rstrip()
        if is_row(line):
            if lines and lines[-1] == "    <rows>":
                continue
            line = "    <rows>"
        indent = len(line) - len(line.lstrip(" "))
        lines.append(line[:indent] + re.sub(r" {2,}", "  ", line[indent:]))
    return lines


def main():
    command, directory = sys.argv[1], pathlib.Path(sys.argv[2])
    texts = {document: document.read_text() for document in DOCUMENTS}
    found = sources(directory)
    shown = {document: [match.group("name") for match in BLOCK.finditer(text)] for document, text in texts.items()}
    names = [name for document in DOCUMENTS for name in shown[document]]
    if not names:
        sys.exit("no document has sample blocks (<!-- sample: NAME --> ... <!-- /sample: NAME -->)")
    unknown = [name for name in names if name not in found]
    if unknown:
        sys.exit(f"the documents have samples this script cannot make: {', '.join(unknown)}")
    unshown = [name for name in found if name not in names]
    if unshown:
        sys.exit(f"samples the drill makes that no document shows (moved without its block?): {', '.join(unshown)}")
    if command == "write":
        for document, text in texts.items():
            if shown[document]:
                document.write_text(BLOCK.sub(lambda m: m.group(1) + found[m.group("name")] + m.group("end"), text))
                print(f"wrote {len(shown[document])} samples into {document.relative_to(ROOT)}: {', '.join(shown[document])}")
        return
    failures = 0
    for document, text in texts.items():
        for match in BLOCK.finditer(text):
            name, language = match.group("name"), match.group("language")
            expected, actual = mask(match.group("body"), language), mask(found[name], language)
            if expected != actual:
                failures += 1
                print(f"{document.relative_to(ROOT)}'s sample '{name}' no longer matches what the code prints (masked, first difference):")
                for index in range(max(len(expected), len(actual))):
                    left = expected[index] if index < len(expected) else "(nothing)"
                    right = actual[index] if index < len(actual) else "(nothing)"
                    if left != right:
                        print(f"  document: {left}\n  now:      {right}")
                        break
    if failures:
        print("regenerate them with jobs/dev/readme-samples")
        sys.exit(1)
    print(f"the {len(names)} samples of README.md and docs/ match what the code prints")


if __name__ == "__main__":
    main()
