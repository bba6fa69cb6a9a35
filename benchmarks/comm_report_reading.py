"""What the comm-report checkers share: commir-opt's comm-report read into counts and
bytes, and a Markdown table read into rows (megatron_collectives_check.py,
vocab_parallel_comm_check.py)."""
import re


def parse_comm_reports(report_text, kinds):
    """{function: {kind: (count, bytes per device)}} from the `// comm-report @f:` blocks
    commir-opt writes to stderr, keeping the collective kinds in `kinds`."""
    reports, current = {}, None
    for line in report_text.splitlines():
        header = re.match(r"// comm-report @(\w+):", line)
        row = re.match(r"//\s+(\w+)\s+count (\d+)\s+bytes/device (\d+)", line)
        if header:
            current = reports.setdefault(header.group(1), {})
        elif row and current is not None and row.group(1) in kinds:
            current[row.group(1)] = (int(row.group(2)), int(row.group(3)))
    return reports


def table_rows(path):
    """The first table's rows as dicts keyed by its header cells."""
    rows, header = [], None
    with open(path) as table:
        for line in table:
            if not line.startswith("|"):
                if header is not None:
                    break  # the end of the first table
                continue
            if line.startswith("|---"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            else:
                rows.append(dict(zip(header, cells)))
    return rows
