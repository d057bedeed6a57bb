"""Hardware in the loop: the serial link and the harness that checks a device.

    protocol   the one definition of frames, types, error codes (rendered into the firmware)
    cobs       byte stuffing: 0x00 delimits frames
    link       Link(url): HELLO, EVAL, CALIB over pyserial (USB CDC port or QEMU socket)
    hostlib    a kernel compiled on the host, called over a batch through ctypes
    harness    device vs double reference: errors per output group, work per call
"""
