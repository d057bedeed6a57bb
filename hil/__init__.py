"""Hardware in the loop: a board or QEMU behind the serial link. The vectors, the
comparison, the Device protocol and the host library it checks against are
mbforge.verify's, shared with the RTL benches (mbforge.hdl.sim).

    protocol   the one definition of frames, types, error codes (rendered into the firmware)
    cobs       byte stuffing: 0x00 delimits frames
    link       Link(url): HELLO, EVAL, CALIB over pyserial (USB CDC port or QEMU socket);
               LinkDevice: a board as a verify.device.Device
    harness    device vs double reference over the link: the report of `mbforge hil`
    rundb      the run database: every answer stored as it comes, a run resumed from it
    report     what people read, from a result dict alone: HTML (figures embedded),
               JUnit XML, the progress bar
    loop       the loop app's host side: its window reports, LOOP requests
    simulate   a step kernel run over a horizon on the device (SIM requests)
    cli        `mbforge hil`

Import rule: hil imports mbforge.verify; nothing here imports mbforge.hdl or the model
layer (model, kernels, pipeline, backends), and neither verify nor hdl imports hil.
"""
