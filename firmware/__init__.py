"""Firmware for a generated kernel: a PlatformIO project, its offline build, QEMU.

    kernel dir (manifest.json + C)
      -> project.generate_project   platformio.ini, src/ (protocol, board, startup,
                                    mbf_config.h, kernel/), ld/, env emulated_f405 and
                                    nucleo_f446re; byte-identical for the same kernel
      -> build.build                `pio run -e emulated_f405` offline -> program.elf
      -> qemu.Emulator              netduinoplus2, USART2 on socket://127.0.0.1:PORT

Timing on the emulated board: SysTick at the 168 MHz processor clock under
`-icount shift=5` (one instruction = 32 ns of virtual time), restarted by a write just
before each timed call, so a count depends only on the instructions executed:
ticks = 5.376 x instructions (0.168 x 2**shift), measured by the firmware's CALIB
request (a `subs; bne` loop of known length) and used by mbforge.hil.harness to
report instructions per call. On the Nucleo, DWT->CYCCNT counts processor cycles.
"""
