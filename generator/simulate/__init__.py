"""`mbforge simulate`: a model's motion run on the host (the double-precision reference,
written as CSV and plots) or on a board (its step kernel generated, built into firmware and
checked over the serial link against the host).

    cli.py      the command: its flags, the host run (simulate), the device run's entry
    device.py   the run on a board: step kernels, firmware, the SIM requests, the report
    columns.py  what both write alike: the model named on the command line, NAME=VALUE
                pairs, the CSV's columns and text

A command stage: it uses the reference solvers (mbforge.reference), the examples, the
kernels and the pipeline, and nothing below imports it.
"""
