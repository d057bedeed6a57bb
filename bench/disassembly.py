"""What an ARM object's disassembly says of a function (bench.floor, bench.device): its
instructions, the spill loads and stores (sp-relative) and the literal-pool loads."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

_INSN = re.compile(r"^\s+[0-9a-f]+:\t[0-9a-f ]+\t(\S+)\t?(.*)$")


def disassembly_counts(obj: Path, function: str | None = None) -> dict:
    """Instructions, spill loads/stores (sp-relative) and literal loads in `function` of
    an ARM object (all functions when None)."""
    text = subprocess.run(["arm-none-eabi-objdump", "-d", str(obj)], capture_output=True, text=True,
                          check=True).stdout
    n = ld = st = lit = 0
    inside = function is None
    for line in text.splitlines():
        head = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if head:
            inside = function is None or head.group(1) == function
            continue
        m = _INSN.match(line)
        if not (inside and m):
            continue
        op, args = m.groups()
        if op.startswith(".") or op == "nop":
            continue
        n += 1
        if "[sp" in args:
            if re.match(r"v?ldr", op):
                ld += 1
            elif re.match(r"v?str", op):
                st += 1
        elif "[pc" in args and op.startswith("vldr"):
            lit += 1
    return {"instructions": n, "spill_loads": ld, "spill_stores": st, "literal_loads": lit}
