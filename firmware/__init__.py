"""Firmware for a generated kernel: a PlatformIO project, its offline build, QEMU.

    kernel dir (manifest.json + C)
      -> project.generate_project   platformio.ini, src/ (protocol, board, startup,
                                    mbf_config.h, kernel/), ld/, one environment per
                                    board of mbforge.targets.BOARDS; byte-identical for
                                    the same kernel
      -> build.build                `pio run -e ENV` offline -> program.elf (emulated boards)
      -> qemu.Emulator              the ELF's board under qemu-system-arm (the record's
                                    qemu_machine), its link UART on socket://127.0.0.1:PORT

The boards are the records of mbforge.targets.BOARDS (the README's table lists them): the
emulated_* boards run here in QEMU through mbforge's own dev-platform (platform/); the
real boards build through their official PlatformIO platforms, and the tests compile and
link the same sources with Debian's arm-none-eabi-gcc. A board without an FPU is built
-mfloat-abi=soft: c-fixed (int32) kernels run there natively, c-float32 and c-double ones
in software floating point (libgcc; `mbforge firmware --build` asks for --soft-float).

Timing on the emulated boards: SysTick at the processor clock under `-icount shift=S`
(one instruction = 2**S ns of virtual time), restarted by a write just before each timed
call, so a count depends only on the instructions executed: ticks = cpu_hz * 2**S / 1e9
x instructions (5.376 on emulated_f405, S = 5; 3.2 on emulated_an385, S = 7), measured
by the firmware's CALIB request (a `subs; bne` loop of known length) and used by
mbforge.hil.harness to report instructions per call. Real boards count processor cycles
with DWT->CYCCNT where the core has it (SysTick on the Cortex-M0+).
"""
