#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine with no internet but the Debian and
# PyPI registries. Safe to run again: every step checks before it acts.
#   1. Debian packages (cross toolchain, QEMU, Icarus, yosys, gappa; chromium renders the
#      HIL report headless in tests/test_hil_report.py; Eigen lets bench/arms.py compile
#      Pinocchio's C++ templates over CasADi; the aarch64 cross compiler and qemu-user run
#      the generated C on 64-bit ARM in tests/test_portable_c.py; not gcc-multilib: Debian
#      has it conflict with the aarch64 cross compiler)
#   2. .venv with mbforge (editable) and its test, bench and HDL extras, and the build
#      backend (for the offline wheel build of tests/test_install.py)
#   3. .pio/ : an offline PlatformIO core dir (tool-scons from PyPI's scons, the Debian
#      toolchain as a PlatformIO package). The dev-platform itself stays in firmware/.
#   4. the two Pinocchio C++ programs bench/ and its tests run (bench.arms.pin_binary),
#      compiled once into ~/.cache/mbforge-bench by their sources and versions: minutes
#      the first time, which a test's time limit should not have to hold
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

say() { printf '[bootstrap] %s\n' "$*"; }

# ---- 1. Debian packages -------------------------------------------------------------
debs=(gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm iverilog yosys gappa valgrind chromium libeigen3-dev
      nextpnr-ice40 fpga-icestorm gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
missing=()
for p in "${debs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    say "installing Debian packages: ${missing[*]}"
    sudo_=""
    [ "$(id -u)" -eq 0 ] || sudo_="sudo"
    $sudo_ apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---- 2. virtual environment ---------------------------------------------------------
venv="$root/.venv"
stamp="$venv/.mbforge-installed"
if [ ! -x "$venv/bin/python" ]; then
    say "creating $venv"
    python3 -m venv "$venv"
fi
# Reinstall only when the project metadata changed (the install is editable).
want="$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    say "installing mbforge into $venv"
    # (this machine's pip config lists index folders that may be absent; drop that noise)
    "$venv/bin/pip" install -q --disable-pip-version-check -e ".[test,bench,hdl,offline]" \
        2> >(grep -v "^WARNING: Location" >&2)
    echo "$want" >"$stamp"
fi

# The build backend ([build-system] requires) in the venv too, so a wheel of mbforge can be
# built with --no-build-isolation and no registry (tests/test_install.py does).
backend="$("$venv/bin/python" -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))')"
backend_stamp="$venv/.mbforge-build-backend"
if [ ! -f "$backend_stamp" ] || [ "$(cat "$backend_stamp")" != "$backend" ]; then
    say "installing the build backend ($backend) into $venv"
    # shellcheck disable=SC2086  # one requirement per word
    "$venv/bin/pip" install -q --disable-pip-version-check $backend 2> >(grep -v "^WARNING: Location" >&2)
    echo "$backend" >"$backend_stamp"
fi

# ---- 3. offline PlatformIO pieces -----------------------------------------------------
"$venv/bin/python" -m mbforge.firmware.offline --root "$root"

# ---- 4. Pinocchio's C++ programs for bench/ -------------------------------------------
"$venv/bin/python" -m bench.pin_programs
say "ready"
