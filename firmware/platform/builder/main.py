"""SCons builder of the mbforge-emulated dev-platform: one bare-metal ELF, nothing else.

Invariants (each one was a real failure mode, see shared/notes/offline-toolchain.md):
- the linker script reaches the link once, via LDSCRIPT_PATH (PlatformIO adds `-T`
  itself; a second `-T` redeclares the memory regions and initialised data reads 0);
- the machine flags (-mcpu/-mthumb/-mfpu/-mfloat-abi) are in LINKFLAGS as well as
  CCFLAGS, so the multilib of libc/libm/libgcc that matches the float ABI is linked:
  hard float on a board with "fpu", else -mfloat-abi=soft (Cortex-M3: no FPU, float
  and double in software);
- there is no uploader, so the program is $BUILD_DIR/program.elf.
"""
import os

from SCons.Script import AlwaysBuild, Default, DefaultEnvironment

env = DefaultEnvironment()
board = env.BoardConfig()

machine = ["-mcpu=%s" % board.get("build.cpu"), "-mthumb"]
if board.get("build.fpu", ""):
    machine += ["-mfpu=%s" % board.get("build.fpu"),
                "-mfloat-abi=%s" % board.get("build.float_abi", "hard")]
else:
    machine += ["-mfloat-abi=%s" % board.get("build.float_abi", "soft")]

env.Replace(
    AR="arm-none-eabi-ar",
    AS="arm-none-eabi-as",
    CC="arm-none-eabi-gcc",
    CXX="arm-none-eabi-g++",
    GDB="arm-none-eabi-gdb",
    OBJCOPY="arm-none-eabi-objcopy",
    RANLIB="arm-none-eabi-ranlib",
    SIZETOOL="arm-none-eabi-size",
    ARFLAGS=["rc"],
    SIZEPRINTCMD="$SIZETOOL -B -d $SOURCES",
    PROGSUFFIX=".elf",
)
env.Append(
    ASFLAGS=machine,
    ASPPFLAGS=["-x", "assembler-with-cpp"],
    CCFLAGS=machine + ["-ffunction-sections", "-fdata-sections"],
    CPPDEFINES=[("F_CPU", "$BOARD_F_CPU")],
    LINKFLAGS=machine + ["-nostartfiles", "-Wl,--gc-sections", "--specs=nano.specs"],
    LIBS=["c", "m", "gcc"],
)

# board_build.ldscript is relative to the project: make it absolute so the link does
# not depend on the directory SCons runs in.
if env.get("LDSCRIPT_PATH"):
    script = env.subst("$LDSCRIPT_PATH")
    if not os.path.isabs(script):
        env.Replace(LDSCRIPT_PATH=os.path.join(env.subst("$PROJECT_DIR"), script))

target_elf = env.BuildProgram()
target_size = env.Alias("size", target_elf, env.VerboseAction("$SIZEPRINTCMD", "Calculating size $SOURCE"))
AlwaysBuild(target_size)
Default([target_elf, target_size])
