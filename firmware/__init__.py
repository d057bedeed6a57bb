"""Firmware for a generated kernel: a PlatformIO project, its offline build, QEMU.

    kernel dir (manifest.json + C)
      -> project.generate_project   platformio.ini, src/ (protocol, board, startup,
                                    mbf_config.h, kernel/), ld/, one environment per
                                    board of mbforge.targets.BOARDS (emulated_f405,
                                    nucleo_f446re, emulated_an385); byte-identical for
                                    the same kernel
      -> build.build                `pio run -e ENV` offline -> program.elf (emulated boards)
      -> qemu.Emulator              the ELF's board: netduinoplus2 (USART2) or mps2-an385
                                    (UART0), on socket://127.0.0.1:PORT

The boards:
  emulated_f405   STM32F405, Cortex-M4F, 168 MHz; float kernels use the FPU
  nucleo_f446re   the real board, same sources, DWT cycle counter
  emulated_an385  Arm MPS2 AN385, Cortex-M3 without FPU, 25 MHz, CMSDK UART0: built
                  -mfloat-abi=soft, so c-fixed (int32) kernels run on a core that really
                  has no FPU. c-float32 and c-double kernels still work there, in
                  software floating point (libgcc; `mbforge firmware --build` says so).

Timing on the emulated boards: SysTick at the processor clock under `-icount shift=S`
(one instruction = 2**S ns of virtual time), restarted by a write just before each timed
call, so a count depends only on the instructions executed: ticks = cpu_hz * 2**S / 1e9
x instructions (5.376 on emulated_f405, S = 5; 3.2 on emulated_an385, S = 7), measured
by the firmware's CALIB request (a `subs; bne` loop of known length) and used by
mbforge.hil.harness to report instructions per call. On the Nucleo, DWT->CYCCNT counts
processor cycles.
"""
