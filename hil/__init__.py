"""Hardware in the loop: the serial link, and the verification shared by the HIL
harness and the RTL benches (mbforge.hdl.sim).

    protocol   the one definition of frames, types, error codes (rendered into the firmware)
    cobs       byte stuffing: 0x00 delimits frames
    link       Link(url): HELLO, EVAL, CALIB over pyserial (USB CDC port or QEMU socket);
               LinkDevice: a board as a Device
    hostlib    a kernel compiled on the host, called over a batch through ctypes (a Device)
    device     the Device protocol: eval(raw inputs) -> outputs, status, work
    vectors    the one vector source (domain boxes / ranges, motion) and raw <-> real
    compare    the one comparison: error per output group against the double reference,
               error bounds, statuses, bit-exactness against a host model
    harness    device vs double reference over the link: the report of `mbforge hil`
    report     what people read, from a result dict alone: HTML (figures embedded),
               JUnit XML, the progress bar

Import rule: nothing here imports mbforge.hdl or the model layer (model, kernels,
pipeline, backends); hdl imports hil.
"""
